"""The key terms of the keyed recompute read what a change needs: a key column that a join
equates with a column of the changed upstream is listed from that column, so Spark drops
the partner the key no longer reads (`_ivm_key_from_occurrence`), through `select * from
final` and a GROUP BY of the key too. Checked on the plan of the affected keys' query each
refresh sends (parquet), with the tables equal to their definitions after every refresh."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dbt_ivm.changelog import Op
from tests.support import IvmProject

LINES = "{{ source('shop', 'lines') }}"
ORDERS = "{{ source('shop', 'orders') }}"
CUSTOMERS = "{{ source('shop', 'customers') }}"

MODELS = {
    # each order with its last shipped line: a changed line lists its order from its own oid
    "orders_last_line": f"""
        {{{{ config(materialized='ivm', unique_key='id') }}}}
        with last_line as (
            select oid, id as line_id, shipped, qty
            from {LINES}
            qualify row_number() over (partition by oid order by shipped desc, id desc) = 1
        )
        select o.id, o.cid, last_line.line_id, last_line.shipped, last_line.qty
        from {ORDERS} o
        left join last_line on last_line.oid = o.id
        """,
    # a customers mart ending in `select * from final`: a changed order or line lists its
    # customer from the aggregate's cid
    "customer_totals": f"""
        {{{{ config(materialized='ivm', unique_key='id') }}}}
        with per_customer as (
            select o.cid, count(distinct o.id) as n_orders, sum(l.qty) as qty
            from {ORDERS} o
            join {LINES} l on l.oid = o.id
            group by o.cid
        ),
        final as (
            select c.id, c.region, coalesce(per_customer.n_orders, 0) as n_orders, per_customer.qty
            from {CUSTOMERS} c
            left join per_customer on per_customer.cid = c.id
        )
        select * from final
        """,
    # orders per customer, grouped by the customer's id: a changed order lists and groups
    # by its own cid
    "order_counts": f"""
        {{{{ config(materialized='ivm') }}}}
        with order_counts as (
            select c.id as customer_id, count(*) as n_orders
            from {CUSTOMERS} c
            join {ORDERS} o on o.cid = c.id
            group by c.id
        )
        select * from order_counts
        """,
}


@pytest.fixture(scope="module")
def shop(project_factory) -> Iterator[tuple[IvmProject, dict[str, Any]]]:
    project = project_factory("key_terms")
    customers = [{"id": i, "region": [None, "EU", "US"][i % 3]} for i in range(1, 7)]
    orders = [{"id": i, "cid": 1 + i % 6} for i in range(1, 13)]
    lines = [{"id": i, "oid": 1 + i % 12, "shipped": i % 5, "qty": i % 4 or None} for i in range(1, 31)]
    tables = project.tracked_sources(
        "parquet",
        (
            ("customers", "id bigint, region string", customers),
            ("orders", "id bigint, cid bigint", orders),
            ("lines", "id bigint, oid bigint, shipped int, qty int", lines),
        ),
    )
    for name, sql in MODELS.items():
        project.write(f"models/{name}.sql", sql)
    project.run()
    yield project, tables


def key_scans(project: IvmProject, sent: list[str]) -> dict[str, int]:
    """How often Spark's plan of the refresh's affected keys' query reads each upstream table
    (a change set reads its change log, not the table)."""
    [query] = [s for s in sent if "__ivm_kt" in s and not s.startswith(("create", "insert"))]
    return project.plan_scans(query, ("customers", "orders", "lines"))


def test_a_changed_line_lists_keys_without_reading_its_partners(shop) -> None:
    project, t = shop
    t["lines"].apply([Op("update", {"id": 4, "oid": 2, "shipped": 9, "qty": 1}), Op("delete", {"id": 7})])
    sent = project.statements()
    project.assert_consistent(list(MODELS), "after two lines changed")
    # the order key is the line's oid: orders is not read
    assert key_scans(project, sent["orders_last_line"]) == {"customers": 0, "orders": 0, "lines": 0}
    # the customer key needs the lines' orders, but not customers
    assert key_scans(project, sent["customer_totals"]) == {"customers": 0, "orders": 1, "lines": 0}


def test_a_changed_order_lists_keys_without_reading_its_partners(shop) -> None:
    project, t = shop
    t["orders"].apply([Op("update", {"id": 5, "cid": 1}), Op("insert", {"id": 13, "cid": 2})])
    sent = project.statements()
    project.assert_consistent(list(MODELS), "after two orders changed")
    assert key_scans(project, sent["orders_last_line"]) == {"customers": 0, "orders": 0, "lines": 0}
    assert key_scans(project, sent["customer_totals"]) == {"customers": 0, "orders": 0, "lines": 0}
    assert key_scans(project, sent["order_counts"]) == {"customers": 0, "orders": 0, "lines": 0}
