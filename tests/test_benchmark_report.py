"""The benchmark report's crossover: the first measured change size where the rebuild is at
least as fast as the refresh (pure Python, no Spark)."""

from __future__ import annotations

import pytest

from dbt_ivm.benchmark.report import crossover
from dbt_ivm.benchmark.results import Point, Sample, points


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
