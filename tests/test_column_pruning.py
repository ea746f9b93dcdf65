"""A refresh reads only the upstream columns its query can name (macros/materialization/
refresh_plan.sql): an update of other columns alone nets to no change, and a query that
reads whole rows (`*`) keeps every column. The names in the macro runtime; the refreshes on
Spark, both formats, against the models' definitions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dbt_ivm.changelog import Op
from dbt_ivm.macro_runtime import Column
from tests.manifests import package_runtime
from tests.support import IvmProject, format_project, sources_yaml
from tests.test_analyzer import upstreams


def referenced(sql: str) -> list[str] | None:
    parsed = package_runtime().macro("ivm_analyze")(sql, upstreams(["a.items", "a.tags"]))["parsed"]
    names = package_runtime().macro("_ivm_referenced_names")(parsed)
    return None if names is None else sorted(names)


@pytest.mark.parametrize(
    "sql",
    [
        "select count(*) as n, sum(i.price * 2) as s from a.items i",
        "select id, price*qty as v from a.items",
        "select id, (price + 1) * 2 as v from a.items",
        "select id, 3 * price as v from a.items",
    ],
)
def test_counts_and_products_are_not_whole_rows(sql: str) -> None:
    names = referenced(sql)
    assert names is not None
    assert "price" in names
    assert "note" not in names


@pytest.mark.parametrize(
    "sql",
    [
        "select * from a.items",
        "select distinct * from a.items",
        "select i.*, t.tag from a.items i join a.tags t on t.item_id = i.id",
        "select t.tag, * from a.items i join a.tags t on t.item_id = i.id",
        "select hash(*) as h from a.items",
    ],
)
def test_a_star_reads_whole_rows(sql: str) -> None:
    assert referenced(sql) is None


def test_an_upstream_keeps_what_the_query_names_and_its_row_key() -> None:
    columns = [
        Column("id", "bigint"),
        Column("Price", "double"),
        Column("note", "string"),
        Column("at", "bigint"),
    ]
    up = {
        "name": "items",
        "kind": "change_log",
        "feed": "delta",
        "unique_key": ["ID"],
        "watermark": None,
        "described_columns": columns,
    }
    p: dict[str, Any] = {"up": up, "referenced": ["price", "items"]}
    package_runtime().macro("_ivm_set_columns")({"name": "m"}, p)
    assert [c.name for c in p["columns"]] == ["id", "Price"]
    assert p["all_columns"] == columns
    p["referenced"] = None
    package_runtime().macro("_ivm_set_columns")({"name": "m"}, p)
    assert p["columns"] == columns


MODELS = {
    "priced": "select id, price from {{ source('shop', 'items') }} where price > 0",
    "totals": "select count(*) as n, sum(price) as total from {{ source('shop', 'items') }}",
    "whole": "select * from {{ source('shop', 'items') }}",
}


@pytest.fixture(scope="module", params=["parquet", "delta"])
def shop(request: pytest.FixtureRequest, project_factory) -> Iterator[tuple[IvmProject, Any]]:
    project, fmt = format_project(request, project_factory, "pruning")
    rows = [{"id": i, "price": float(i), "note": f"n{i}"} for i in range(6)]
    items, declared = project.tracked_table(
        fmt, "items", "id bigint, price double, note string", rows, ["id"]
    )
    project.write("models/sources.yml", sources_yaml(project.raw, {"items": declared}))
    for name, sql in MODELS.items():
        project.write(
            f"models/{name}.sql", f"{{{{ config(materialized='ivm', file_format='{fmt}') }}}}\n{sql}\n"
        )
    project.run()
    yield project, items


def test_an_update_of_unread_columns_changes_nothing(shop) -> None:
    project, items = shop
    items.apply([Op("update", {"id": 2, "price": 2.0, "note": "edited"})])
    project.run()
    for model in ("priced", "totals"):
        refresh = project.last_refresh(model)
        assert (refresh["rows_deleted"], refresh["rows_inserted"]) == (0, 0), refresh
    whole = project.last_refresh("whole")
    assert (whole["rows_deleted"], whole["rows_inserted"]) == (1, 1), whole
    project.assert_consistent(list(MODELS), "after an update of the note only")

    items.apply([Op("update", {"id": 3, "price": 30.0, "note": "again"}), Op("delete", {"id": 4})])
    project.run()
    priced = project.last_refresh("priced")
    assert (priced["rows_deleted"], priced["rows_inserted"]) == (2, 1), priced
    project.assert_consistent(list(MODELS), "after a price update and a delete")
