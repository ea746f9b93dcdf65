"""Differential test for aggregate ivm models: random batches of inserts, updates (join
keys and group keys included) and deletes on three change-logged upstreams; after every
`dbt run` each table must equal its definition recomputed from scratch.

One shared history: the models are built once, then every generated example commits one
random batch (possibly empty, one key possibly changed several times) on top of the
state the previous examples left, and refreshes all models in one `dbt run`. Groups
empty out and come back as the history goes on. Shrinking is off: a failing example
depends on the history before it, which hypothesis cannot replay.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import strategies as st

from tests.support import (
    IvmProject,
    RandomHistory,
    TableSpec,
    differential_history,
    differential_test,
)

MONEY = [None, Decimal("0.00"), Decimal("1.50"), Decimal("-2.25"), Decimal("10.00"), Decimal("3.33")]
TABLES = {
    "orders": TableSpec(
        "id bigint, cid int, grp string, v decimal(10,2), w int",
        {
            "cid": st.one_of(st.none(), st.integers(0, 3)),
            "grp": st.sampled_from([None, "a", "b", "c"]),
            "v": st.sampled_from(MONEY),
            "w": st.one_of(st.none(), st.integers(-2, 5)),
        },
        {"cid": [None, 0, 1, 2, 3], "grp": [None, "a", "b"], "v": MONEY, "w": [None, 1, 2, 3]},
        rows=10,
    ),
    "customers": TableSpec(
        "id bigint, region string",
        {"region": st.sampled_from([None, "EU", "US"])},
        {"region": [None, "EU", "US"]},
        rows=4,
    ),
    "lines": TableSpec(
        "id bigint, oid bigint, qty int",
        {"oid": st.one_of(st.none(), st.integers(0, 9)), "qty": st.one_of(st.none(), st.integers(1, 4))},
        {"oid": [None, *range(10)], "qty": [None, 1, 2, 3]},
        rows=12,
    ),
}

ORDERS = "{{ source('src', 'orders') }}"
CUSTOMERS = "{{ source('src', 'customers') }}"
LINES = "{{ source('src', 'lines') }}"
CONFIG = "{{ config(materialized='ivm') }}\n"

MODELS = {
    # count/sum/avg with NULL values and NULL group keys; an expression key by ordinal,
    # FILTER, a filter on rows, and an expression over aggregates
    "agg_sums": f"""
        select o.grp, o.w % 2 as parity, count(*) as n, count(o.v) as n_v, sum(o.v) as sum_v,
               avg(o.v) as avg_v, avg(o.w) as avg_w, sum(o.w) filter (where o.v > 0) as sum_w_pos,
               coalesce(sum(o.w), 0) * 2 as twice_w
        from {ORDERS} o
        where o.id <> 3
        group by o.grp, 2
        """,
    # min/max: merged after inserts, affected groups recomputed after deletes/updates
    "agg_extremes": f"""
        select o.grp, min(o.v) as min_v, max(o.v) as max_v, max(o.w) as max_w, count(*) as n
        from {ORDERS} o
        group by o.grp
        """,
    # SELECT DISTINCT: hidden multiplicities
    "agg_distinct": f"""
        select distinct o.grp, o.w
        from {ORDERS} o
        """,
    # count(distinct) and HAVING: affected groups recomputed
    "agg_having": f"""
        select o.grp, count(distinct o.w) as distinct_w, sum(o.v) as sum_v
        from {ORDERS} o
        group by o.grp
        having count(*) > 1
        """,
    # aggregate over a 2-way join: a customer moving region moves its orders; partitioned
    # by the (nullable) group column, so only the affected partitions are rewritten
    "agg_join2": f"""
        {{{{ config(partition_by=['region']) }}}}
        select c.region, count(*) as n, sum(o.v) as sum_v, avg(o.w) as avg_w
        from {ORDERS} o
        join {CUSTOMERS} c on o.cid = c.id
        group by c.region
        """,
    # aggregate over a 3-way join
    "agg_join3": f"""
        select c.region, o.grp, count(*) as n, sum(l.qty) as sum_qty, count(l.qty) as n_qty
        from {LINES} l
        join {ORDERS} o on l.oid = o.id
        join {CUSTOMERS} c on c.id = o.cid
        group by c.region, o.grp
        """,
    # no GROUP BY: always one row, also on empty input
    "agg_total": f"""
        select count(*) as n, sum(o.v) as sum_v, avg(o.v) as avg_v, max(o.w) as max_w
        from {ORDERS} o
        """,
}


@pytest.fixture(scope="module")
def history(project_factory) -> tuple[IvmProject, RandomHistory]:
    project = project_factory("aggregates")
    return project, differential_history(
        project, {name: CONFIG + sql for name, sql in MODELS.items()}, TABLES, seed=20261122
    )


test_aggregate_models_match_definition = differential_test("history", list(MODELS), max_examples=4)
