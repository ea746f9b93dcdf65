"""How an interrupted refresh of a Delta table is resolved from the table's history
(_ivm_delta_resolve_interrupted, macros/apply/delta_apply.sql), in the macro runtime with a
stand-in DESCRIBE HISTORY: which commits it reads and what it decides. The kill campaigns
(tests/test_delta_kills.py) check the same on Spark, after real crashes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dbt_ivm.macro_runtime import Runtime
from tests.manifests import MACROS

COLUMNS = ["version", "timestamp", "operation", "operationParameters", "operationMetrics"]


@dataclass
class History:
    """DESCRIBE HISTORY of a table whose commits are `ops` (version 0 first), newest first
    and limited as Delta returns it; every query it answers is kept."""

    ops: list[str]
    queries: list[str] = field(default_factory=list)

    def __call__(self, sql: str) -> Any:
        self.queries.append(sql)
        rows = [
            [v, "2026-12-04 10:00:00", op, {"mode": "Append"}, {"numOutputRows": "1"}]
            for v, op in reversed(list(enumerate(self.ops)))
        ]
        if " limit " in sql:
            rows = rows[: int(sql.rsplit(" limit ", 1)[1])]
        return type("Table", (), {"column_names": COLUMNS, "rows": rows})()


def resolve(history: History, table_versions: list[int]) -> dict[str, Any]:
    # a runtime of its own: a macro binds the globals (run_query) when first called
    runtime = Runtime.from_directory(MACROS)
    runtime.globals["run_query"] = history
    interrupted = [
        {
            "refresh_id": f"r{i}",
            "table_version": v,
            "path": "incremental",
            "definition_hash": "h",
            "versions": {"shop.orders": str(10 + i)},
            "logged_at": "2026-12-04 10:00:00",
        }
        for i, v in enumerate(table_versions)
    ]
    state = {
        "interrupted": interrupted[-1],
        "interrupted_all": interrupted,
        "last_success": {"versions": {"shop.orders": "9"}, "definition_hash": "h", "logged_at": "x"},
    }
    return runtime.macro("_ivm_delta_resolve_interrupted")("db.facts", state, True)


def test_the_latest_commits_decide_when_they_reach_the_recorded_version() -> None:
    # 40 commits; the interrupted refresh started at version 38 and its MERGE committed 39
    history = History(["CREATE TABLE AS SELECT"] + ["MERGE"] * 39)
    state = resolve(history, [38])
    assert history.queries == ["describe history db.facts limit 10"]
    assert state["last_success"]["versions"] == {"shop.orders": "10"}, "committed: continue from its versions"


def test_a_refresh_that_did_not_commit_resumes_from_the_last_success() -> None:
    # the interrupted refresh started at the latest version: nothing after it
    history = History(["CREATE TABLE AS SELECT"] + ["MERGE"] * 39)
    state = resolve(history, [39])
    assert history.queries == ["describe history db.facts limit 10"]
    assert state["last_success"]["versions"] == {"shop.orders": "9"}


def test_more_commits_since_than_the_window_read_the_whole_history() -> None:
    # the refresh started at version 5, committed 6; then 13 property changes (no data)
    history = History(["CREATE TABLE AS SELECT"] + ["MERGE"] * 6 + ["SET TBLPROPERTIES"] * 13)
    state = resolve(history, [5])
    assert history.queries == ["describe history db.facts limit 10", "describe history db.facts"]
    assert state["last_success"]["versions"] == {"shop.orders": "10"}
    # the same without the commit: the property changes alone are no write
    history = History(["CREATE TABLE AS SELECT"] + ["MERGE"] * 5 + ["SET TBLPROPERTIES"] * 14)
    assert resolve(history, [5])["last_success"]["versions"] == {"shop.orders": "9"}


def test_of_two_interrupted_refreshes_the_later_one_below_the_commit_committed() -> None:
    history = History(["CREATE TABLE AS SELECT", "MERGE", "MERGE", "MERGE"])
    state = resolve(history, [1, 2])
    assert history.queries == ["describe history db.facts limit 10"]
    assert state["last_success"]["versions"] == {"shop.orders": "11"}
