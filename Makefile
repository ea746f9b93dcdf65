# Two entry points (see README): `make demo` and `make test`. Both set up .venv first.
VENV ?= .venv
PYTHON ?= python3
BIN = $(VENV)/bin

.PHONY: setup demo test lint clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	bash scripts/ensure_java.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[spark,dev]"
	touch $@

demo: setup
	$(BIN)/python -m dbt_ivm.demo

lint: setup
	$(BIN)/ruff check python tests

test: lint
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) integration_tests/target integration_tests/dbt_packages \
	  integration_tests/spark-warehouse integration_tests/metastore_db
