"""The quick-start demo: build the integration project's ivm models, change the upstreams,
refresh incrementally, test consistency, and print what every refresh did.

Run from the repository root: `python -m dbt_ivm.demo` (the Makefile's `demo` target).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession

from dbt_ivm.changelog import ChangeLoggedTable, Op, append_rows
from dbt_ivm.runner import DbtProject
from dbt_ivm.spark import local_spark

RAW = "analytics_raw"
KEYS = {"orders": ["order_id"], "customers": ["customer_id"], "order_lines": ["line_id"]}


@contextmanager
def step(message: str) -> Iterator[None]:
    """Print what runs and how long it took, so a long run never looks hung."""
    print(f"\n==> {message}", flush=True)
    started = time.perf_counter()
    yield
    print(f"    ({time.perf_counter() - started:.1f} s)", flush=True)


def upstreams(spark: SparkSession) -> dict[str, ChangeLoggedTable]:
    return {
        name: ChangeLoggedTable(spark, f"{RAW}.{name}", f"{RAW}.{name}_changes", key)
        for name, key in KEYS.items()
    }


def apply_batch(spark: SparkSession) -> None:
    """A mixed batch: inserts, updates (also of join keys), deletes, a customer moving region."""
    tables = upstreams(spark)
    tables["customers"].apply(
        [
            Op(
                "update",
                {"customer_id": 3, "name": "Linus", "region": "AMER", "segment": "enterprise"},
            ),
            Op(
                "insert",
                {"customer_id": 6, "name": "Margaret", "region": "APAC", "segment": "retail"},
            ),
        ]
    )
    tables["orders"].apply(
        [
            Op(
                "insert",
                {
                    "order_id": 107,
                    "customer_id": 6,
                    "order_date": date(2026, 1, 10),
                    "status": "open",
                    "amount": Decimal("18.00"),
                },
            ),
            Op(
                "update",
                {
                    "order_id": 101,
                    "customer_id": 1,
                    "order_date": date(2026, 1, 5),
                    "status": "shipped",
                    "amount": Decimal("35.00"),
                },
            ),
            Op(
                "update",
                {
                    "order_id": 105,
                    "customer_id": 2,
                    "order_date": date(2026, 1, 8),
                    "status": "open",
                    "amount": Decimal("42.00"),
                },
            ),
            Op("delete", {"order_id": 100}),
        ]
    )
    tables["order_lines"].apply(
        [
            Op(
                "insert",
                {
                    "line_id": 8,
                    "order_id": 107,
                    "sku": "A-1",
                    "quantity": 1,
                    "price": Decimal("18.00"),
                },
            ),
            Op(
                "update",
                {
                    "line_id": 4,
                    "order_id": 102,
                    "sku": "C-3",
                    "quantity": 5,
                    "price": Decimal("245.00"),
                },
            ),
            Op("delete", {"line_id": 1}),
        ]
    )
    append_rows(
        spark,
        f"{RAW}.page_views",
        [
            {
                "view_id": 6,
                "customer_id": 6,
                "page": "/home",
                "loaded_at": datetime(2026, 1, 10, 8, 0),
            },
            {
                "view_id": 7,
                "customer_id": 3,
                "page": "/docs",
                "loaded_at": datetime(2026, 1, 10, 8, 30),
            },
        ],
    )


def print_refresh_log(spark: SparkSession) -> None:
    rows = spark.sql(
        "select model, path, reason, message, versions_from, versions_to, rows_deleted, "
        "rows_inserted, duration_s from analytics.ivm_refresh_log order by started_at"
    ).collect()
    print(f"{'model':<20} {'path':<12} {'-rows':>5} {'+rows':>5} {'sec':>6}  upstream versions | why")
    for r in rows:
        before = r.versions_from or {}
        versions = ", ".join(
            f"{name} {before.get(name) or '-'} -> {after or '-'}"
            for name, after in sorted((r.versions_to or {}).items())
        )
        why = r.reason + (f" [{r.message}]" if r.message else "")
        name = r.model.split(".")[-1]
        print(
            f"{name:<20} {r.path:<12} {r.rows_deleted!s:>5} {r.rows_inserted!s:>5} "
            f"{r.duration_s or 0:>6.2f}  {versions} | {why}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--project-dir", type=Path, default=Path("integration_tests"))
    args = parser.parse_args(argv)
    project_dir = args.project_dir.resolve()
    spark = local_spark(project_dir)
    dbt = DbtProject(project_dir, project_dir)

    with step("Resetting the demo warehouse"):
        for schema in ("analytics", RAW):
            spark.sql(f"drop database if exists {schema} cascade")
    with step("dbt deps + dbt seed: load the upstream tables"):
        dbt.invoke("deps")
        dbt.invoke("seed", "--full-refresh")
        for table in upstreams(spark).values():
            table.create_log()
    with step("dbt run: first build of the ivm models"):
        dbt.invoke("run")
    with step("dbt run again with no upstream change: every refresh is a no-op"):
        dbt.invoke("run")
    with step("Upstream batch: inserts, updates (join keys too), deletes, appended page views"):
        apply_batch(spark)
    with step("dbt run: incremental refresh"):
        dbt.invoke("run")
    with step("dbt test: every ivm table equals its definition recomputed"):
        dbt.invoke("test")
    with step("Refresh log (model ivm_refresh_log)"):
        print_refresh_log(spark)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
