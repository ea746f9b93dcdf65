"""A team's first day: `dbt build` of a project whose ivm models read seeds and a `table`
model through ref(), on a fresh schema, with no change logs made by hand: dbt orders the
ivm models after their upstreams, diff capture (`change_feed: diff`) finds what the next
`dbt seed` changed, and the ivm models refresh incrementally and pass `dbt_ivm.consistent`.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.support import IvmProject

SEEDS_YML = """\
version: 2
seeds:
  - name: customers
    config:
      meta:
        ivm: {unique_key: [customer_id], change_feed: diff}
  - name: orders
    config:
      meta:
        ivm: {unique_key: [order_id], change_feed: diff}
"""

MODELS_YML = """\
version: 2
models:
  - name: customer_regions
    config:
      materialized: table
      meta:
        ivm: {unique_key: [customer_id], change_feed: diff}
  - name: order_facts
    data_tests: [dbt_ivm.consistent]
  - name: revenue_by_region
    data_tests: [dbt_ivm.consistent]
  - name: customer_summary
    data_tests: [dbt_ivm.consistent]
"""

MODELS = {
    "customer_regions": """\
        select customer_id, name, upper(region) as region from {{ ref('customers') }}
        """,
    "order_facts": """\
        {{ config(materialized='ivm') }}
        select o.order_id, o.amount, o.status, c.customer_id, c.region
        from {{ ref('orders') }} o
        join {{ ref('customer_regions') }} c on o.customer_id = c.customer_id
        where o.status <> 'cancelled'
        """,
    "revenue_by_region": """\
        {{ config(materialized='ivm', file_format='delta') }}
        select c.region, count(*) as orders, sum(o.amount) as revenue
        from {{ ref('orders') }} o
        join {{ ref('customers') }} c on o.customer_id = c.customer_id
        group by c.region
        """,
    "customer_summary": """\
        {{ config(materialized='ivm', unique_key='customer_id') }}
        with per_customer as (
            select customer_id, count(*) as orders, max(amount) as largest
            from {{ ref('orders') }}
            group by customer_id
        )
        select c.customer_id, c.name, coalesce(p.orders, 0) as orders, p.largest
        from {{ ref('customers') }} c
        left join per_customer p on c.customer_id = p.customer_id
        """,
}

CUSTOMERS = """\
customer_id,name,region
1,Ada,north
2,Bo,south
3,Cy,north
4,Di,
"""

ORDERS = """\
order_id,customer_id,amount,status
10,1,5,paid
11,1,7,paid
12,2,3,cancelled
13,3,9,paid
14,4,1,paid
"""

# the next day's files: a renamed and moved customer, a deleted one, an order updated,
# one deleted, two added (one for a customer without orders before)
CUSTOMERS_NEXT = """\
customer_id,name,region
1,Ada,north
2,Bea,east
3,Cy,north
5,Ed,south
"""

ORDERS_NEXT = """\
order_id,customer_id,amount,status
10,1,6,paid
12,2,3,paid
13,3,9,paid
14,4,1,paid
15,5,4,paid
16,2,,paid
"""

IVM_MODELS = ["order_facts", "revenue_by_region", "customer_summary"]


@pytest.fixture(scope="module")
def project(delta, project_factory) -> IvmProject:
    project = project_factory("first_day")
    project.write("models/models.yml", MODELS_YML)
    project.write("seeds/seeds.yml", SEEDS_YML)
    for name, sql in MODELS.items():
        project.write(f"models/{name}.sql", sql)
    # a fresh schema: dbt creates it
    for db in (project.schema, project.raw):
        project.spark.sql(f"drop database if exists {db} cascade")
    return project


def write_seeds(project: IvmProject, customers: str, orders: str) -> None:
    (project.root / "seeds").mkdir(exist_ok=True)
    (project.root / "seeds" / "customers.csv").write_text(textwrap.dedent(customers))
    (project.root / "seeds" / "orders.csv").write_text(textwrap.dedent(orders))


def build(project: IvmProject) -> dict[str, str]:
    result = project.invoke("build")
    return {r.node.name: str(r.status) for r in result.result.results}


def test_dbt_build_on_a_fresh_schema_then_refresh_through_diff_capture(project: IvmProject) -> None:
    write_seeds(project, CUSTOMERS, ORDERS)
    statuses = build(project)
    assert all(s in ("success", "pass") for s in statuses.values()), statuses
    assert {project.last_refresh(m)["path"] for m in IVM_MODELS} == {"full"}

    write_seeds(project, CUSTOMERS_NEXT, ORDERS_NEXT)
    statuses = build(project)
    assert all(s in ("success", "pass") for s in statuses.values()), statuses
    for model in IVM_MODELS:
        last = project.last_refresh(model)
        assert last["path"] == "incremental", (model, last["path"], last["reason"])
        assert "diff capture scanned" in last["message"], last["message"]
    project.assert_consistent(IVM_MODELS, "after the second dbt build")
    summary = {r.customer_id: r for r in project.spark.table(f"{project.schema}.customer_summary").collect()}
    assert sorted(summary) == [1, 2, 3, 5]
    assert (summary[2].name, summary[2].orders) == ("Bea", 2)

    # nothing changed: the ivm models are no-ops
    build(project)
    assert {project.last_path(m) for m in IVM_MODELS} == {"no-op"}
