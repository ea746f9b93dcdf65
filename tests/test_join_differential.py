"""Differential tests for join-only ivm models: random upstream data and random batches of
inserts, updates (join keys included) and deletes; after every `dbt run` each table must
equal its definition recomputed from scratch."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbt_ivm.changelog import Op
from tests.support import IvmProject, sources_yaml

JOIN_KEY = st.one_of(st.none(), st.integers(0, 2))
TABLES: dict[str, dict[str, Any]] = {
    "t1": {
        "columns": "id bigint, a int, c int, v string",
        "values": {"a": JOIN_KEY, "c": JOIN_KEY, "v": st.sampled_from([None, "x", "y"])},
    },
    "t2": {
        "columns": "id bigint, a int, b int, w int",
        "values": {"a": JOIN_KEY, "b": JOIN_KEY, "w": st.one_of(st.none(), st.integers(0, 9))},
    },
    "t3": {
        "columns": "id bigint, b int, x string",
        "values": {"b": JOIN_KEY, "x": st.sampled_from([None, "p", "q"])},
    },
}

SOURCES = {name: f"unique_key: [id], change_log: {name}_changes" for name in TABLES}

MODELS = {
    # two upstreams, a filter and a computed column
    "two_table": """\
        {{ config(materialized='ivm') }}
        select t1.id as t1_id, t2.id as t2_id, t1.v, t2.w * 2 as w2
        from {{ source('src', 't1') }} t1
        join {{ source('src', 't2') }} t2 on t1.a = t2.a
        where coalesce(t2.w, 0) < 8
        """,
    # a chain t1 - t2 - t3 written with import CTEs
    "chain": """\
        {{ config(materialized='ivm') }}
        with t1 as (select * from {{ source('src', 't1') }}),
        t2 as (select * from {{ source('src', 't2') }}),
        t3 as (select * from {{ source('src', 't3') }})
        select t1.id as t1_id, t2.id as t2_id, t3.id as t3_id, t3.x
        from t1
        join t2 on t1.a = t2.a
        join t3 on t2.b = t3.b
        """,
    # a star around t1, partitioned by a nullable column
    "star": """\
        {{ config(materialized='ivm', partition_by=['part']) }}
        select t1.id as t1_id, t2.id as t2_id, t3.id as t3_id, t1.v, t2.b as part
        from {{ source('src', 't1') }} t1
        join {{ source('src', 't2') }} t2 on t1.a = t2.a
        join {{ source('src', 't3') }} t3 on t1.c = t3.b
        """,
}


@pytest.fixture(scope="module")
def project(project_factory) -> IvmProject:
    project = project_factory("joins")
    project.write("models/sources.yml", sources_yaml(project.raw, SOURCES, source="src"))
    for name, sql in MODELS.items():
        project.write(f"models/{name}.sql", sql)
    return project


def draw_row(data: st.DataObject, table: str, key: int) -> dict[str, Any]:
    values = {
        col: data.draw(strategy, label=f"{table}.{col}") for col, strategy in TABLES[table]["values"].items()
    }
    return {"id": key, **values}


def draw_ops(
    data: st.DataObject, table: str, state: dict[int, dict[str, Any]], next_id: list[int]
) -> list[Op]:
    """Up to 4 operations valid against the evolving state; one key may change several times."""
    ops: list[Op] = []
    for _ in range(data.draw(st.integers(0, 4), label=f"{table} op count")):
        kinds = ["insert"] + (["update", "update", "delete"] if state else [])
        kind = data.draw(st.sampled_from(kinds), label="op")
        if kind == "insert":
            next_id[0] += 1
            row = draw_row(data, table, next_id[0])
            state[row["id"]] = row
            ops.append(Op("insert", row))
            continue
        key = data.draw(st.sampled_from(sorted(state)), label="key")
        if kind == "delete":
            del state[key]
            ops.append(Op("delete", {"id": key}))
        else:
            state[key] = draw_row(data, table, key)
            ops.append(Op("update", state[key]))
    return ops


def assert_consistent(project: IvmProject, when: str) -> None:
    for model in MODELS:
        diff = project.differences(model)
        assert not diff, f"{model} differs from its definition {when}: {diff}"


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_join_only_models_match_definition(project: IvmProject, data: st.DataObject) -> None:
    states: dict[str, dict[int, dict[str, Any]]] = {}
    next_id = [1000]
    tables = {}
    for name, spec in TABLES.items():
        rows = [draw_row(data, name, i) for i in range(data.draw(st.integers(0, 6), label=f"{name} rows"))]
        states[name] = {r["id"]: r for r in rows}
        project.create_table(name, spec["columns"], rows)
        tables[name] = project.logged_table(name, ["id"])
    project.run("--full-refresh")
    assert_consistent(project, "after the first build")
    for batch in range(data.draw(st.integers(1, 2), label="batches")):
        for name, table in tables.items():
            table.apply(draw_ops(data, name, states[name], next_id))
        project.run()
        assert_consistent(project, f"after batch {batch + 1}")
