"""Differential test for the keyed recompute path (macros/analysis/keyed.sql): mart-shaped
models with LEFT/FULL/anti/semi joins, aggregates in CTEs (an import CTE read twice),
window functions, QUALIFY, window rows joined on their PARTITION BY column, keys listed
through a join equality from the changed upstream's own column, a self-join,
EXISTS / NOT EXISTS / IN subqueries and UNION ALL, over three upstreams changed together
in every batch (inserts, updates that move rows between keys and set them to NULL,
deletes of the last child of a parent, empty batches). After every `dbt run` each table
must equal its definition, and every refresh must have been incremental (or a no-op):
never a silent full rebuild.
"""

from __future__ import annotations

import pytest

from tests.support import THREE_TABLES as TABLES
from tests.support import IvmProject, RandomHistory, differential_history, differential_test, on_delta

MODELS = {
    # a customers mart: the parent LEFT JOINed to import-CTE aggregates of two children
    "parent_mart": """\
        {{ config(materialized='ivm') }}
        with parents as (select * from {{ source('src', 't1') }}),
        per_a as (
            select a, count(*) as n2, sum(w) as sum_w, max(b) as max_b
            from {{ source('src', 't2') }}
            group by a
        ),
        per_b as (select b, count(*) as n3, min(x) as min_x from {{ source('src', 't3') }} group by b)
        select parents.id, parents.v, coalesce(per_a.n2, 0) as n2, per_a.sum_w, per_b.n3, per_b.min_x
        from parents
        left join per_a on parents.a = per_a.a
        left join per_b on parents.c = per_b.b
        where per_a.n2 is null or per_a.n2 < 4
        order by parents.id
        """,
    # an orders mart: window functions per customer over a LEFT JOIN to a line aggregate
    "child_mart": """\
        {{ config(materialized='ivm', unique_key='id') }}
        with lines as (
            select b, count(*) as n_lines, count_if(x = 'p') as n_p
            from {{ source('src', 't3') }}
            group by b
        ),
        final as (
            select o.id, o.a as customer, o.w, lines.n_lines,
                row_number() over (partition by o.a order by o.id) as customer_seq,
                sum(o.w) over (partition by o.a order by o.id rows unbounded preceding) as running_w,
                lag(o.w) over (partition by o.a order by o.id) as previous_w
            from {{ source('src', 't2') }} o
            left join lines on o.b = lines.b
        )
        select * from final
        """,
    # the latest row per key (QUALIFY row_number() = 1)
    "latest_per_a": """\
        {{ config(materialized='ivm') }}
        select t2.a, t2.id, t2.b
        from {{ source('src', 't2') }} t2
        qualify row_number() over (partition by t2.a order by t2.id desc) = 1
        """,
    # the latest child per parent (QUALIFY in a CTE) LEFT JOINed on its PARTITION BY column:
    # slices of the parent's key
    "latest_child": """\
        {{ config(materialized='ivm', unique_key='id') }}
        with latest as (
            select id, a, w from {{ source('src', 't2') }}
            qualify row_number() over (partition by a order by w desc, id) = 1
        )
        select t1.id, t1.v, latest.id as t2_id, latest.w
        from {{ source('src', 't1') }} t1
        left join latest on latest.a = t1.a
        """,
    # a per-key summary LEFT JOINed to the latest child of the key: a change to t3 lists its
    # keys from t3's own column (the key term reads no t2)
    "summary_with_latest": """\
        {{ config(materialized='ivm', unique_key='a') }}
        with children as (
            select a, count(*) as n, max(w) as max_w from {{ source('src', 't2') }} group by a
        ),
        latest as (
            select b, x from {{ source('src', 't3') }}
            qualify row_number() over (partition by b order by id desc) = 1
        ),
        final as (
            select children.a, children.n, children.max_w, latest.x as latest_x
            from children
            left join latest on latest.b = children.a
        )
        select * from final
        """,
    # children with their parent's key, kept while no t3 row shares their b: a change to t2
    # lists parent_a from t2.a, the column its join equates it with
    "children_without_t3": """\
        {{ config(materialized='ivm') }}
        select t2.id, t2.w, t1.a as parent_a
        from {{ source('src', 't2') }} t2
        join {{ source('src', 't1') }} t1 on t1.a = t2.a
        where not exists (select 1 from {{ source('src', 't3') }} t3 where t3.b = t2.b)
        """,
    # a window CTE joined on its PARTITION BY column and filtered on its value in the ON
    "first_children": """\
        {{ config(materialized='ivm') }}
        with ranked as (
            select id, b, x, row_number() over (partition by b order by id) as seq
            from {{ source('src', 't3') }}
        )
        select t1.id, t1.c, ranked.id as t3_id, ranked.seq, ranked.x
        from {{ source('src', 't1') }} t1
        join ranked on ranked.b = t1.c and ranked.seq <= 2
        """,
    # semi and anti joins
    "with_and_without": """\
        {{ config(materialized='ivm') }}
        select t1.id, t1.v, 'has_t3' as kind
        from {{ source('src', 't1') }} t1
        left semi join {{ source('src', 't3') }} t3 on t1.c = t3.b
        """,
    "without_t2": """\
        {{ config(materialized='ivm') }}
        select t1.id, t1.a
        from {{ source('src', 't1') }} t1
        left anti join {{ source('src', 't2') }} t2 on t1.a = t2.a
        """,
    # an upstream read twice (self-join)
    "pairs": """\
        {{ config(materialized='ivm') }}
        select x.id as x_id, y.id as y_id, x.w
        from {{ source('src', 't2') }} x
        join {{ source('src', 't2') }} y on x.b = y.a
        """,
    # EXISTS, NOT EXISTS and IN subqueries (t2 read by two of them)
    "filtered_by_subqueries": """\
        {{ config(materialized='ivm') }}
        select t1.id, t1.v
        from {{ source('src', 't1') }} t1
        where exists (select 1 from {{ source('src', 't2') }} t2 where t2.a = t1.a and t2.w > 2)
          and not exists (select 1 from {{ source('src', 't3') }} t3 where t3.b = t1.c)
          and t1.c in (select t2b.b from {{ source('src', 't2') }} t2b)
        """,
    # UNION ALL of two sources, aggregated
    "union_of_sources": """\
        {{ config(materialized='ivm') }}
        with events as (
            select t1.id, t1.a as k, 'one' as src from {{ source('src', 't1') }} t1
            union all
            select t2.id, t2.a as k, 'two' as src from {{ source('src', 't2') }} t2 where t2.w is not null
        )
        select k, src, count(*) as n, max(id) as last_id from events group by k, src
        """,
    # an import CTE read by two aggregate CTEs
    "shared_import": """\
        {{ config(materialized='ivm', unique_key='id') }}
        with parents as (select * from {{ source('src', 't1') }}),
        children as (select * from {{ source('src', 't2') }}),
        per_a as (select a, count(*) as n from children group by a),
        per_b as (select b, sum(w) as w_sum from children group by b)
        select parents.id, per_a.n, per_b.w_sum
        from parents
        left join per_a on parents.a = per_a.a
        left join per_b on parents.c = per_b.b
        """,
    # a FULL JOIN of two aggregates keyed by the coalesce of their keys, over a UNION of CTE stars
    "full_join_of_totals": """\
        {{ config(materialized='ivm') }}
        with by_a as (select a as k, count(*) as n1 from {{ source('src', 't1') }} group by a),
        one as (select t2.id, t2.b as k from {{ source('src', 't2') }} t2),
        two as (select t3.id, t3.b as k from {{ source('src', 't3') }} t3),
        both_sides as (select * from one union all select * from two),
        by_b as (select k, count(*) as n2 from both_sides group by k)
        select coalesce(by_a.k, by_b.k) as k, by_a.n1, by_b.n2
        from by_a
        full join by_b on by_a.k = by_b.k
        """,
    # an aggregate over an aggregate in a CTE, keyed by a double (a type without literals:
    # its affected keys go through the scratch table, not a VALUES list)
    "rollup_of_sums": """\
        {{ config(materialized='ivm') }}
        with per_ab as (
            select cast(a as double) as a, b, sum(w) as total from {{ source('src', 't2') }} group by a, b
        )
        select a, count(*) as n_b, sum(total) as total from per_ab group by a
        """,
}

PATHS = ("incremental", "no-op")


@pytest.fixture(scope="module")
def parquet_history(project_factory) -> tuple[IvmProject, RandomHistory]:
    project = project_factory("keyed")
    return project, differential_history(project, MODELS, TABLES, seed=20261125)


@pytest.fixture(scope="module")
def delta_history(delta, project_factory) -> tuple[IvmProject, RandomHistory]:
    project = project_factory("keyed_delta")
    models = on_delta(MODELS)
    return project, differential_history(project, models, TABLES, seed=20261126, feed="delta")


test_keyed_models_match_definition = differential_test("parquet_history", list(MODELS), 3, PATHS)
test_keyed_delta_models_match_definition = differential_test("delta_history", list(MODELS), 2, PATHS)
