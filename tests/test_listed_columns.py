"""Source columns from the schema listing dbt's relation cache keeps (SHOW TABLE EXTENDED)
instead of a DESCRIBE per table: the parser takes only what the listing names exactly as
DESCRIBE would, and gives up (the caller then describes) on anything else. The Spark test
checks the two agree on a real table of every plain type."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.manifests import package_runtime

PLAIN = """Catalog: spark_catalog
Database: raw
Table: orders
Type: MANAGED
Provider: parquet
Table Properties: [x=1,2]
Location: file:/w/raw.db/orders
Schema: root
 |-- order_id: long (nullable = true)
 |-- note: with colon: string (nullable = true)
 |-- amount: decimal(10,2) (nullable = false)
"""


def listing_columns(text: str | None) -> list[tuple[str, str]] | None:
    columns: Any = package_runtime().macro("_ivm_listing_columns")(text)
    return None if columns is None else [(c.name, c.data_type) for c in columns]


def test_plain_columns_with_describe_type_names() -> None:
    expected = [("order_id", "bigint"), ("note: with colon", "string"), ("amount", "decimal(10,2)")]
    assert listing_columns(PLAIN) == expected


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        # a Delta table: its catalog entry lists no columns
        "Provider: delta\nLocation: file:/w/t\n",
        PLAIN.replace("Provider: parquet", "Provider: delta"),
        # a nested type: the tree does not name it as DESCRIBE does
        PLAIN + " |-- s: struct (nullable = true)\n |    |-- x: integer (nullable = true)\n",
        PLAIN + " |-- i: interval day to second (nullable = true)\n",
        PLAIN + "Partition Columns: [`region`]\n",
        # information from DESCRIBE (the fallback listing of some engines)
        "order_id\tbigint\n# Detailed Table Information\n",
    ],
)
def test_anything_else_is_described(text: str | None) -> None:
    assert listing_columns(text) is None


def test_listing_agrees_with_describe(spark: SparkSession) -> None:
    spark.sql("create schema if not exists listed_cols")
    spark.sql("drop table if exists listed_cols.plain")
    spark.sql(
        "create table listed_cols.plain (a bigint, b int, c smallint, d tinyint, e double, f float,"
        " g boolean, h binary, i date, j timestamp, k timestamp_ntz, l decimal(12,3), `m n` string)"
        " using parquet"
    )
    row = spark.sql("show table extended in listed_cols like 'plain'").collect()[0]
    described = [(r.col_name, r.data_type) for r in spark.sql("describe table listed_cols.plain").collect()]
    assert listing_columns(row.information) == described
