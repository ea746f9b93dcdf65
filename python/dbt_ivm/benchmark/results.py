"""What the benchmark measures: one sample per (workload, batch, repetition), the fixed
cost runs, and the medians the report shows."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


def percent(fraction: float) -> str:
    """A change size as the benchmark prints it everywhere (0.001% stays 0.001%)."""
    return f"{fraction * 100:g}%"


PHASES: tuple[str, ...] = ("changes", "delta", "apply", "bookkeeping")


@dataclass
class Sample:
    """One refresh of an ivm model after one batch, and one rebuild of its table twin."""

    workload: str
    locality: str
    kind: str
    fraction: float
    rep: int
    batch_rows: dict[str, int]  # change-log rows written per upstream table
    refresh_s: float | None = None  # wall time of `dbt run --select <w>_ivm`
    refresh_log_s: float | None = None  # the refresh's own duration (refresh log)
    phase_s: dict[str, float] | None = None  # refresh split, when the refresh log has it
    path: str | None = None
    reason: str | None = None
    change_rows: dict[str, int] | None = None  # netted changed rows read per upstream
    rows_deleted: int | None = None
    rows_inserted: int | None = None
    check: str = "off"  # pass / fail / off / not run
    differences: list[int] | None = None  # rows only in table, only in definition
    rebuild_s: float | None = None  # wall time of `dbt run --select <w>_table`
    # Spark's SQL executions, jobs, rows read, MB shuffled and slowest executions of each
    # (when the UI is on)
    refresh_profile: dict[str, Any] | None = None
    rebuild_profile: dict[str, Any] | None = None
    hand_s: float | None = None  # wall time of the hand-written incremental twin (Delta, W3)
    hand_wrong: dict[str, int] | None = None  # its rows extra / missing / stale, so far
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and self.check in ("pass", "off")


@dataclass
class FixedCost:
    """Wall time of `dbt run` of a no-op ivm refresh per model, of a plain view model, and of
    an incremental refresh of a 100-row ivm model with one changed upstream row."""

    view_s: list[float] = field(default_factory=list)
    noop_s: dict[str, list[float]] = field(default_factory=dict)
    noop_paths: dict[str, list[str]] = field(default_factory=dict)
    small_s: list[float] = field(default_factory=list)
    small_paths: list[str] = field(default_factory=list)


@dataclass
class CatchUp:
    """A refresh that applies every batch its model was not measured on, then a check."""

    workload: str
    batches: int
    refresh_s: float | None
    path: str | None
    check: str
    differences: list[int] | None
    errors: list[str] = field(default_factory=list)


@dataclass
class BenchResult:
    config: dict[str, Any]
    environment: dict[str, Any]
    base_rows: dict[str, int] = field(default_factory=dict)
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)
    fixed_cost: FixedCost = field(default_factory=FixedCost)
    samples: list[Sample] = field(default_factory=list)
    catch_up: list[CatchUp] = field(default_factory=list)
    duration_s: float | None = None
    finished: bool = False

    def checks(self) -> list[str]:
        """Every correctness verdict: initial builds, samples, catch-ups."""
        verdicts = [b["check"] for b in self.builds.values()]
        return verdicts + [s.check for s in self.samples] + [c.check for c in self.catch_up]

    def errors(self) -> list[str]:
        found = [f"build {name}: {b['error']}" for name, b in self.builds.items() if b.get("error")]
        for s in self.samples:
            found += [
                f"{s.workload} {s.locality} {s.kind} {percent(s.fraction)} rep {s.rep}: {e}" for e in s.errors
            ]
        for c in self.catch_up:
            found += [f"{c.workload} catch-up: {e}" for e in c.errors]
        return found


def median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


@dataclass(frozen=True)
class Point:
    """The median over the repetitions of one (workload, locality, kind, fraction)."""

    workload: str
    locality: str
    kind: str
    fraction: float
    samples: tuple[Sample, ...]

    def med(self, attribute: str) -> float | None:
        return median(getattr(s, attribute) for s in self.samples)

    @property
    def ratio(self) -> float | None:
        refresh, rebuild = self.med("refresh_s"), self.med("rebuild_s")
        return rebuild / refresh if refresh and rebuild else None

    def phase(self, name: str) -> float | None:
        return median((s.phase_s or {}).get(name) for s in self.samples)

    def batch_rows(self, table: str) -> float | None:
        return median(s.batch_rows.get(table) for s in self.samples)

    @property
    def paths(self) -> str:
        return ",".join(sorted({s.path or "-" for s in self.samples}))

    @property
    def check(self) -> str:
        verdicts = {s.check for s in self.samples}
        return verdicts.pop() if len(verdicts) == 1 else "/".join(sorted(verdicts))


def points(samples: Iterable[Sample]) -> list[Point]:
    groups: dict[tuple[str, str, str, float], list[Sample]] = {}
    for s in samples:
        groups.setdefault((s.workload, s.locality, s.kind, s.fraction), []).append(s)
    return [Point(*key, tuple(group)) for key, group in groups.items()]
