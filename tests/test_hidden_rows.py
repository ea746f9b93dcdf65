"""`dbt run --empty` and `dbt run --sample`: dbt renders the upstreams as subqueries that
hide rows, so such a run must never become an ivm table's state (the next run would apply
changes to a table missing rows). On both formats: the definition is still checked (a
refused model fails with its code, as in CI's `dbt build --empty`); a missing table becomes
a view of the SQL as rendered, which models downstream can read; an existing table is left
as it is; nothing is logged; and the next run without the flag builds or refreshes the
table to equal its definition."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dbt_ivm.changelog import Op
from tests.support import IvmProject, format_project, on_delta

MODELS = {
    "order_totals": """\
        {{ config(materialized='ivm') }}
        select customer_id, count(*) as n, sum(amount) as total
        from {{ source('shop', 'orders') }}
        group by customer_id
        """,
    "order_regions": """\
        {{ config(materialized='ivm') }}
        select o.id, o.amount, c.region
        from {{ source('shop', 'orders') }} o
        join {{ source('shop', 'customers') }} c on c.id = o.customer_id
        """,
    # an ivm model on an ivm model, whose table an --empty run may not have built yet
    "region_totals": """\
        {{ config(materialized='ivm') }}
        select region, count(*) as n, sum(amount) as total from {{ ref('order_regions') }} group by region
        """,
    # a plain model downstream, which an --empty run builds from the ivm model's view
    "region_counts": """\
        {{ config(materialized='table') }}
        select region, count(*) as n from {{ ref('order_regions') }} group by region
        """,
}
IVM = ["order_totals", "order_regions", "region_totals"]
RECENT = "current_timestamp() - interval 1 hour"


def sources(raw: str, declared: dict[str, str]) -> str:
    """The sources file; orders names its event time, so that --sample filters it."""
    return f"""\
        version: 2
        sources:
          - name: shop
            schema: {raw}
            tables:
              - name: orders
                config: {{event_time: placed_at, meta: {{ivm: {{{declared["orders"]}}}}}}}
              - name: customers
                config: {{meta: {{ivm: {{{declared["customers"]}}}}}}}
        """


@pytest.fixture(scope="module", params=["parquet", "delta"])
def shop(request: pytest.FixtureRequest, project_factory) -> Iterator[tuple[IvmProject, Any]]:
    project, fmt = format_project(request, project_factory, "hidden")
    # half the orders placed now (inside any --sample window), half a year ago
    now = project.spark.sql(f"select {RECENT} as t").collect()[0].t
    old = project.spark.sql("select timestamp'2026-01-01 00:00:00' as t").collect()[0].t
    placed = [
        {"id": i, "customer_id": i % 3, "amount": float(i), "placed_at": now if i % 2 else old}
        for i in range(10)
    ]
    columns = "id bigint, customer_id bigint, amount double, placed_at timestamp"
    orders, declared = project.tracked_table(fmt, "orders", columns, placed, ["id"])
    regions = [{"id": i, "region": f"r{i % 2}"} for i in range(3)]
    _, customers = project.tracked_table(fmt, "customers", "id bigint, region string", regions, ["id"])
    project.write("models/sources.yml", sources(project.raw, {"orders": declared, "customers": customers}))
    tested = "\n".join(f"  - name: {m}\n    data_tests: [dbt_ivm.consistent]" for m in IVM)
    project.write("models/models.yml", f"version: 2\nmodels:\n{tested}\n")
    for name, sql in (on_delta(MODELS) if fmt == "delta" else MODELS).items():
        project.write(f"models/{name}.sql", sql)
    yield project, orders


def table_type(project: IvmProject, name: str) -> str:
    return project.spark.catalog.getTable(f"{project.schema}.{name}").tableType


def messages(project: IvmProject, *args: str, command: str = "run") -> dict[str, str]:
    result = project.invoke(command, *args)
    return {r.node.name: str(r.message) for r in result.result.results if r.node.resource_type == "model"}


def count(project: IvmProject, name: str) -> int:
    return project.spark.table(f"{project.schema}.{name}").count()


def test_empty_run_creates_views_and_the_next_run_builds_the_tables(shop) -> None:
    project, _ = shop
    # as in CI: the consistency tests run too, and compare nothing
    messages(project, "--empty", command="build")
    for model in IVM:
        assert table_type(project, model) == "VIEW", model
        assert count(project, model) == 0
        assert not project.refresh_log(model), "an --empty run must not record a state"
    assert project.spark.table(f"{project.schema}.order_totals").columns == ["customer_id", "n", "total"]
    assert count(project, "region_counts") == 0

    # a run without the flag of the ivm model on top alone: its upstream is still a view
    project.run("--select", "region_totals")
    assert table_type(project, "region_totals") == "VIEW"
    assert not project.refresh_log("region_totals")

    project.run()
    for model in IVM:
        assert table_type(project, model) != "VIEW"
        refresh = project.last_refresh(model)
        assert (refresh["path"], refresh["reason"]) == ("full", "replacing a view"), refresh
    project.assert_consistent(IVM, "after the run that followed --empty")


def test_empty_run_leaves_tables_and_state_alone(shop) -> None:
    project, orders = shop
    before = {m: (count(project, m), len(project.refresh_log(m))) for m in IVM}
    new = {"id": 50, "customer_id": 1, "amount": 7.0, "placed_at": None}
    orders.apply([Op("insert", new), Op("delete", {"id": 2})])

    sent = messages(project, "--empty", command="build")
    for model in IVM:
        assert sent[model] == "left as it is (--empty)"
        assert table_type(project, model) != "VIEW"
        assert (count(project, model), len(project.refresh_log(model))) == before[model]
    assert project.differences("order_regions"), "the change is not applied by an --empty run"

    project.run()
    for model in IVM:
        assert project.last_path(model) == "incremental", project.last_refresh(model)
    project.assert_consistent(IVM, "after the change, --empty, then a run")


# how dbt renders the upstreams does not depend on the format: parquet only
@pytest.mark.parametrize("shop", ["parquet"], indirect=True)
def test_sample_run_builds_no_state_from_a_sample(shop) -> None:
    project, _ = shop
    project.write("models/recent_totals.sql", MODELS["order_totals"])
    sent = messages(project, "--sample", "1 day", command="build")
    assert sent["order_totals"] == "left as it is (--sample)"
    assert table_type(project, "recent_totals") == "VIEW"
    sampled = project.spark.table(f"{project.schema}.recent_totals").agg({"n": "sum"}).collect()[0][0]
    assert 0 < sampled < project.spark.table(f"{project.raw}.orders").count()
    assert not project.refresh_log("recent_totals")

    project.run("--select", "recent_totals")
    assert project.last_refresh("recent_totals")["path"] == "full"
    project.assert_consistent(["recent_totals"], "after the run that followed --sample")


@pytest.mark.parametrize("shop", ["parquet"], indirect=True)
def test_refused_model_fails_under_empty_too(shop) -> None:
    project, _ = shop
    refused = "{{ config(materialized='ivm') }}\nselect id from {{ source('shop', 'orders') }} limit 3\n"
    project.write("models/refused.sql", refused)
    try:
        failures = project.run_failures("--empty", "--select", "refused")
        assert "IVM012" in failures["refused"] and "LIMIT at line 2" in failures["refused"], failures
    finally:
        (project.root / "models/refused.sql").unlink()
