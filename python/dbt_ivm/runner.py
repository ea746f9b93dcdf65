"""Run dbt in this process (dbtRunner), so it shares the embedded Spark session."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dbt.cli.main import dbtRunner, dbtRunnerResult
from dbt_common.events.base_types import EventMsg


class DbtCommandError(RuntimeError):
    """A dbt command failed; the message holds dbt's own error text."""


@dataclass(frozen=True)
class DbtProject:
    project_dir: Path
    profiles_dir: Path

    def invoke(
        self, *args: str, check: bool = True, callbacks: Sequence[Callable[[EventMsg], None]] = ()
    ) -> dbtRunnerResult:
        argv = [
            *args,
            "--project-dir",
            str(self.project_dir),
            "--profiles-dir",
            str(self.profiles_dir),
        ]
        result = dbtRunner(callbacks=list(callbacks)).invoke(argv)
        if check and not result.success:
            raise DbtCommandError(f"dbt {' '.join(args)} failed: {failure_text(result)}")
        return result


def failure_text(result: dbtRunnerResult) -> str:
    """The error messages of a failed dbt invocation, one per failed node."""
    if result.exception is not None:
        return str(result.exception)
    messages = []
    for node_result in getattr(result.result, "results", []) or []:
        if str(node_result.status) in ("error", "fail", "runtime error"):
            messages.append(f"{node_result.node.name}: {node_result.message}")
    return "\n".join(messages) or "unknown failure"


def sent_sql(sql: str) -> str:
    """A statement as dbt sent it (an SQLQuery event's sql), without dbt's leading query
    comment and with its whitespace collapsed."""
    text = sql.strip()
    if text.startswith("/*") and "*/" in text:
        text = text.split("*/", 1)[1]
    return " ".join(text.split())
