"""The quick-start demo: build the integration project's ivm models, change the upstreams,
refresh incrementally, test consistency, and print what every refresh did.

Run from the repository root: `python -m dbt_ivm.demo` (the Makefile's `demo` target).

`--format delta` (the default) runs on Delta Lake, loaded from the jars `make setup`
fetched into .delta-jars/: orders, customers and order_lines are Delta tables with change
data feed, changed with Delta's own INSERT, UPDATE, DELETE and MERGE, declared in
sources.yml by their row key alone; the ivm models are Delta tables, and every refresh that
changes one is one commit: a MERGE, an INSERT, or an INSERT ... REPLACE WHERE. `--format
parquet` needs no Delta: the same upstreams are parquet tables, each change also written to
a change log in Delta's change-data-feed schema (dbt_ivm.changelog), and the ivm models are
parquet tables.
page_views is an append-only parquet table (a watermark column) in both.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession

from dbt_ivm.changelog import ChangeLoggedTable, Op, append_rows, sql_literal
from dbt_ivm.runner import DbtProject
from dbt_ivm.spark import local_spark

SCHEMA = "analytics"
RAW = "analytics_raw"  # the upstream tables (sources.yml)
SEED = "analytics_seed"  # the CSVs of seeds/, loaded by dbt seed; the upstreams start as copies
KEYS = {"orders": ["order_id"], "customers": ["customer_id"], "order_lines": ["line_id"]}
FORMATS = ("delta", "parquet")


def delta_batch(raw: str = RAW) -> list[str]:
    """The batch on Delta, on the upstreams in schema `raw`: one commit per statement, read
    back by the next refresh through each table's change data feed (table_changes). The
    parquet run applies the same changes with PARQUET_BATCH."""
    return [
        f"UPDATE {raw}.customers SET region = 'AMER' WHERE customer_id = 3",
        f"INSERT INTO {raw}.customers VALUES (6, 'Margaret', 'APAC', 'retail')",
        f"INSERT INTO {raw}.orders VALUES (107, 6, DATE'2026-01-10', 'open', 18.00)",
        f"UPDATE {raw}.orders SET status = 'shipped' WHERE order_id = 101",
        f"UPDATE {raw}.orders SET customer_id = 2 WHERE order_id = 105",
        f"DELETE FROM {raw}.orders WHERE order_id = 100",
        # a CDC-style batch applied as one MERGE: an insert, an update and a delete
        f"""MERGE INTO {raw}.order_lines t
USING (SELECT * FROM VALUES (8, 107, 'A-1', 1, 18.00, false),
                            (4, 102, 'C-3', 5, 245.00, false),
                            (1, NULL, NULL, NULL, NULL, true)
         AS v(line_id, order_id, sku, quantity, price, deleted)) s
