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

import random
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dbt_ivm.changelog import ChangeLoggedTable, Op
from tests.support import IvmProject, sources_yaml

MONEY = [None, Decimal("0.00"), Decimal("1.50"), Decimal("-2.25"), Decimal("10.00"), Decimal("3.33")]
VALUES: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "orders": {
        "cid": st.one_of(st.none(), st.integers(0, 3)),
        "grp": st.sampled_from([None, "a", "b", "c"]),
        "v": st.sampled_from(MONEY),
        "w": st.one_of(st.none(), st.integers(-2, 5)),
    },
    "customers": {
        "region": st.sampled_from([None, "EU", "US"]),
    },
    "lines": {
        "oid": st.one_of(st.none(), st.integers(0, 9)),
        "qty": st.one_of(st.none(), st.integers(1, 4)),
    },
}
COLUMNS = {
    "orders": "id bigint, cid int, grp string, v decimal(10,2), w int",
    "customers": "id bigint, region string",
    "lines": "id bigint, oid bigint, qty int",
}
SOURCES = {name: f"unique_key: [id], change_log: {name}_changes" for name in COLUMNS}

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
    # aggregate over a 2-way join: a customer moving region moves its orders
    "agg_join2": f"""
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


class History:
    """The upstream tables, their change logs, and what they hold now."""

    def __init__(self, project: IvmProject) -> None:
        seed = random.Random(20261122)
        self.rows: dict[str, dict[int, dict[str, Any]]] = {}
        self.tables: dict[str, ChangeLoggedTable] = {}
        self.next_id = 100
        sizes = {"orders": 10, "customers": 4, "lines": 12}
        for name, columns in COLUMNS.items():
            rows = [self._seed_row(seed, name, i) for i in range(sizes[name])]
            self.rows[name] = {r["id"]: r for r in rows}
            project.create_table(name, columns, rows)
            self.tables[name] = project.logged_table(name, ["id"])

    @staticmethod
    def _seed_row(seed: random.Random, table: str, key: int) -> dict[str, Any]:
        row: dict[str, Any] = {"id": key}
        if table == "orders":
            row |= {
                "cid": seed.choice([None, 0, 1, 2, 3]),
                "grp": seed.choice([None, "a", "b"]),
                "v": seed.choice(MONEY),
                "w": seed.choice([None, 1, 2, 3]),
            }
        elif table == "customers":
            row |= {"region": seed.choice([None, "EU", "US"])}
        else:
            row |= {"oid": seed.choice([None, *range(10)]), "qty": seed.choice([None, 1, 2, 3])}
        return row

    def draw_ops(self, data: st.DataObject, table: str) -> list[Op]:
        state = self.rows[table]
        ops: list[Op] = []
        for _ in range(data.draw(st.integers(0, 4), label=f"{table} op count")):
            kinds = ["insert"] + (["update", "update", "delete", "delete"] if state else [])
            kind = data.draw(st.sampled_from(kinds), label="op")
            if kind == "insert":
                self.next_id += 1
                key = self.next_id
            else:
                key = data.draw(st.sampled_from(sorted(state)), label="key")
            if kind == "delete":
                del state[key]
                ops.append(Op("delete", {"id": key}))
                continue
            values = {col: data.draw(s, label=f"{table}.{col}") for col, s in VALUES[table].items()}
            state[key] = {"id": key, **values}
            ops.append(Op(kind, state[key]))
        return ops


@pytest.fixture(scope="module")
def history(project_factory) -> tuple[IvmProject, History]:
    project = project_factory("aggregates")
    project.write("models/sources.yml", sources_yaml(project.raw, SOURCES, source="src"))
    for name, sql in MODELS.items():
        project.write(f"models/{name}.sql", CONFIG + sql)
    history = History(project)
    project.run()
    assert_consistent(project, "after the first build")
    return project, history


def assert_consistent(project: IvmProject, when: str) -> None:
    for model in MODELS:
        diff = project.differences(model)
        assert not diff, f"{model} differs from its definition {when}: {diff}"


@settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.generate],
)
@given(data=st.data())
def test_aggregate_models_match_definition(history: tuple[IvmProject, History], data: st.DataObject) -> None:
    project, state = history
    committed = []
    for name, table in state.tables.items():
        ops = state.draw_ops(data, name)
        table.apply(ops)
        committed.append(f"{name}: {[(op.kind, op.row['id']) for op in ops]}")
    project.run()
    assert_consistent(project, "after the batch " + "; ".join(committed))
