"""ivm on ivm: ivm models that read other ivm models through ref(), with no `meta.ivm`
declaration. The package records each ivm table's row key as the table property
dbt_ivm.row_key; a parquet ivm table with ivm dependents writes its own change log
(__ivm_changes__<table>), a Delta one is read through its change data feed.

Differential: a 4-level chain (join-only over two change-logged sources -> aggregate and
DISTINCT over it -> join of the aggregate with a source -> aggregate of that join) under
random batches at the bottom; after every `dbt run` each table equals its definition.
Once with parquet tables, once with every model stored as Delta. Plus: a full refresh of
the middle model and an interrupted upstream refresh make the downstream rebuild, logged
with the reason, and an ivm upstream without a row key fails with IVM030.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st

from dbt_ivm.changelog import Op
from dbt_ivm.explain.manifest import parse_manifest
from dbt_ivm.runner import sent_sql
from tests.manifests import ManifestBuilder
from tests.support import (
    IvmProject,
    RandomHistory,
    TableSpec,
    differential_history,
    differential_test,
    sources_yaml,
)
from tests.test_delta_full import delta_project

KEY = st.one_of(st.none(), st.integers(0, 2))
GROUP = st.sampled_from([None, "a", "b", "c"])
VALUE = st.one_of(st.none(), st.integers(-3, 9))
TABLES = {
    "s1": TableSpec(
        "id bigint, k int, v int", {"k": KEY, "v": VALUE}, {"k": [0, 1, 2], "v": [None, 1, 4, 7]}, rows=8
    ),
    "s2": TableSpec(
        "id bigint, k int, g string",
        {"k": KEY, "g": GROUP},
        {"k": [None, 0, 1, 2], "g": [None, "a", "b"]},
        rows=8,
    ),
    "s3": TableSpec(
        "id bigint, g string, w int",
        {"g": GROUP, "w": VALUE},
        {"g": ["a", "b", "c"], "w": [1, 2]},
        rows=4,
    ),
}
CONFIG = "{{ config(materialized='ivm') }}\n"
MODELS = {
    # level 1: join-only over two change-logged sources
    "l1": CONFIG
    + """
        select s1.id as id1, s2.id as id2, s2.g, s1.v
        from {{ source('src', 's1') }} s1 join {{ source('src', 's2') }} s2 on s1.k = s2.k
        """,
    # level 2: an aggregate and a DISTINCT over level 1
    "l2": CONFIG
    + """
        select g, count(*) as n, sum(v) as sum_v, min(v) as min_v, max(v) as max_v
        from {{ ref('l1') }}
        group by g
        """,
    "l2d": CONFIG
    + """
        select distinct g, v from {{ ref('l1') }}
        """,
    # level 3: the aggregate joined with a source on its group key
    "l3": CONFIG
    + """
        select l2.g, l2.n, l2.sum_v, s3.id as id3, s3.w
        from {{ ref('l2') }} l2 join {{ source('src', 's3') }} s3 on l2.g = s3.g
        """,
    # level 4: an aggregate of level 3 (row keys through two levels of hidden columns)
    "l4": CONFIG
    + """
        select w, count(*) as rows_, sum(n) as n, max(sum_v) as top
        from {{ ref('l3') }}
        group by w
        """,
}
CHAIN = list(MODELS)
# every refresh of the chain is incremental (or has nothing to do): no level rebuilds
REFRESHED = ("incremental", "no-op")


def row_key(project: IvmProject, model: str) -> str | None:
    props = {
        r["key"]: r["value"]
        for r in project.spark.sql(f"show tblproperties {project.schema}.{model}").collect()
    }
    return props.get("dbt_ivm.row_key")


@pytest.fixture(scope="module")
def parquet_chain(project_factory) -> tuple[IvmProject, RandomHistory]:
    project = project_factory("chain_parquet")
    return project, differential_history(project, MODELS, TABLES, seed=20261123)


@pytest.fixture(scope="module")
def delta_chain(project_factory, delta) -> tuple[IvmProject, RandomHistory]:
    project = delta_project(project_factory("chain_delta"))
    return project, differential_history(project, MODELS, TABLES, seed=20261123)


test_delta_chain_matches_definition = differential_test("delta_chain", CHAIN, 2, paths=REFRESHED)


def test_delta_ivm_table_properties(delta_chain: tuple[IvmProject, RandomHistory]) -> None:
    """The row key for the ivm models that read a table; the change data feed only when one
    does (l4 has no ivm reader); deletion vectors where a refresh deletes rows by key (the
    joins l1 and l3), not on aggregate tables (l2, l4)."""
    project, _ = delta_chain

    def props(model: str) -> dict[str, str]:
        rows = project.spark.sql(f"show tblproperties {project.schema}.{model}").collect()
        return {r["key"]: r["value"] for r in rows}

    assert props("l2")["dbt_ivm.row_key"] == "__ivm_g_0"
    feed = {m: props(m).get("delta.enableChangeDataFeed") for m in CHAIN}
    assert feed == {"l1": "true", "l2": "true", "l2d": "false", "l3": "true", "l4": "false"}, feed
    vectors = {m: props(m).get("delta.enableDeletionVectors") for m in CHAIN}
    assert vectors == {"l1": "true", "l2": "false", "l2d": "false", "l3": "true", "l4": "false"}, vectors


def test_row_keys_recorded(parquet_chain: tuple[IvmProject, RandomHistory]) -> None:
    project, _ = parquet_chain
    counts = {m: project.spark.table(f"{project.schema}.{m}").count() for m in CHAIN}
    assert all(counts.values()), counts
    assert set(row_key(project, "l1").split(",")) == {"__ivm_s1__id", "__ivm_s2__id"}
    assert row_key(project, "l2") == "__ivm_g_0"
    assert set(row_key(project, "l2d").split(",")) == {"g", "v"}
    assert set(row_key(project, "l3").split(",")) == {"__ivm_l2____ivm_g_0", "__ivm_s3__id"}
    assert row_key(project, "l4") == "__ivm_g_0"
    # only tables that ivm models read write a change log
    tables = {r["tableName"] for r in project.spark.sql(f"show tables in {project.schema}").collect()}
    assert {"__ivm_changes__l1", "__ivm_changes__l2", "__ivm_changes__l3"} <= tables
    assert not {"__ivm_changes__l2d", "__ivm_changes__l4"} & tables


test_parquet_chain_matches_definition = differential_test("parquet_chain", CHAIN, 3, paths=REFRESHED)


def change_bottom(project: IvmProject, history: RandomHistory, new_id: int) -> None:
    """Insert a row into s1 that joins (k = 1), so every level changes."""
    history.tables["s1"].apply([Op("insert", {"id": new_id, "k": 1, "v": 5})])
    history.rows["s1"][new_id] = {"id": new_id, "k": 1, "v": 5}


def test_delta_refresh_reads_each_history_once(delta_chain: tuple[IvmProject, RandomHistory]) -> None:
    """A Delta refresh reads an upstream's history once for its version, the rebuild check
    and the change-feed check together, and its own table's version without asking its
    provider: its own history at most twice, for the version before its write and, after an
    INSERT (which returns no counts), for the counts of its commit."""
    project, history = delta_chain
    # rows that join at every level, whatever the history left: l1 to l4 all change
    for table, row in (("s2", {"id": 90021, "k": 1, "g": "a"}), ("s3", {"id": 90021, "g": "a", "w": 1})):
        history.tables[table].apply([Op("insert", row)])
        history.rows[table][row["id"]] = row
    change_bottom(project, history, 90021)
    sent: dict[str, list[str]] = {}

    def record(msg: Any) -> None:
        if msg.info.name == "SQLQuery" and msg.data.node_info.node_name in CHAIN:
            sent.setdefault(msg.data.node_info.node_name, []).append(sent_sql(msg.data.sql).lower())

    project.dbt.invoke("run", callbacks=[record])
    paths = {m: (project.last_refresh(m)["path"], project.last_refresh(m)["reason"]) for m in CHAIN}
    assert all(paths[m][0] == "incremental" for m in ("l2", "l3", "l4")), paths
    for model, statements in sent.items():
        own_history = f"describe history {project.schema}.{model} "
        histories = [
            s for s in statements if s.startswith("describe history") and not s.startswith(own_history)
        ]
        assert len(histories) == len(set(histories)), (model, histories)
        assert len([s for s in statements if s.startswith(own_history)]) <= 2, (model, statements)
        own = f"describe table extended {project.schema}.{model}"
        assert own not in statements, (model, statements)
    # l3 reads the Delta ivm model l2's history once: its latest commits give the version
    # and serve both checks, so its whole history is not read
    read = [s for s in sent["l3"] if s.startswith(f"describe history {project.schema}.l2")]
    assert read == [f"describe history {project.schema}.l2 limit 10"], sent["l3"]


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["delta", "parquet"])
def test_full_refresh_of_middle_model_rebuilds_downstream(fmt: str, request: pytest.FixtureRequest) -> None:
    project, history = request.getfixturevalue(f"{fmt}_chain")
    project.run("--full-refresh", "-s", "l2")
    assert project.last_refresh("l2")["reason"] == "--full-refresh requested"
    change_bottom(project, history, 90001)
    project.run()
    project.assert_consistent(CHAIN, "after a full refresh of l2")
    last = project.last_refresh("l3")
    assert last["path"] == "full", last
    assert "upstream l2 (an ivm model) was rebuilt in full" in last["reason"]
    # and l4 after l3, in turn
    assert "upstream l3 (an ivm model) was rebuilt in full" in project.last_refresh("l4")["reason"]
    # and back to incremental
    change_bottom(project, history, 90002)
    project.run()
    project.assert_consistent(CHAIN, "after the run that followed")
    assert project.last_path("l3") in ("incremental", "no-op")


def test_interrupted_upstream_refresh_rebuilds_parquet_downstream(
    parquet_chain: tuple[IvmProject, RandomHistory],
) -> None:
    project, history = parquet_chain
    change_bottom(project, history, 90011)
    project.run()
    # the crash of l1's last refresh: its 'started' row is the last one
    project.relog(project.last_refresh("l1")["refresh_id"], "started")
    change_bottom(project, history, 90012)
    project.run()
    project.assert_consistent(CHAIN, "after the repair of an interrupted upstream refresh")
    assert "interrupted" in project.last_refresh("l1")["reason"]
    for model in ("l2", "l2d"):
        last = project.last_refresh(model)
        assert last["path"] == "full", last
        assert "upstream l1 (an ivm model) had an interrupted refresh" in last["reason"]
    change_bottom(project, history, 90013)
    project.run()
    project.assert_consistent(CHAIN, "after the run that followed")
    assert project.last_path("l2") in ("incremental", "no-op")


def test_ivm_upstream_without_row_key_fails(project_factory) -> None:
    project = project_factory("chain_no_key")
    project.write(
        "models/sources.yml", sources_yaml(project.raw, {"s1": "unique_key: [id], change_log: s1_changes"})
    )
    project.create_table("s1", "id bigint, k int, v int", [{"id": 1, "k": 1, "v": 2}])
    project.logged_table("s1", ["id"])
    project.write(
        "models/total.sql", CONFIG + "select count(*) as n, sum(v) as v from {{ source('shop', 's1') }}\n"
    )
    project.write("models/over_total.sql", CONFIG + "select n, v from {{ ref('total') }}\n")
    failures = project.run_failures()
    message = failures["over_total"]
    assert "IVM030" in message and "total is an ivm model" in message and "records no row key" in message, (
        message
    )
    assert "total" not in failures


def test_explain_reads_an_undeclared_ivm_upstream() -> None:
    """`dbt-ivm explain` (from the manifest, no cluster) treats a ref() of another ivm model
    without meta.ivm as an ivm upstream, not as undeclared (IVM031)."""
    m = ManifestBuilder()
    orders = m.source("orders", {"unique_key": ["order_id"], "change_log": "orders_changes"})
    base = m.model("base", "select o.order_id, o.region from raw.orders o", [orders])
    view = m.model("plain", "select 1 as id", [], materialized="view")
    m.model("top", "select b.region, count(*) as n from analytics.base b group by b.region", [base])
    m.model("over_view", "select p.id from analytics.plain p", [view])
    models = {model.name: model for model in parse_manifest(m.manifest()).models}
    (up,) = models["top"].upstreams
    assert (up.kind, up.feed, up.problems) == ("change_log", "ivm", ())
    assert [code for code, _ in models["over_view"].upstreams[0].problems] == ["IVM031"]
