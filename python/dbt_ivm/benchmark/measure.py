"""Measuring one model: a timed `dbt run`, what the refresh log says it did, and the
correctness check (table == definition)."""

from __future__ import annotations

from typing import Any

from dbt_ivm.benchmark.profile import SparkProfile
from dbt_ivm.benchmark.project import BenchProject, RunOutcome
from dbt_ivm.benchmark.results import Sample

# the fields of a sample read from the refresh log row of its refresh
LOGGED = ("path", "reason", "refresh_log_s", "change_rows", "rows_deleted", "rows_inserted", "phase_s")


def refresh_entry(project: BenchProject, model: str) -> dict[str, Any]:
    """The fields of the latest refresh-log row the report uses (phase_s when logged)."""
    row = project.last_refresh(model) or {}
    phases = row.get("phase_s")
    return {
        "path": row.get("path"),
        "reason": row.get("reason"),
        "status": row.get("status"),
        "refresh_log_s": row.get("duration_s"),
        "change_rows": dict(row["change_rows"]) if row.get("change_rows") else None,
        "rows_deleted": row.get("rows_deleted"),
        "rows_inserted": row.get("rows_inserted"),
        "phase_s": {k: float(v) for k, v in phases.items() if v is not None} if phases else None,
    }


def check(
    project: BenchProject, model: str, method: str = "exact"
) -> tuple[str, list[int] | None, str | None]:
    """('pass' | 'fail' | 'not run', numbers, error). exact: numbers are [rows only in the
    table, rows only in the definition]; fingerprint: [table rows, definition rows]."""
    try:
        if method == "fingerprint":
            table, definition = project.fingerprints(model)
            return ("pass" if table == definition else "fail"), [table[0], definition[0]], None
        only_table, only_definition = project.differences(model)
    except Exception as error:  # a missing table or view is a failed check, reported
        return "not run", None, f"check failed to run: {first_line(str(error))}"
    verdict = "pass" if only_table == only_definition == 0 else "fail"
    return verdict, [only_table, only_definition], None


def timed_run(
    project: BenchProject, model: str, profile: SparkProfile | None
) -> tuple[RunOutcome, dict[str, Any] | None]:
    """`dbt run --select model`, and what Spark did for it when the session's UI is on."""
    start = profile.mark() if profile else None
    outcome = project.run(model)
    return outcome, (profile.since(start, outcome.statements) if profile and start else None)


def measure_refresh(
    project: BenchProject,
    model: str,
    sample: Sample,
    with_check: bool,
    method: str = "exact",
    profile: SparkProfile | None = None,
) -> bool:
    """Run the ivm refresh into `sample`; True when it succeeded and (if checked) is correct."""
    outcome, sample.refresh_profile = timed_run(project, model, profile)
    sample.refresh_s = outcome.wall_s
    if outcome.error:
        sample.errors.append(f"refresh failed: {first_line(outcome.error)}")
        sample.check = "not run"
        return False
    if outcome.noop:
        # nothing changed: no refresh log row to read
        sample.path, sample.reason = "no-op", "no upstream changes"
    else:
        entry = refresh_entry(project, model)
        for key in LOGGED:
            setattr(sample, key, entry[key])
    if not with_check:
        return True
    sample.check, sample.differences, error = check(project, model, method)
    if error:
        sample.errors.append(error)
    return sample.check == "pass"


def first_line(text: str, limit: int = 300) -> str:
    """The most telling line of an error: an IVM restriction code if any, else the first."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    coded = [line for line in lines if line.startswith("IVM")]
    line = coded[0] if coded else (lines[0] if lines else "unknown error")
    return line if len(line) <= limit else line[: limit - 3] + "..."
