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


COMPACTING = """\
    {{ config(materialized='ivm', meta={'ivm_compact_log_above': 4}) }}
    select o.order_id, o.amount from {{ source('shop', 'orders') }} o
    """


def test_refresh_compacts_its_history_under_the_lease(project_factory) -> None:
    """Past ivm_compact_log_above partitions of history, the refresh folds them into one
    before it logs its own rows: the state read stays a few files, every row is kept
    once, and a copy left by an interrupted compaction is written once by the next one."""
    project = project_factory("log_autocompact")
    orders = project.build_facts(COMPACTING)
    log = f"{project.schema}.__ivm_refresh_log"
    compacting_statements: list[list[str]] = []
    for i in range(2, 9):
        inserted = Op("insert", {"order_id": i, "amount": float(i)})
        orders.apply([inserted, Op("update", {"order_id": 1, "amount": float(-i)})])
        sent = project.statements()["facts"]
        assert project.last_refresh("facts")["path"] == "incremental"
        project.assert_consistent(["facts"], f"after refresh {i - 1}")
        folds = [s for s in sent if s.startswith(f"insert overwrite table {log} ") and "__ivm_copy" in s]
        if folds:
            compacting_statements.append(sent)
        if i == 5:
            # rows in two partitions, as a fold killed before its drop leaves them
            history = [e for e in partitions(project, "facts") if e.startswith("compacted:")]
            assert history, partitions(project, "facts")
            project.spark.sql(
                f"insert overwrite table {log} select * except (event), 'compacted:interrupted' "
                f"from {log} where event = '{history[0]}'"
            )
        # never more than the threshold's history, the last success and this refresh's two rows
        assert len(partitions(project, "facts")) <= 4 + 1 + 1 + 2, partitions(project, "facts")

    assert len(compacting_statements) >= 2, "the history was never compacted"
    # the fold and the drop of the folded partitions: two statements, only when it compacts
    for sent in compacting_statements:
        assert sum(s.startswith(f"alter table {log} drop if exists partition") for s in sent) == 1
        # under the lease, before the refresh logs its own 'started' row
        fold = next(n for n, s in enumerate(sent) if "__ivm_copy" in s)
        lease = next(n for n, s in enumerate(sent) if "__ivm_lease__" in s and s.startswith("create table"))
        writes = f"insert overwrite table {log} "
        started = next(n for n, s in enumerate(sent) if s.startswith(writes) and "'started'" in s)
        assert lease < fold < started, sent
    rows = project.refresh_log("facts")
    # the build and seven refreshes, a 'started' and a 'success' row each, none twice
    assert len(rows) == 2 * 8, [(r["status"], r["event"]) for r in rows]
    assert len({(r["refresh_id"], r["status"]) for r in rows}) == len(rows)
    assert not [e for e in partitions(project, "facts") if e == "compacted:interrupted"]
