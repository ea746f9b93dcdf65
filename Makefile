# Two entry points (see README): `make demo` and `make test`. Both set up .venv first.
VENV ?= .venv
PYTHON ?= python3
BIN = $(VENV)/bin

.PHONY: setup demo test quick soak lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	bash scripts/ensure_java.sh
	bash scripts/fetch_delta_jars.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[spark,dev,bench]"
	touch $@

demo: setup
	$(BIN)/python -m dbt_ivm.demo

lint: setup
	$(BIN)/ruff check python tests
	$(BIN)/ruff format --check python tests

test: lint
	$(BIN)/python -m pytest

# the fast tier: analysis, change SQL and CLI at macro level, no Spark session (about 2 minutes)
quick: lint
	$(BIN)/python -m pytest -m "not spark"

# README "Reliability": the SIGKILL campaigns as measurements (Delta and parquet models), with reports
# (`make test` runs them too: 4 kills through the thrift server, 1 on the embedded session)
SOAK_KILLS ?= 36
soak: setup
	PYTHONPATH=python:. $(BIN)/python -m tests.kill_worker campaign --thrift --kills $(SOAK_KILLS) \
	  --work /tmp/dbt_ivm_soak_thrift --out benchmark_results/reliability/kills_thrift.md
	PYTHONPATH=python:. $(BIN)/python -m tests.kill_worker campaign --kills $(SOAK_KILLS) \
	  --work /tmp/dbt_ivm_soak_embedded --out benchmark_results/reliability/kills_embedded.md

# The benchmark (README "Benchmark"): TPC-H SF 0.1, results in benchmark_results/sf0.1.
# More: make bench BENCH_ARGS="--sf 1 --out benchmark_results/sf1"
BENCH_ARGS ?= --sf 0.1 --out benchmark_results/sf0.1

# the benchmark's extra is part of setup: its smoke test runs in `make test`
bench: setup
	$(BIN)/python -m dbt_ivm.benchmark $(BENCH_ARGS)

clean:
	rm -rf $(VENV) integration_tests/target integration_tests/dbt_packages \
	  integration_tests/spark-warehouse integration_tests/metastore_db
