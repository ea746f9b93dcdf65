"""Where a dbt run's time goes in Spark: the SQL executions (Spark records one per statement
that runs a query or a command), jobs, rows read from storage and bytes shuffled between
two moments, from the Spark UI's REST API of the benchmark's own session (the benchmark
turns the UI on). Rows, not bytes: on the local file system Spark's input byte counts
miss most of what parquet reads, its record counts do not."""

from __future__ import annotations

import json
import time
import urllib.request
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from dbt_ivm.runner import sent_sql

MB = 1024 * 1024


@dataclass(frozen=True)
class Mark:
    """The newest SQL execution, job and stage ids at one moment."""

    execution: int
    job: int
    stage: int


@dataclass(frozen=True)
class SparkProfile:
    """The Spark UI of one session (e.g. `spark.sparkContext.uiWebUrl`)."""

    url: str

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}", timeout=30) as response:
            return json.load(response)

    def _app(self) -> str:
        return str(self._get("applications")[0]["id"])

    def _settled(self, app: str) -> None:
        """Until no job runs: the UI learns of finished stages asynchronously."""
        deadline = time.monotonic() + 10
        while self._get(f"applications/{app}/jobs?status=running") and time.monotonic() < deadline:
            time.sleep(0.1)

    def _read(self) -> tuple[list[Any], list[Any], list[Any]]:
        """The UI's SQL executions, jobs and stages, once no job runs."""
        app = self._app()
        self._settled(app)
        return (
            self._get(f"applications/{app}/sql?details=false&length=100000"),
            self._get(f"applications/{app}/jobs"),
            self._get(f"applications/{app}/stages?details=false"),
        )

    @staticmethod
    def _mark(executions: list[Any], jobs: list[Any], stages: list[Any]) -> Mark:
        return Mark(
            max((int(e["id"]) for e in executions), default=-1),
            max((int(j["jobId"]) for j in jobs), default=-1),
            max((int(s["stageId"]) for s in stages), default=-1),
        )

    def mark(self) -> Mark:
        return self._mark(*self._read())

    def since(self, start: Mark, statements: Sequence[tuple[float, str]] = ()) -> dict[str, Any]:
        """SQL executions, jobs, thousands of rows read and MB shuffled since `start`, the
        slowest executions (seconds, jobs, Spark's description) and, given the statements
        dbt sent meanwhile (epoch seconds, SQL), what each of them cost (see by_statement)."""
        ended = time.time()
        executions, jobs, stages = self._read()
        end = self._mark(executions, jobs, stages)
        new = [s for s in stages if int(s["stageId"]) > start.stage]
        ran = [e for e in executions if int(e["id"]) > start.execution]
        return asdict(
            Usage(
                executions=end.execution - start.execution,
                jobs=end.job - start.job,
                read_k_rows=round(sum(int(s.get("inputRecords", 0)) for s in new) / 1000, 1),
                shuffled_mb=round(sum(int(s.get("shuffleReadBytes", 0)) for s in new) / MB, 1),
                slowest=[_slow(e) for e in sorted(ran, key=lambda e: -int(e.get("duration", 0)))[:SLOWEST]],
                statements=by_statement(statements, ran, jobs, new, ended),
            )
        )


def by_statement(
    statements: Sequence[tuple[float, str]],
    executions: list[Any],
    jobs: list[Any],
    stages: list[Any],
    ended: float,
) -> list[dict[str, Any]]:
    """Per statement dbt sent, in order: its SQL's start, the seconds until the next one (or
    `ended`), and the SQL executions Spark submitted in that time (a MERGE runs several), their
    jobs and the thousands of rows their stages read. An execution belongs to the latest
    statement sent before it was submitted: dbt sends one statement at a time per model."""
    sent = [t for t, _ in statements]
    job_stages = {int(j["jobId"]): [int(i) for i in j.get("stageIds", [])] for j in jobs}
    stage_rows: dict[int, int] = {}
    for stage in stages:
        sid = int(stage["stageId"])
        stage_rows[sid] = max(stage_rows.get(sid, 0), int(stage.get("inputRecords", 0)))
    rows: list[dict[str, Any]] = []
    for i, (t, sql) in enumerate(statements):
        until = sent[i + 1] if i + 1 < len(sent) else ended
        rows.append({"sql": statement_head(sql), "s": round(until - t, 2), "executions": 0, "jobs": 0})
    read: list[set[int]] = [set() for _ in rows]
    for e in executions:
        i = bisect_right(sent, _epoch(str(e.get("submissionTime", "")))) - 1
        if i < 0:
            continue
        ids = [int(j) for key in ("successJobIds", "failedJobIds", "runningJobIds") for j in e.get(key, [])]
        rows[i]["executions"] += 1
        rows[i]["jobs"] += len(ids)
        read[i].update(s for j in ids for s in job_stages.get(j, []))
    for row, ran in zip(rows, read, strict=True):
        row["read_k_rows"] = round(sum(stage_rows.get(s, 0) for s in ran) / 1000, 1)
    return rows


HEAD = 90


def statement_head(sql: str) -> str:
    """A statement as the report names it: its first words, after dbt's query comment."""
    text = sent_sql(sql)
    return text if len(text) <= HEAD else text[: HEAD - 3] + "..."


def _epoch(submitted: str) -> float:
    """Seconds since the epoch of the UI's submissionTime, e.g. 2026-12-06T03:05:02.123GMT."""
    try:
        return datetime.strptime(submitted.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    except ValueError:
        return float("-inf")


SLOWEST = 8


def _slow(execution: dict[str, Any]) -> dict[str, Any]:
    """One execution as the profile keeps it. Spark's description is the call site of a
    statement dbt sent (a MERGE's is "sql"), or the operation of Delta's own queries
    ("MERGE operation - materialize source")."""
    jobs = len(execution.get("successJobIds", [])) + len(execution.get("failedJobIds", []))
    text = " ".join(str(execution.get("description", "")).split())
    return {"s": round(int(execution.get("duration", 0)) / 1000, 2), "jobs": jobs, "description": text[:160]}


@dataclass(frozen=True)
class Usage:
    executions: int
    jobs: int
    read_k_rows: float
    shuffled_mb: float
    slowest: list[dict[str, Any]]
    statements: list[dict[str, Any]]
