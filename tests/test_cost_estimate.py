"""The parquet cost estimate (`_ivm_parquet_cost`): a refresh that would read and write more
rows than a rebuild rebuilds instead. Evaluated on the package's macro, without Spark; the
refresh-log side is in tests/test_join_refresh.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.manifests import package_runtime

# W3 at TPC-H SF 1, in thousands of rows: lineitem x orders, the table as large as lineitem
SIZES = {"lineitem": 6000, "orders": 1500, ".": 6000}
PLAN = [{"up": {"name": "lineitem"}}, {"up": {"name": "orders"}}]


def estimate(
    changed: dict[str, int],
    *,
    spec: dict[str, Any] | None = None,
    rewrite: bool = True,
    partitioned: bool = False,
    sizes: dict[str, int] = SIZES,
) -> str | None:
    return package_runtime().macro("_ivm_parquet_cost")(PLAN, changed, sizes, spec, rewrite, partitioned)


def test_a_rewrite_of_the_whole_table_with_two_join_terms_rebuilds() -> None:
    assert estimate({"lineitem": 6, "orders": 2}) == (
        "cost estimate on parquet: the refresh would read and write about 19500 rows (7500 upstream rows "
        "read by the delta terms, 12000 for rewriting the 6000-row table), a rebuild about 13500 "
        "(7500 upstream rows read once, 6000 written): rebuilding is cheaper"
    )


@pytest.mark.parametrize(
    ("changed", "rewrite", "partitioned"),
    [
        ({"lineitem": 6, "orders": 2}, False, False),  # insert-only: appended, nothing rewritten
        ({"lineitem": 6}, True, False),  # one term reads orders only: 1500 + 12000 <= 13500
        ({"lineitem": 6, "orders": 2}, True, True),  # partitions: the rewrite is not counted
        ({"lineitem": 0, "orders": 0}, True, False),  # changes that cancel out read nothing
    ],
)
def test_cheaper_refreshes_stay_incremental(
    changed: dict[str, int], rewrite: bool, partitioned: bool
) -> None:
    assert estimate(changed, rewrite=rewrite, partitioned=partitioned) is None


def test_an_aggregate_over_one_upstream_rewrites_only_its_groups() -> None:
    assert estimate({"lineitem": 6000}, sizes={"lineitem": 6000, "orders": 0, ".": 4}) is None


def test_the_keyed_recompute_reads_every_upstream_once_more() -> None:
    # customers mart: one changed order joins lineitem (6000) and the recompute reads both
    sizes = {"lineitem": 6000, "orders": 1500, ".": 150}
    reason = estimate({"orders": 1}, spec={"kind": "keyed"}, sizes=sizes)
    assert reason is not None and "about 13800 rows" in reason and "a rebuild about 7650" in reason
