"""Which path an aggregate refresh takes, and what it reads.

count/sum/avg views are refreshed from the change set alone, and min/max views after
insert-only batches too: the tests prove it by making the upstream table unreadable
during the refresh (any query that scans it fails). Deletes under min/max recompute the
affected groups from the definition, and an interrupted aggregate refresh is repaired by
a rebuild, since merging a delta twice would count it twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import pytest

from dbt_ivm.changelog import ChangeLoggedTable, Op
from tests.support import IvmProject, sources_yaml

ORDERS = "{{ source('shop', 'orders') }}"

MODELS = {
    "sales": f"""\
        {{{{ config(materialized='ivm') }}}}
        select o.grp, count(*) as n, sum(o.v) as total, avg(o.v) as mean
        from {ORDERS} o
        group by o.grp
        """,
    "extremes": f"""\
        {{{{ config(materialized='ivm') }}}}
        select o.grp, min(o.v) as lowest, max(o.v) as highest
        from {ORDERS} o
        group by o.grp
        """,
    # no aliases, as people write it and as a `table` model accepts
    "unaliased": f"""\
        {{{{ config(materialized='ivm') }}}}
        select o.grp, count(*), sum(o.v), avg(o.v), sum(o.v) * 2, case when count(*) > 1 then 2 end
        from {ORDERS} o
        group by o.grp
        """,
    # no GROUP BY, and a WHERE that a change can miss entirely
    "big_total": f"""\
        {{{{ config(materialized='ivm') }}}}
        select count(*) as n, sum(o.v) as total
        from {ORDERS} o
        where o.v > 3
        """,
}


@pytest.fixture(scope="module")
def shop(project_factory) -> tuple[IvmProject, ChangeLoggedTable]:
    project = project_factory("aggregate_paths")
    sources = {"orders": "unique_key: [id], change_log: orders_changes"}
    project.write("models/sources.yml", sources_yaml(project.raw, sources))
    for name, sql in MODELS.items():
        project.write(f"models/{name}.sql", sql)
    project.create_table(
        "orders",
        "id bigint, grp string, v decimal(10,2)",
        [{"id": i, "grp": "ab"[i % 2], "v": Decimal(i)} for i in range(1, 7)],
    )
    orders = project.logged_table("orders", ["id"])
    project.run()
    return project, orders


@contextmanager
def unreadable(project: IvmProject, table: str) -> Iterator[None]:
    """Replace an upstream table by a view with the same columns that fails when scanned."""
    name = f"{project.raw}.{table}"
    project.spark.sql(f"alter table {name} rename to {name}__hidden")
    project.spark.sql(
        f"create view {name} as select * from {name}__hidden "
        f"where raise_error('the upstream table {table} was read') is null"
    )
    try:
        yield
    finally:
        project.spark.sql(f"drop view {name}")
        project.spark.sql(f"alter table {name}__hidden rename to {name}")


def test_count_sum_avg_refresh_reads_only_the_change_set(shop: tuple[IvmProject, ChangeLoggedTable]) -> None:
    project, orders = shop
    orders.apply(
        [
            Op("update", {"id": 1, "grp": "b", "v": Decimal("2.50")}),
            Op("delete", {"id": 2}),
            Op("insert", {"id": 20, "grp": None, "v": None}),
        ]
    )
    with unreadable(project, "orders"):
        project.run("--select", "sales")
    refresh = project.last_refresh("sales")
    assert refresh["reason"] == "deletes or updates: merged signed count/sum deltas into the affected groups"
    # three groups affected, one of them new: their rows counted in the table the rewrite replaced
    assert (refresh["rows_deleted"], refresh["rows_inserted"]) == (2, 3), refresh
    assert not project.differences("sales")


def test_min_max_insert_only_refresh_merges_without_recompute(
    shop: tuple[IvmProject, ChangeLoggedTable],
) -> None:
    project, orders = shop
    project.run("--select", "extremes")
    orders.apply([Op("insert", {"id": 21, "grp": "a", "v": Decimal("-4.00")})])
    with unreadable(project, "orders"):
        project.run("--select", "extremes")
    refresh = project.last_refresh("extremes")
    assert refresh["reason"] == "insert-only: merged counts/sums and least/greatest into the affected groups"
    assert (refresh["rows_deleted"], refresh["rows_inserted"]) == (1, 1)
    assert not project.differences("extremes")


def test_min_max_after_deleting_the_extreme_recomputes_affected_groups(
    shop: tuple[IvmProject, ChangeLoggedTable],
) -> None:
    project, orders = shop
    project.run("--select", "extremes")
    lowest = project.spark.sql(f"select min(v) from {project.raw}.orders where grp = 'a'").first()[0]
    victim = project.spark.sql(f"select id from {project.raw}.orders where v = {lowest}").first()[0]
    orders.apply([Op("delete", {"id": victim})])
    project.run("--select", "extremes")
    refresh = project.last_refresh("extremes")
    assert refresh["reason"] == (
        "min/max after deletes or updates: recomputed the affected groups from the definition"
    )
    assert (refresh["rows_deleted"], refresh["rows_inserted"]) == (1, 1)
    assert not project.differences("extremes")


def test_interrupted_aggregate_refresh_is_rebuilt(shop: tuple[IvmProject, ChangeLoggedTable]) -> None:
    project, orders = shop
    project.run("--select", "sales")
    orders.apply([Op("insert", {"id": 22, "grp": "a", "v": Decimal("1.00")})])
    project.run("--select", "sales")
    # what a crash after the table switch leaves: merged table, 'started' as the last row
    project.relog(project.last_refresh("sales")["refresh_id"], "started")
    project.run("--select", "sales")
    refresh = project.last_refresh("sales")
    assert refresh["path"] == "full"
    assert refresh["reason"] == (
        "the last refresh was interrupted: rebuilding, as aggregate states cannot be re-applied by key"
    )
    assert not project.differences("sales")


def test_change_above_the_rebuild_threshold_rebuilds(shop: tuple[IvmProject, ChangeLoggedTable]) -> None:
    project, orders = shop
    project.write(
        "models/sales_threshold.sql",
        MODELS["sales"].replace("materialized='ivm'", "materialized='ivm', meta={'ivm_rebuild_above': 0.5}"),
    )
    project.run("--select", "sales_threshold")
    rows = project.spark.sql(f"select count(*) from {project.raw}.orders").first()[0]
    # twice as many new rows as there were: 2/3 of the upstream's rows changed
    orders.apply([Op("insert", {"id": 100 + i, "grp": "c", "v": Decimal(i)}) for i in range(2 * rows)])
    project.run("--select", "sales_threshold")
    refresh = project.last_refresh("sales_threshold")
    assert refresh["path"] == "full"
    assert refresh["reason"] == (
        f"{2 * rows} changed rows = 66.7% of the {3 * rows} rows of the changed upstreams, "
        "above ivm_rebuild_above=0.5: rebuilding is cheaper"
    )
    assert not project.differences("sales_threshold")
    orders.apply([Op("delete", {"id": 100})])
    project.run("--select", "sales_threshold")
    assert project.last_refresh("sales_threshold")["path"] == "incremental"
    assert not project.differences("sales_threshold")


def test_unaliased_items_are_named_as_in_a_table_model(shop: tuple[IvmProject, ChangeLoggedTable]) -> None:
    project, orders = shop
    plain = project.spark.sql(
        f"select o.grp, count(*), sum(o.v), avg(o.v), sum(o.v) * 2, case when count(*) > 1 then 2 end "
        f"from {project.raw}.orders o group by o.grp"
    )
    visible = [
        c for c in project.spark.table(f"{project.schema}.unaliased").columns if not c.startswith("__ivm_")
    ]
    assert visible == plain.columns
    orders.apply([Op("update", {"id": 3, "grp": "b", "v": Decimal("7.25")}), Op("delete", {"id": 4})])
    project.run("--select", "unaliased")
    assert project.last_refresh("unaliased")["path"] == "incremental"
    assert not project.differences("unaliased")


def test_a_change_that_no_row_of_it_passes_keeps_the_row_count(
    shop: tuple[IvmProject, ChangeLoggedTable],
) -> None:
    """Without GROUP BY the signed delta is one row even when no change row passes the WHERE:
    its count is then NULL, and the stored row count (hidden, __ivm_count) stays what it was
    instead of becoming NULL. The rule is one macro for parquet and Delta."""
    project, orders = shop
    project.run("--select", "big_total")
    orders.apply([Op("insert", {"id": 30, "grp": "a", "v": Decimal("1.00")})])
    project.run("--select", "big_total")
    orders.apply([Op("insert", {"id": 31, "grp": "a", "v": Decimal("9.00")})])
    project.run("--select", "big_total")
    assert project.last_refresh("big_total")["path"] == "incremental"
    passing = project.spark.sql(f"select count(*) from {project.raw}.orders where v > 3").first()[0]
    stored = project.spark.sql(f"select __ivm_count from {project.schema}.big_total").collect()
    assert [r[0] for r in stored] == [passing]
    assert not project.differences("big_total")
