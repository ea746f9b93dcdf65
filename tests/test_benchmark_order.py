"""The benchmark's refresh and rebuild take turns in running first after a batch (the first
reads colder files). Checked on `_measure_point` with a stand-in project, without Spark."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest

from dbt_ivm.benchmark.config import BenchConfig
from dbt_ivm.benchmark.progress import Progress
from dbt_ivm.benchmark.project import RunOutcome
from dbt_ivm.benchmark.results import Sample
from dbt_ivm.benchmark.runner import _measure_point
from dbt_ivm.benchmark.workloads import WORKLOADS


class RecordingProject:
    """Records the models `dbt run` was asked for; every run succeeds as a no-op."""

    def __init__(self, failing: str | None = None) -> None:
        self.spark = SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl=None))
        self.runs: list[str] = []
        self.failing = failing

    def run(self, model: str, *args: Any) -> RunOutcome:
        self.runs.append(model)
        return RunOutcome(1.0, None, "boom" if model == self.failing else None, noop=True)


def measured(rep: int, failing: str | None = None) -> tuple[list[str], Sample, str]:
    workload = WORKLOADS["w1"]
    project = RecordingProject(failing)
    sample = Sample(workload.name, "uniform", "mixed", 0.01, rep, {})
    printed = io.StringIO()
    _measure_point(project, workload, BenchConfig(check=False), Progress(printed), sample)  # type: ignore[arg-type]
    return project.runs, sample, printed.getvalue()


@pytest.mark.parametrize(("rep", "first"), [(1, "ivm"), (2, "table"), (3, "ivm")])
def test_odd_repetitions_refresh_first_even_ones_rebuild_first(rep: int, first: str) -> None:
    runs, sample, printed = measured(rep)
    workload = WORKLOADS["w1"]
    order = [workload.ivm_model, workload.table_model]
    assert runs == (order if first == "ivm" else order[::-1])
    assert sample.refresh_s == sample.rebuild_s == 1.0 and sample.errors == []
    assert "rebuild 1.0 s, x1.0" in printed


@pytest.mark.parametrize("rep", [1, 2])
def test_a_failed_rebuild_is_recorded_whichever_ran_first(rep: int) -> None:
    _, sample, printed = measured(rep, failing=WORKLOADS["w1"].table_model)
    assert sample.errors == ["rebuild failed: boom"]
    # no speed-up is printed against a failed rebuild
    assert "rebuild 1.0 s, -," in printed
