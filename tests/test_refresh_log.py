"""The refresh log keeps a model's history, and every refresh reads the model's partitions of
it (two per refresh that wrote): `dbt run-operation dbt_ivm.ivm_compact_refresh_log` folds
the rows older than each model's latest success into one partition, keeps every row, and
leaves the state the next refresh reads (last success, an interrupted refresh after it)
as it was."""

from __future__ import annotations

from dbt_ivm.changelog import Op
from tests.support import IvmProject

MODEL = """\
    {{ config(materialized='ivm') }}
    select o.order_id, o.amount from {{ source('shop', 'orders') }} o
    """


def partitions(project: IvmProject, model: str) -> list[str]:
    """The model's refresh log partitions (one per event)."""
    return sorted({r["event"] for r in project.refresh_log(model)})


def test_compaction_keeps_rows_and_state(project_factory) -> None:
    project = project_factory("log_compaction")
    orders = project.build_facts(MODEL)
    for i in (2, 3):
        orders.apply([Op("insert", {"order_id": i, "amount": float(i)})])
        project.run()
    last = project.last_refresh("facts")
    assert last["path"] == "incremental"
    # a refresh interrupted after the last success (its 'started' row, logged into the
    # partition of the last success's own): state, not history
    project.relog(last["refresh_id"], "started")
    rows_before = len(project.refresh_log("facts"))
    assert len(partitions(project, "facts")) == 6

    project.invoke("run-operation", "dbt_ivm.ivm_compact_refresh_log")
    events = partitions(project, "facts")
    assert len(events) == 3, events
    assert f"success:{last['refresh_id']}" in events and f"started:{last['refresh_id']}" in events
    assert len(project.refresh_log("facts")) == rows_before

    # the next refresh sees the interrupted one and re-applies by key from the last success
    orders.apply([Op("update", {"order_id": 1, "amount": 10.0}), Op("delete", {"order_id": 2})])
    project.run()
    refresh = project.last_refresh("facts")
    assert refresh["path"] == "incremental", refresh
    assert "re-applying by key" in refresh["reason"], refresh["reason"]
    assert refresh["versions_from"] == last["versions_to"]
    project.assert_consistent(["facts"], "after compacting the refresh log")

    # compacting again folds the earlier compacted partition into the new one
    project.invoke("run-operation", "dbt_ivm.ivm_compact_refresh_log")
    events = partitions(project, "facts")
    assert len(events) == 2 and sum(e.startswith("compacted:") for e in events) == 1, events
    assert project.refresh_log("facts")[-1]["refresh_id"] == refresh["refresh_id"]
