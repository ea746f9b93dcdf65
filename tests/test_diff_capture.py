"""Diff capture (`change_feed: diff`, macros/change_capture/diff_capture.sql): upstreams with
no change log and no change data feed, whose changes dbt_ivm finds by comparing each table
with the snapshot it kept at the last refresh.

Differential: three random upstreams keyed by `id` (NULLs in every other column, inserts,
updates, deletes, several changes of one key, empty batches), reloaded in full as a loader
or `dbt seed` does (parquet) or changed by SQL statements (Delta tables without change data
feed); join-only, aggregate, DISTINCT and keyed models stored as parquet and as Delta. After
every `dbt run` each table equals its definition and every refresh was incremental (or a
no-op). Plus the errors (a NULL or duplicate key), a dropped snapshot, and the statements
and snapshots a refresh leaves.
"""

from __future__ import annotations

import pytest

from tests.support import THREE_TABLES as TABLES
from tests.support import (
    IvmProject,
    RandomHistory,
    differential_history,
    differential_test,
    on_delta,
    sources_yaml,
)

MODELS = {
    "joined": """\
        {{ config(materialized='ivm') }}
        select t1.id, t1.v, t2.w, t2.id as t2_id
        from {{ source('src', 't1') }} t1
        join {{ source('src', 't2') }} t2 on t1.a = t2.a
        where t2.w is null or t2.w < 8
        """,
    "totals": """\
        {{ config(materialized='ivm') }}
        select t2.b, count(*) as n, sum(t2.w) as sum_w, min(t3.x) as min_x
        from {{ source('src', 't2') }} t2
        join {{ source('src', 't3') }} t3 on t2.b = t3.b
        group by t2.b
        """,
    "kinds": """\
        {{ config(materialized='ivm') }}
        select distinct v, c from {{ source('src', 't1') }}
        """,
    "mart": """\
        {{ config(materialized='ivm', unique_key='id') }}
        with per_b as (select b, count(*) as n3 from {{ source('src', 't3') }} group by b)
        select t2.id, t2.a, per_b.n3
        from {{ source('src', 't2') }} t2
        left join per_b on t2.b = per_b.b
        """,
}

PATHS = ("incremental", "no-op")


@pytest.fixture(scope="module")
def parquet_history(project_factory) -> tuple[IvmProject, RandomHistory]:
    project = project_factory("diff")
    return project, differential_history(project, MODELS, TABLES, seed=20261127, feed="diff")


@pytest.fixture(scope="module")
def delta_history(delta, project_factory) -> tuple[IvmProject, RandomHistory]:
    project = project_factory("diff_delta")
    models = on_delta(MODELS)
    return project, differential_history(project, models, TABLES, seed=20261128, feed="diff_delta")


test_diff_models_match_definition = differential_test("parquet_history", list(MODELS), 3, PATHS)
test_diff_delta_models_match_definition = differential_test("delta_history", list(MODELS), 2, PATHS)


def reload(project: IvmProject, where: str) -> None:
    """Reload the items table in full with its rows that satisfy `where`, as a loader would."""
    rows = project.spark.sql(f"select * from {project.raw}.items where {where}").localCheckpoint(eager=True)
    rows.write.insertInto(f"{project.raw}.items", overwrite=True)


def snapshots(project: IvmProject) -> list[str]:
    return sorted(
        r.tableName
        for r in project.spark.sql(f"show tables in {project.schema} like '__ivm_snap__*'").collect()
    )


@pytest.fixture(scope="module")
def small(project_factory) -> IvmProject:
    project = project_factory("diff_small")
    project.write(
        "models/sources.yml",
        sources_yaml(project.raw, {"items": "unique_key: [id], change_feed: diff"}, source="src"),
    )
    project.write(
        "models/item_totals.sql",
        """\
        {{ config(materialized='ivm') }}
        select grp, count(*) as n, sum(qty) as qty from {{ source('src', 'items') }} group by grp
        """,
    )
    project.create_table(
        "items", "id bigint, grp string, qty int", [{"id": i, "grp": "ab"[i % 2], "qty": i} for i in range(6)]
    )
    project.run()
    return project


def test_diff_refresh_keeps_one_snapshot_and_logs_the_scan(small: IvmProject) -> None:
    first = snapshots(small)
    assert len(first) == 1, first
    small.run()
    assert small.last_path("item_totals") == "no-op"
    assert snapshots(small) == first
    small.spark.sql(f"insert into {small.raw}.items values (10, 'c', 5)")
    reload(small, "id <> 0")
    small.run()
    last = small.last_refresh("item_totals")
    assert last["path"] == "incremental"
    assert "diff capture scanned 6 rows" in last["message"]
    assert "capture" in last["phase_s"]
    after = snapshots(small)
    assert len(after) == 1 and after != first
    small.assert_consistent(["item_totals"], "after a reload")


def test_diff_duplicate_or_null_key_fails_and_applies_nothing(small: IvmProject) -> None:
    before = snapshots(small)
    small.spark.sql(f"insert into {small.raw}.items values (1, 'z', 1)")
    error = small.run_error()
    assert "IVM064" in error and "src.items" in error and '"id":1' in error, error
    assert snapshots(small) == before
    reload(small, "grp <> 'z'")
    small.spark.sql(f"insert into {small.raw}.items values (null, 'z', 1)")
    error = small.run_error()
    assert "IVM062" in error and '"id":null' in error, error
    reload(small, "id is not null")
    small.run()
    small.assert_consistent(["item_totals"], "after the key was fixed")


def test_diff_snapshot_dropped_outside_rebuilds(small: IvmProject) -> None:
    for name in snapshots(small):
        small.spark.sql(f"drop table {small.schema}.{name}")
    small.spark.sql(f"insert into {small.raw}.items values (20, 'd', 2)")
    small.run()
    last = small.last_refresh("item_totals")
    assert last["path"] == "full" and "is gone" in last["reason"], last
    assert len(snapshots(small)) == 1
    small.assert_consistent(["item_totals"], "after the rebuild")
