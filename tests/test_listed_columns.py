"""Source columns from the schema listing dbt's relation cache keeps (SHOW TABLE EXTENDED)
instead of a DESCRIBE per table: the parser takes only what the listing names exactly as
DESCRIBE would, and gives up (the caller then describes) on anything else. The Spark test
checks the two agree on a real table of every plain type. A parquet model's own table is
read the same way, with its lease: its DESCRIBE rows are rebuilt from the listing only when
the columns are those the last refresh recorded."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from dbt_ivm.changelog import Op
from tests.manifests import package_runtime
from tests.support import sources_yaml

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


def test_nested_columns_by_name() -> None:
    """With nested, a map, struct or array column is listed with the tree's word for its type
    (the refresh log's maps); its fields are not columns."""
    text = PLAIN + (
        " |-- versions: map (nullable = true)\n"
        " |    |-- key: string\n"
        " |    |-- value: string (valueContainsNull = true)\n"
        " |-- s: struct (nullable = true)\n"
        " |    |-- x: integer (nullable = true)\n"
    )
    listing = package_runtime().macro("_ivm_listing_columns")
    columns: Any = listing(text, nested=True)
    named = [(c.name, c.data_type) for c in columns]
    assert named[3:] == [("versions", "map"), ("s", "struct")]
    assert named[:3] == listing_columns(PLAIN)
    assert listing(PLAIN + " |-- i: interval day (nullable = true)\n", nested=True) is None


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


def listed_as_described(text: str | None, stored: str | None) -> list[list[Any]] | None:
    rows: Any = package_runtime().macro("_ivm_listed_as_described")(text, stored)
    return None if rows is None else [list(r) for r in rows]


STORED = "order_id bigint; note: with colon string; amount decimal(10,2)"


def test_the_table_listed_gives_the_rows_the_refresh_reads() -> None:
    runtime = package_runtime()
    rows = listed_as_described(PLAIN, STORED)
    assert rows is not None
    columns = runtime.macro("_ivm_described_columns")(rows)
    assert [(c.name, c.data_type) for c in columns] == [
        ("order_id", "bigint"),
        ("note: with colon", "string"),
        ("amount", "decimal(10,2)"),
    ]
    assert runtime.macro("_ivm_describe_value")("describe t", "Location", rows) == "file:/w/raw.db/orders"
    assert runtime.macro("_ivm_table_info")(rows) == {"provider": "parquet", "properties": {"x": "1,2"}}


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        (None, STORED),
        (PLAIN, None),
        # DESCRIBE said varchar(5) where the listing says string: described again
        (PLAIN, STORED.replace("note: with colon string", "note: with colon varchar(5)")),
        (PLAIN.replace("Provider: parquet", "Provider: delta"), STORED),
        # a comment over two lines, one of them a detail's key: not taken apart by guessing
        (PLAIN.replace("Type: MANAGED", "Comment: first line\nsecond line\nType: MANAGED"), STORED),
        (PLAIN.replace("Type: MANAGED", "Comment: moved\nLocation: file:/elsewhere\nType: MANAGED"), STORED),
    ],
)
def test_the_table_is_described_unless_listed_exactly(text: str | None, stored: str | None) -> None:
    assert listed_as_described(text, stored) is None


def test_listed_table_agrees_with_describe(spark: SparkSession) -> None:
    """The rows of a partitioned parquet table rebuilt from its listing give the columns,
    location, provider and properties its DESCRIBE TABLE EXTENDED gives."""
    runtime = package_runtime()
    spark.sql("create schema if not exists listed_cols")
    spark.sql("drop table if exists listed_cols.parted")
    spark.sql(
        "create table listed_cols.parted (a bigint, b decimal(10,2), r string) using parquet"
        " partitioned by (r) tblproperties ('dbt_ivm.row_key' = 'a,r', 'x' = 'y')"
    )
    described = [list(r) for r in spark.sql("describe table extended listed_cols.parted").collect()]
    columns = runtime.macro("_ivm_described_columns")(described)
    stored = runtime.macro("_ivm_columns_signature")(columns)
    info = spark.sql("show table extended in listed_cols like 'parted'").collect()[0].information
    rows = listed_as_described(info, stored)
    assert rows is not None
    listed = runtime.macro("_ivm_described_columns")(rows)
    assert [(c.name, c.data_type) for c in listed] == [(c.name, c.data_type) for c in columns]
    for name in ("Location", "Provider"):
        value = runtime.macro("_ivm_describe_value")
        assert value("describe", name, rows) == value("describe", name, described)
    assert runtime.macro("_ivm_table_info")(rows) == runtime.macro("_ivm_table_info")(described)


def test_a_model_with_a_pre_hook_describes_its_table(project_factory) -> None:
    """A pre-hook runs after the lease's read-back listed the table and could change it:
    that model describes its table; one without a pre-hook does not. Both stay exact."""
    project = project_factory("listed_hook")
    rows = [{"order_id": i, "amount": float(i)} for i in range(5)]
    orders, declared = project.tracked_table(
        "parquet", "orders", "order_id bigint, amount double", rows, ["order_id"]
    )
    project.write("models/sources.yml", sources_yaml(project.raw, {"orders": declared}))
    body = "select order_id, amount * 2 as doubled from {{ source('shop', 'orders') }}"
    project.write("models/plain.sql", "{{ config(materialized='ivm') }}\n" + body)
    project.write("models/hooked.sql", "{{ config(materialized='ivm', pre_hook='select 1') }}\n" + body)
    project.run()
    orders.apply([Op("update", {"order_id": 3, "amount": 30.0})])
    sent = project.statements()
    for model in ("plain", "hooked"):
        assert project.last_path(model) == "incremental", project.last_refresh(model)
    assert not [s for s in sent["plain"] if s.startswith("describe")], sent["plain"]
    assert [s for s in sent["hooked"] if s.startswith("describe extended")], sent["hooked"]
    project.assert_consistent(["plain", "hooked"], "after a refresh with and without a pre-hook")
