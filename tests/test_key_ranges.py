"""Key ranges of a join term (macros/change_sql/join_changes.sql): which columns of a changed
upstream cut its join partners to a range of literals, and the SQL that gives; in the macro
runtime, no Spark. The differential tests check the refreshed tables against their
definitions on both formats."""

from __future__ import annotations

from typing import Any

import pytest
import sqlglot

from dbt_ivm.macro_runtime import Column, Runtime
from tests.manifests import package_runtime


@pytest.fixture(scope="module")
def runtime() -> Runtime:
    return package_runtime()


def plan() -> list[dict[str, Any]]:
    """orders (0) joins lineitem (1) by order key and customer (2) by customer key; lineitem
    joins part (3) by part key."""
    return [
        {
            "index": 0,
            "columns": [
                Column("o_orderkey", "bigint"),
                Column("o_custkey", "int"),
                Column("o_total", "double"),
                Column("o_day", "date"),
                Column("o_clerk", "string"),
                Column("o_region", "string"),
            ],
        },
        {
            "index": 1,
            "columns": [
                Column("l_orderkey", "bigint"),
                Column("l_partkey", "bigint"),
                Column("l_total", "double"),
            ],
        },
        {
            "index": 2,
            "columns": [
                Column("c_custkey", "decimal(12,0)"),
                Column("c_since", "timestamp"),
                Column("c_clerk", "string collate UTF8_LCASE"),
                Column("c_region", "int"),
            ],
        },
        {"index": 3, "columns": [Column("p_partkey", "bigint")]},
    ]


EDGES = [
    {"a": 1, "ca": "l_orderkey", "b": 0, "cb": "o_orderkey"},
    {"a": 0, "ca": "o_custkey", "b": 2, "cb": "c_custkey"},
    {"a": 0, "ca": "o_total", "b": 1, "cb": "l_total"},
    {"a": 0, "ca": "o_day", "b": 2, "cb": "c_since"},
    {"a": 0, "ca": "o_clerk", "b": 2, "cb": "c_clerk"},
    {"a": 0, "ca": "o_region", "b": 2, "cb": "c_region"},
    {"a": 1, "ca": "l_partkey", "b": 3, "cb": "p_partkey"},
]


def test_only_columns_whose_text_and_order_serve_are_ranged(runtime: Runtime) -> None:
    steps = plan()
    ranged = runtime.macro("_ivm_range_columns")(steps[0], steps, EDGES)
    # integers against a decimal are one kind; doubles, a date against a timestamp, a
    # collated string and a string against an integer are not ranged
    assert ranged == {
        "o_orderkey": {"name": "o_orderkey", "type": "bigint", "partners": ["1.l_orderkey"]},
        "o_custkey": {"name": "o_custkey", "type": "int", "partners": ["2.c_custkey"]},
    }


def test_ranges_are_read_over_new_and_old_images(runtime: Runtime) -> None:
    ranged = {"k": {"name": "K", "type": "bigint", "partners": ["1.x"]}}
    sql = runtime.macro("_ivm_key_ranges_sql")(ranged, "__ivm_new", True)
    assert sql == (
        "map('min:k', cast(least(min(case when __ivm_new then `K` end), min(__ivm_before.`K`)) as string), "
        "'max:k', cast(greatest(max(case when __ivm_new then `K` end), max(__ivm_before.`K`)) as string))"
    )
    assert runtime.macro("_ivm_key_ranges_sql")({}, "true", False) == "cast(map() as map<string, string>)"
    sqlglot.parse_one(f"select {sql} from t", read="spark")


def test_bounds_are_literals_of_the_column_type(runtime: Runtime) -> None:
    ranged = {"k": {"name": "k", "type": "string", "partners": ["1.x"]}}
    literals = runtime.macro("_ivm_key_range_literals")({"min:k": "O'Brien", "max:k": None}, ranged)
    # a NULL bound (no non-NULL changed key) matches no row, as the equality would
    assert literals == {
        "k": {
            "lo": "cast('O\\'Brien' as string)",
            "hi": "cast(cast(null as string) as string)",
            "partners": ["1.x"],
        }
    }


def test_partners_one_equality_away_are_cut_to_the_range(runtime: Runtime) -> None:
    steps = plan()
    changed = steps[0]
    ranged = runtime.macro("_ivm_range_columns")(changed, steps, EDGES)
    changed.update(
        {
            "broadcast": True,
            "ranges": runtime.macro("_ivm_key_range_literals")(
                {
                    "min:o_orderkey": "100",
                    "max:o_orderkey": "250",
                    "min:o_custkey": "7",
                    "max:o_custkey": "7",
                },
                ranged,
            ),
        }
    )
    relations = {i: f"up{i}" for i in range(4)}
    out = runtime.macro("_ivm_reduced_relations")(EDGES, relations, changed)
    assert "`l_orderkey` between cast('100' as bigint) and cast('250' as bigint)" in out[1]
    assert "`c_custkey` between cast('7' as int) and cast('7' as int)" in out[2]
    # the part is cut by the lineitems the range cut, not by a range of its own
    assert "between" not in out[3].replace(out[1], "")
    for relation in out.values():
        sqlglot.parse_one(f"select * from {relation} t", read="spark")


def test_no_range_without_counted_ranges(runtime: Runtime) -> None:
    steps = plan()
    changed = steps[0]
    changed.update({"broadcast": True})
    out = runtime.macro("_ivm_reduced_relations")(EDGES, {i: f"up{i}" for i in range(4)}, changed)
    assert all("between" not in relation for relation in out.values())
