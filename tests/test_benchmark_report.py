"""The benchmark report (pure Python, no Spark): the crossover, the first measured change size
where the rebuild is at least as fast as the refresh; and a refresh's cost per statement, from
the statements dbt sent and what the Spark UI recorded meanwhile."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from dbt_ivm.benchmark.profile import by_statement
from dbt_ivm.benchmark.report import crossover, markdown
from dbt_ivm.benchmark.results import BenchResult, Point, Sample, points


def measured(*timings: tuple[float, float | None, float]) -> list[Point]:
    """(fraction, refresh s, rebuild s) per size, one repetition each."""
    samples = []
    for fraction, refresh, rebuild in timings:
        sample = Sample("w3p", "recent", "mixed", fraction, 1, {})
        sample.refresh_s, sample.rebuild_s = refresh, rebuild
        samples.append(sample)
    return points(samples)


@pytest.mark.parametrize(
    ("timings", "expected"),
    [
        (
            [(0.001, 2.0, 10.0), (0.1, 12.0, 10.0), (0.01, 5.0, 10.0)],
            "between 1% and 10% (0.1% 5.0x, 1% 2.0x, 10% 0.8x)",
        ),
        (
            [(0.001, 2.0, 10.0), (0.01, 4.0, 10.0)],
            "refresh faster at every measured size (0.1% 5.0x, 1% 2.5x)",
        ),
        (
            [(0.001, 10.0, 10.0), (0.01, 20.0, 10.0)],
            "rebuild at least as fast from the smallest size on (0.1% 1.0x, 1% 0.5x)",
        ),
        # sizes below 0.01% keep their digits
        (
            [(0.00001, 1.0, 10.0), (0.0001, 2.0, 10.0)],
            "refresh faster at every measured size (0.001% 10.0x, 0.01% 5.0x)",
        ),
        ([(0.001, None, 10.0)], "not measured"),
    ],
)
def test_crossover(timings: list[tuple[float, float | None, float]], expected: str) -> None:
    assert crossover(measured(*timings)) == expected


def submitted(epoch: float) -> str:
    """An epoch time as the Spark UI's REST API writes submissionTime."""
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "GMT"


# two statements, sent at 100.0 and 101.0; the run's profile was read at 104.5
SENT = [
    (100.0, '/* {"app": "dbt"} */\n  describe history   raw.orders limit 10'),
    (101.0, "merge into t using (select `k` from s) on k = 1 when matched then delete"),
]
EXECUTIONS = [
    {"id": 7, "submissionTime": submitted(99.5), "successJobIds": [0]},  # before the first: not counted
    {"id": 8, "submissionTime": submitted(100.2), "successJobIds": [1]},
    {"id": 9, "submissionTime": submitted(101.1), "successJobIds": [2, 3]},
    {"id": 10, "submissionTime": submitted(101.5), "successJobIds": [4], "failedJobIds": []},
    {"id": 11, "submissionTime": "not a time", "successJobIds": [5]},
]
JOBS = [
    {"jobId": 0, "stageIds": [9]},
    {"jobId": 1, "stageIds": [10]},
    {"jobId": 2, "stageIds": [11, 12]},
    {"jobId": 3, "stageIds": [12, 13]},  # stage 12 reused: its rows count once
    {"jobId": 4, "stageIds": [14]},
    {"jobId": 5, "stageIds": [15]},
]
STAGES = [
    {"stageId": 9, "inputRecords": 99},
    {"stageId": 10, "inputRecords": 500},
    {"stageId": 11, "inputRecords": 1000},
    {"stageId": 12, "inputRecords": 2000},
    {"stageId": 12, "inputRecords": 0},  # a second attempt
    {"stageId": 13, "inputRecords": 0},
    {"stageId": 14, "inputRecords": 1500},
    {"stageId": 15, "inputRecords": 7},
]


def test_each_execution_is_charged_to_the_statement_sent_before_it() -> None:
    assert by_statement(SENT, EXECUTIONS, JOBS, STAGES, 104.5) == [
        {
            "sql": "describe history raw.orders limit 10",
            "s": 1.0,
            "executions": 1,
            "jobs": 1,
            "read_k_rows": 0.5,
        },
        {
            "sql": "merge into t using (select `k` from s) on k = 1 when matched then delete",
            "s": 3.5,
            "executions": 2,
            "jobs": 3,
            "read_k_rows": 4.5,
        },
    ]


def test_the_report_lists_the_median_refresh_statement_by_statement() -> None:
    samples = []
    for rep, seconds in enumerate((9.0, 3.0, 5.0), start=1):
        sample = Sample("w1", "uniform", "mixed", 0.0001, rep, {})
        sample.refresh_s, sample.rebuild_s, sample.path = seconds, 20.0, "incremental"
        rows = by_statement([(100.0, f"select {rep} | x"), *SENT[1:]], EXECUTIONS, JOBS, STAGES, 104.5)
        usage = {"executions": 3, "jobs": 4, "read_k_rows": 5, "shuffled_mb": 0}
        sample.refresh_profile = {**usage, "statements": rows}
        samples.append(sample)
    report = markdown(BenchResult({"sf": 1, "seed": 5, "reps": 3}, {}, samples=samples))
    section = report[report.index("## Statements of a refresh") :]
    # the median of 3.0, 5.0 and 9.0 s: the third repetition; SQL without backticks, pipes escaped
    assert "### w1, uniform mixed 0.01%, repetition 3: refresh 5.00 s (incremental)" in section
    assert "| 1 | select 3 \\| x | 1.00 | 1 | 1 | 0.5 |" in section
    merge = "merge into t using (select k from s) on k = 1 when matched then delete"
    assert f"| 2 | {merge} | 3.50 | 2 | 3 | 4.5 |" in section