ON t.line_id = s.line_id
WHEN MATCHED AND s.deleted THEN DELETE
WHEN MATCHED THEN UPDATE SET order_id = s.order_id, sku = s.sku, quantity = s.quantity, price = s.price
WHEN NOT MATCHED AND NOT s.deleted THEN INSERT (line_id, order_id, sku, quantity, price)
  VALUES (s.line_id, s.order_id, s.sku, s.quantity, s.price)""",
    ]


DELTA_BATCH = delta_batch(RAW)

PARQUET_BATCH = {
    "customers": [
        Op("update", {"customer_id": 3, "name": "Linus", "region": "AMER", "segment": "enterprise"}),
        Op("insert", {"customer_id": 6, "name": "Margaret", "region": "APAC", "segment": "retail"}),
    ],
    "orders": [
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
    ],
    "order_lines": [
        Op("insert", {"line_id": 8, "order_id": 107, "sku": "A-1", "quantity": 1, "price": Decimal("18.00")}),
        Op(
            "update", {"line_id": 4, "order_id": 102, "sku": "C-3", "quantity": 5, "price": Decimal("245.00")}
        ),
        Op("delete", {"line_id": 1}),
    ],
}

NEW_PAGE_VIEWS = [
    {"view_id": 6, "customer_id": 6, "page": "/home", "loaded_at": datetime(2026, 1, 10, 8, 0)},
    {"view_id": 7, "customer_id": 3, "page": "/docs", "loaded_at": datetime(2026, 1, 10, 8, 30)},
]


@contextmanager
def step(message: str) -> Iterator[None]:
    """Print what runs and how long it took, so a long run never looks hung."""
    print(f"\n==> {message}", flush=True)
    started = time.perf_counter()
    yield
    print(f"    ({time.perf_counter() - started:.1f} s)", flush=True)


def sql(spark: SparkSession, statement: str) -> None:
    """Run a statement and show it."""
    print("    " + statement.replace("\n", "\n    ") + ";", flush=True)
    spark.sql(statement)


def upstream_statements(fmt: str, raw: str = RAW, seed: str = SEED) -> list[str]:
    """The statements creating the upstream tables in schema `raw` as copies of the seeds
    in `seed`: with change data feed on Delta; page_views append-only (parquet)."""
    delta = "USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')"
    using = delta if fmt == "delta" else "USING parquet"
    return [f"CREATE TABLE {raw}.{name} {using} AS SELECT * FROM {seed}.{name}" for name in KEYS] + [
        f"CREATE TABLE {raw}.page_views USING parquet AS SELECT * FROM {seed}.page_views"
    ]


def page_views_insert(raw: str = RAW) -> str:
    """NEW_PAGE_VIEWS appended by one INSERT statement (the demo appends them with a
    DataFrame; a Spark Thrift Server client sends this)."""
    names = list(NEW_PAGE_VIEWS[0])
    values = ", ".join("(" + ", ".join(sql_literal(r[n]) for n in names) + ")" for r in NEW_PAGE_VIEWS)
    return f"INSERT INTO {raw}.page_views ({', '.join(names)}) VALUES {values}"


def load_upstreams(spark: SparkSession, fmt: str) -> None:
    """The upstream tables, copied from the seeds: with change data feed on Delta, with a
    change log next to each on parquet; page_views append-only."""
    for statement in upstream_statements(fmt):
        sql(spark, statement)
    if fmt == "parquet":
        for table in changelogged(spark).values():
            table.create_log()
            print(f"    (change log {table.log}: the table's columns + _change_type, _commit_version, ...)")


def changelogged(spark: SparkSession) -> dict[str, ChangeLoggedTable]:
    return {
        name: ChangeLoggedTable(spark, f"{RAW}.{name}", f"{RAW}.{name}_changes", key)
        for name, key in KEYS.items()
    }


def apply_batch(spark: SparkSession, fmt: str) -> None:
    """A mixed batch: inserts, updates (also of join keys), deletes, a customer moving region,
    appended page views."""
    if fmt == "delta":
        for statement in DELTA_BATCH:
            sql(spark, statement)
    else:
        tables = changelogged(spark)
        for name, ops in PARQUET_BATCH.items():
            version = tables[name].apply(ops)
            print(f"    {name}: {', '.join(op.kind for op in ops)} (change log up to version {version})")
    append_rows(spark, f"{RAW}.page_views", NEW_PAGE_VIEWS)
    print(f"    INSERT INTO {RAW}.page_views: {len(NEW_PAGE_VIEWS)} rows (append-only)")


def print_delta_history(spark: SparkSession, table: str) -> None:
    """The commits of an ivm Delta table: the build, then one per refresh that changed it."""
    print(f"    DESCRIBE HISTORY {table}")
    names = {
        "numTargetRowsInserted": "inserted",
        "numTargetRowsUpdated": "updated",
        "numTargetRowsDeleted": "deleted",
        "numOutputRows": "rows written",
    }
    for commit in reversed(spark.sql(f"describe history {table}").collect()):
        metrics = commit.operationMetrics or {}
        if "numDeletedRows" in metrics:
            # INSERT ... REPLACE WHERE: rows kept in the files it touched are output again, as copies
            inserted = int(metrics.get("numOutputRows", 0)) - int(metrics.get("numCopiedRows", 0))
            counts = f"replaced: deleted {metrics['numDeletedRows']}, inserted {inserted}"
        else:
            counts = ", ".join(f"{label} {metrics[key]}" for key, label in names.items() if key in metrics)
        print(f"    version {commit.version}: {commit.operation} ({counts})")


def print_refresh_log(spark: SparkSession) -> None:
    rows = spark.sql(
        "select model, path, reason, message, versions_from, versions_to, rows_deleted, "
        f"rows_inserted, duration_s from {SCHEMA}.ivm_refresh_log order by started_at"
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
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--project-dir", type=Path, default=Path("integration_tests"))
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="delta",
        help="delta (default: Delta Lake from .delta-jars/, change data feed) or parquet (no Delta needed)",
    )
    args = parser.parse_args(argv)
    fmt: str = args.format
    project_dir = args.project_dir.resolve()
    started = time.perf_counter()
    with step(f"Starting embedded Spark ({'with Delta Lake' if fmt == 'delta' else 'parquet only'})"):
        spark = local_spark(project_dir, delta=fmt == "delta")
    dbt = DbtProject(project_dir, project_dir)
    fmt_vars = ("--vars", json.dumps({"dbt_ivm_demo_format": fmt}))

    with step("Resetting the demo warehouse"):
        for schema in (SCHEMA, RAW, SEED):
            spark.sql(f"drop database if exists {schema} cascade")
    with step(f"dbt deps + dbt seed: load the CSVs into {SEED}"):
        dbt.invoke("deps")
        dbt.invoke("seed", "--full-refresh", *fmt_vars)
    with step(f"Create the upstream tables in {RAW} ({fmt})"):
        spark.sql(f"create database if not exists {RAW}")
        load_upstreams(spark, fmt)
    with step(f"dbt run: first build of the ivm models ({fmt} tables)"):
        dbt.invoke("run", *fmt_vars)
    with step("dbt run again with no upstream change: every refresh is a no-op"):
        dbt.invoke("run", *fmt_vars)
    with step("Upstream batch: inserts, updates (join keys too), deletes, appended page views"):
        apply_batch(spark, fmt)
    with step("dbt run: incremental refresh"):
        dbt.invoke("run", *fmt_vars)
    with step("dbt test: every ivm table equals its definition recomputed"):
        dbt.invoke("test", *fmt_vars)
    if fmt == "delta":
        with step("Delta commits of two ivm tables: the build, then one commit per refresh that changed it"):
            print_delta_history(spark, f"{SCHEMA}.order_facts")
            print_delta_history(spark, f"{SCHEMA}.revenue_by_region")
    with step("Refresh log (model ivm_refresh_log)"):
        print_refresh_log(spark)
    print(f"\nDemo on {fmt} finished in {time.perf_counter() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
