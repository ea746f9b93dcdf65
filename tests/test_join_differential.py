"""Differential test for join-only ivm models: random batches of inserts, updates (join
keys included) and deletes; after every `dbt run` each table must equal its definition
recomputed from scratch.

One shared history: the models are built once on seeded random data, then every
generated example commits one random batch (possibly empty, one key possibly changed
several times) on top of the state the previous examples left, and refreshes all models
in one `dbt run`. Shrinking is off: a failing example depends on the history before it.
"""

from __future__ import annotations

import pytest

from tests.support import THREE_TABLES as TABLES
from tests.support import IvmProject, RandomHistory, differential_history, differential_test

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
def history(project_factory) -> tuple[IvmProject, RandomHistory]:
    project = project_factory("joins")
    return project, differential_history(project, MODELS, TABLES, seed=20261121)


test_join_only_models_match_definition = differential_test("history", list(MODELS), max_examples=7)
