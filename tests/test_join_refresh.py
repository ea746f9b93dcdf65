"""Behaviour of one refresh: which steps run, what is written, what is recorded."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from dbt_ivm.changelog import ChangeLoggedTable, Op, append_rows
from tests.support import IvmProject, sources_yaml

SOURCES = {
    "orders": "unique_key: [order_id], change_log: orders_changes",
    "customers": "unique_key: [customer_id], change_log: customers_changes",
    "visits": "watermark: seen_at",
}

ORDER_FACTS = """\
    {{ config(materialized='ivm') }}
    {% if var('inject_change', false) %}
      {{ config(pre_hook=[
        "insert into RAW.orders_changes select 50, 2, 5.0, 'insert', 99, current_timestamp()",
        "insert into RAW.orders select 50, 2, 5.0"]) }}
    {% endif %}
    select o.order_id, o.amount, c.customer_id, c.region
    from {{ source('shop', 'orders') }} o
    join {{ source('shop', 'customers') }} c on o.customer_id = c.customer_id
    """

VISIT_FACTS = """\
    {{ config(materialized='ivm') }}
    select v.visit_id, v.seen_at, c.region
    from {{ source('shop', 'visits') }} v
    join {{ source('shop', 'customers') }} c on v.customer_id = c.customer_id
    """


class Shop:
    def __init__(self, project: IvmProject) -> None:
        self.project = project
        project.create_table(
            "orders",
            "order_id bigint, customer_id bigint, amount double",
            [{"order_id": i, "customer_id": i % 3, "amount": float(i)} for i in range(1, 7)],
        )
        project.create_table(
            "customers",
            "customer_id bigint, region string",
            [{"customer_id": i, "region": r} for i, r in enumerate(["EU", "US", "APAC"])],
        )
        project.create_table("visits", "visit_id bigint, customer_id bigint, seen_at timestamp")
        self.orders: ChangeLoggedTable = project.logged_table("orders", ["order_id"])
        self.customers: ChangeLoggedTable = project.logged_table("customers", ["customer_id"])


@pytest.fixture(scope="module")
def project(project_factory) -> IvmProject:
    project = project_factory("refresh")
    project.write("models/sources.yml", sources_yaml(project.raw, SOURCES))
    project.write("models/order_facts.sql", ORDER_FACTS.replace("RAW", project.raw))
    project.write("models/visit_facts.sql", VISIT_FACTS)
    return project


@pytest.fixture()
def shop(project: IvmProject) -> Shop:
    shop = Shop(project)
    project.run("--full-refresh")
    assert project.last_refresh("order_facts")["path"] == "full"
    return shop


def table_files(project: IvmProject, model: str) -> tuple[str, dict[str, float]]:
    location = (
        project.spark.sql(f"describe table extended {project.schema}.{model}")
        .where("col_name = 'Location'")
        .first()[1]
    )
    path = Path(location.removeprefix("file:"))
    return location, {f.name: f.stat().st_mtime for f in path.iterdir()}


def test_no_op_run_changes_nothing(project: IvmProject, shop: Shop) -> None:
    """Nothing changed upstream: the run writes nothing, not even a refresh log row."""
    before = table_files(project, "order_facts")
    logged = project.refresh_log("order_facts")
    project.run("--select", "order_facts")
    assert project.last_path("order_facts") == "no-op"
    assert project.refresh_log("order_facts") == logged
    assert table_files(project, "order_facts") == before


def test_empty_batch_and_cancelling_changes_are_no_ops(project: IvmProject, shop: Shop) -> None:
    shop.orders.apply([])
    shop.orders.apply(
        [
            Op("insert", {"order_id": 40, "customer_id": 1, "amount": 1.0}),
            Op("delete", {"order_id": 40}),
        ]
    )
    project.run("--select", "order_facts")
    refresh = project.last_refresh("order_facts")
    assert refresh["path"] == "no-op"
    assert refresh["reason"] == "upstream changes cancel out"
    # dbt's run result says so, as it does for a refresh that found nothing changed
    assert project.noops == {"order_facts"}
    assert not project.differences("order_facts")


def test_insert_only_batch_appends_without_delete_step(project: IvmProject, shop: Shop) -> None:
    location, files = table_files(project, "order_facts")
    shop.orders.apply(
        [
            Op("insert", {"order_id": 20, "customer_id": 1, "amount": 2.5}),
            Op("insert", {"order_id": 21, "customer_id": 9, "amount": 1.0}),
        ]
    )
    shop.customers.apply([Op("insert", {"customer_id": 9, "region": "LATAM"})])
    project.run("--select", "order_facts")
    refresh = project.last_refresh("order_facts")
    assert refresh["path"] == "incremental"
    assert refresh["reason"] == "insert-only: append"
    assert refresh["message"] == "shop.customers: INS; shop.orders: INS"
    assert (refresh["rows_deleted"], refresh["rows_inserted"]) == (0, 2)
    new_location, new_files = table_files(project, "order_facts")
    assert new_location == location, "an append must not rewrite the table"
    assert set(files) < set(new_files), "existing files are kept, new ones added"
    assert not project.differences("order_facts")


def test_delete_only_batch_skips_insert_step(project: IvmProject, shop: Shop) -> None:
    shop.orders.apply([Op("delete", {"order_id": 1}), Op("delete", {"order_id": 4})])
    project.run("--select", "order_facts")
    refresh = project.last_refresh("order_facts")
    assert refresh["message"] == "shop.orders: DEL"
    assert (refresh["rows_deleted"], refresh["rows_inserted"]) == (2, 0)
    assert not project.differences("order_facts")


def test_update_of_dimension_row_rebuilds_its_slice(project: IvmProject, shop: Shop) -> None:
    shop.customers.apply([Op("update", {"customer_id": 1, "region": "MARS"})])
    project.run("--select", "order_facts")
    refresh = project.last_refresh("order_facts")
    assert refresh["message"] == "shop.customers: DEL+INS"
    assert refresh["rows_deleted"] == refresh["rows_inserted"] == 2
    assert refresh["versions_from"] == {"shop.customers": None, "shop.orders": None}
    assert refresh["versions_to"] == {"shop.customers": "0", "shop.orders": None}
    assert not project.differences("order_facts")


def test_change_committed_during_refresh_is_applied_next_run(project: IvmProject, shop: Shop) -> None:
    # The pre-hook runs after the refresh fixed the upstream versions: it commits order 50
    # (version 99) of customer 2, whose update this refresh applies by reading the orders
    # table, which then already holds order 50.
    shop.customers.apply([Op("update", {"customer_id": 2, "region": "MOON"})])
    project.run("--select", "order_facts", "--vars", "{inject_change: true}")
    first = project.last_refresh("order_facts")
    assert first["versions_to"]["shop.orders"] is None
    assert first["logs_advanced"] is True
    project.run("--select", "order_facts")
    second = project.last_refresh("order_facts")
    assert second["versions_to"]["shop.orders"] == "99"
    assert second["reason"].startswith("an upstream change log advanced during the last refresh")
    assert not project.differences("order_facts")
    assert (
        project.spark.sql(f"select count(*) from {project.schema}.order_facts where order_id = 50").first()[0]
        == 1
    )


def test_append_only_upstream_reads_rows_above_watermark(project: IvmProject, shop: Shop) -> None:
    visits = f"{project.raw}.visits"
    append_rows(project.spark, visits, [{"visit_id": 1, "customer_id": 1, "seen_at": datetime(2026, 1, 1)}])
    project.run("--select", "visit_facts")
    append_rows(
        project.spark,
        visits,
        [
            {"visit_id": 2, "customer_id": 2, "seen_at": datetime(2026, 1, 2)},
            {"visit_id": 3, "customer_id": 7, "seen_at": datetime(2026, 1, 3)},
        ],
    )
    project.run("--select", "visit_facts")
    refresh = project.last_refresh("visit_facts")
    assert refresh["change_rows"] == {"shop.visits": 2}
    assert refresh["versions_to"]["shop.visits"] == "2026-01-03 00:00:00"
    assert refresh["reason"] == "insert-only: append"
    assert not project.differences("visit_facts")


def test_interrupted_refresh_is_repaired_by_next_run(project: IvmProject, shop: Shop) -> None:
    build = project.last_refresh("order_facts")
    shop.orders.apply([Op("insert", {"order_id": 30, "customer_id": 2, "amount": 3.0})])
    project.run("--select", "order_facts")
    append = project.last_refresh("order_facts")
    assert append["reason"] == "insert-only: append"
    # What a crash after the append leaves: the table has the rows, the state does not.
    project.relog(build["refresh_id"], "success")
    project.relog(append["refresh_id"], "started")
    project.run("--select", "order_facts")
    refresh = project.last_refresh("order_facts")
    assert (
        refresh["reason"]
        == "the last refresh was interrupted, re-applying by key; deletes or updates: rewrite"
    )
    assert refresh["message"] == "shop.orders: DEL+INS"
    assert not project.differences("order_facts"), "re-applying must not duplicate the appended rows"


def test_consistency_test_fails_on_a_tampered_table(project: IvmProject, shop: Shop) -> None:
    project.write(
        "models/order_facts.yml",
        """\
        version: 2
        models:
          - name: order_facts
            data_tests: [dbt_ivm.consistent]
        """,
    )
    project.dbt.invoke("test", "--select", "order_facts")
    project.spark.sql(
        f"insert into {project.schema}.order_facts (order_id, amount, customer_id, region) "
        "values (999, 1.0, 1, 'NOWHERE')"
    )
    result = project.dbt.invoke("test", "--select", "order_facts", check=False)
    assert not result.success, "the consistency test must fail on a row the definition does not produce"
    project.run("--select", "order_facts", "--full-refresh")
    project.dbt.invoke("test", "--select", "order_facts")


def test_unsupported_model_can_opt_into_full_rebuild(project: IvmProject, shop: Shop) -> None:
    project.write(
        "models/region_totals.sql",
        """\
        {{ config(materialized='ivm', ivm_on_unsupported='full_rebuild') }}
        select c.region, o.order_id,
               row_number() over (order by o.order_id) as overall_rank
        from {{ source('shop', 'orders') }} o
        join {{ source('shop', 'customers') }} c on o.customer_id = c.customer_id
        """,
    )
    try:
        project.run("--select", "region_totals")
        shop.orders.apply([Op("update", {"order_id": 3, "customer_id": 0, "amount": 100.0})])
        project.run("--select", "region_totals")
        refresh = project.last_refresh("region_totals")
        assert refresh["path"] == "full"
        assert refresh["reason"] == "not maintainable (IVM011); ivm_on_unsupported=full_rebuild"
        assert not project.differences("region_totals")
    finally:
        (project.root / "models/region_totals.sql").unlink()


def test_parquet_cost_estimate_rebuilds_when_the_rewrite_costs_more(project: IvmProject, shop: Shop) -> None:
    model = project.root / "models" / "order_facts_costed.sql"
    sql = ORDER_FACTS.replace("materialized='ivm'", "materialized='ivm', meta={'ivm_rebuild_above': 0.9}")
    project.write("models/order_facts_costed.sql", sql.replace("RAW", project.raw))
    try:
        project.run("--select", "order_facts_costed")
        # an appended order reads customers (3 rows) and rewrites nothing
        shop.orders.apply([Op("insert", {"order_id": 20, "customer_id": 1, "amount": 2.5})])
        project.run("--select", "order_facts_costed")
        assert project.last_refresh("order_facts_costed")["path"] == "incremental"
        # a changed customer: its term reads the 7 orders, and the update's preimage in the change
        # log means a rewrite, which reads and writes the table (6 rows when the last refresh counted
        # it): decided from the counts that refresh logged, without netting the change
        shop.customers.apply([Op("update", {"customer_id": 1, "region": "MARS"})])
        sent = project.statements("--select", "order_facts_costed")["order_facts_costed"]
        refresh = project.last_refresh("order_facts_costed")
        assert refresh["path"] == "full"
        assert refresh["reason"] == (
            "cost estimate on parquet: the refresh would read and write about 19 rows (7 upstream rows read "
            "by the delta terms, 12 for rewriting the 6-row table), a rebuild about 16 (10 upstream rows "
            "read once, 6 written): rebuilding is cheaper (row counts of the last refresh; deletes or "
            "updates in the change log of shop.customers; the change was not computed)"
        )
        assert not refresh["change_rows"]
        assert not [s for s in sent if "min_by(" in s], "the change was netted"
        # the build counted the upstreams and its 7 rows: each upstream by one statement of the run
        assert refresh["sizes"]["."] == 7 and len(refresh["sizes"]) == 3
        for table in ("orders", "customers"):
            counts = [s for s in sent if f"(select count(*) from {project.raw}.{table})" in s]
            assert len(counts) == 1, counts
        assert not project.differences("order_facts_costed")
    finally:
        model.unlink()


def test_parquet_cost_estimate_rebuilds_before_computing_the_change(project: IvmProject, shop: Shop) -> None:
    """With the row counts the last refresh or full build logged, a refresh whose estimate shows
    a rebuild cheaper even at its most favourable rebuilds without netting the change."""
    project.write(
        "models/region_sales_costed.sql",
        """\
        {{ config(materialized='ivm', meta={'ivm_rebuild_above': 0.9}) }}
        select c.region, count(*) as orders, sum(o.amount) as total
        from {{ source('shop', 'orders') }} o
        join {{ source('shop', 'customers') }} c on o.customer_id = c.customer_id
        group by c.region
        """,
    )
    try:
        project.run("--select", "region_sales_costed")
        # both upstreams change: each term reads the other upstream, and the groups are rewritten
        for order_id, region in ((41, "MARS"), (42, "VENUS")):
            shop.customers.apply([Op("update", {"customer_id": 2, "region": region})])
            shop.orders.apply([Op("insert", {"order_id": order_id, "customer_id": 1, "amount": 4.0})])
            project.run("--select", "region_sales_costed")
        log = project.refresh_log("region_sales_costed")
        build, first, second = [r for r in log if r["status"] == "success"][-3:]
        # the first build counted the upstreams and its table: both refreshes decided from the
        # counts the build before them logged, without netting the change
        assert len(build["sizes"]) == 3 and build["sizes"]["."] > 0
        for refresh, before in ((first, build), (second, first)):
            assert refresh["path"] == "full"
            assert refresh["reason"].endswith(
                "rebuilding is cheaper (row counts of the last refresh; the change was not computed)"
            )
            assert not refresh["change_rows"]
            assert set(refresh["sizes"]) == set(before["sizes"])
        # each build counted the order it added
        orders = next(name for name in build["sizes"] if name.endswith("orders"))
        assert second["sizes"][orders] == first["sizes"][orders] + 1 == build["sizes"][orders] + 2
        assert not project.differences("region_sales_costed")
        # orders alone: one term reads customers, the groups are rewritten: cheaper than a rebuild
        shop.orders.apply([Op("insert", {"order_id": 43, "customer_id": 3, "amount": 2.0})])
        project.run("--select", "region_sales_costed")
        assert project.last_refresh("region_sales_costed")["path"] == "incremental"
        assert not project.differences("region_sales_costed")
    finally:
        (project.root / "models/region_sales_costed.sql").unlink()
