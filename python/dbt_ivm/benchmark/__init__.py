"""The dbt_ivm benchmark: ivm refresh against rebuild of the same SQL as a table, on
TPC-H data generated offline, across change kinds and sizes (`python -m dbt_ivm.benchmark`).

Modules: tpch (data), upstreams (change-logged tables), changes (batches), workloads and
project (the dbt models), measure and runner (the run), results and report (output)."""

from dbt_ivm.benchmark.config import BenchConfig
from dbt_ivm.benchmark.runner import run_benchmark

__all__ = ["BenchConfig", "run_benchmark"]
