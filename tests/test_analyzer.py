"""The analysis macros (macros/analysis, the only implementation of the rules) on the SQL
corpus (tests/corpus/sql_cases.yml), run by the macro runtime: no Spark, no dbt,
milliseconds per case. Each case states the shape, the restriction codes, where each issue
is reported (positions) and the refresh methods the macros must give.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbt_ivm.explain.analysis import Analysis, Issue, Refresh, analyze
from tests.manifests import package_runtime, restriction

ROOT = Path(__file__).resolve().parents[1]
CASES: list[dict[str, Any]] = yaml.safe_load((ROOT / "tests/corpus/sql_cases.yml").read_text())["cases"]
DEFAULT_UPSTREAMS = ["analytics.orders", "analytics.customers", "analytics.order_lines"]


def upstreams(names: list[str], problems: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Upstreams rendered as their dotted names; problems: upstream -> declaration problem."""
    problems = problems or {}
    return [
        {
            "name": name,
            "parts": name.split("."),
            "problems": [{"code": problems[name], "fix": restriction(problems[name]).fix}]
            if name in problems
            else [],
        }
        for name in names
    ]


def analyze_sql(sql: str, names: list[str] | None = None, problems: dict[str, str] | None = None) -> Analysis:
    return analyze(package_runtime(), sql, upstreams(names or DEFAULT_UPSTREAMS, problems))


def expected_refresh(case: dict[str, Any]) -> Refresh | None:
    refresh = case.get("refresh")
    return None if refresh is None else Refresh(**refresh)


# -- corpus -----------------------------------------------------------------------------------

Position = list[Any]  # [code, line, column]; line and column are None for the whole model


def position_order(position: Position) -> tuple[int, int, str]:
    """Text order: issues of the whole model first, then by line, column and code."""
    code, line, column = position
    return (line or 0, column or 0, code)


def positions(result: Analysis) -> list[Position]:
    return sorted(([i.code, i.line, i.column] for i in result.issues), key=position_order)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_corpus_case(case: dict[str, Any]) -> None:
    result = analyze_sql(case["sql"], case.get("upstreams"), case.get("problems"))
    assert (result.shape, list(result.codes)) == (case["shape"], case["codes"]), result.issues
    assert result.refresh == expected_refresh(case)
    if "positions" in case:
        assert positions(result) == case["positions"], result.issues


def test_corpus_is_complete() -> None:
    names = [case["name"] for case in CASES]
    assert len(CASES) >= 160
    assert len(set(names)) == len(names)
    assert all(case["codes"] == sorted(set(case["codes"])) for case in CASES)
    # a refresh is stated exactly for the maintainable cases
    assert [c["name"] for c in CASES if ("refresh" in c) == bool(c["codes"])] == []
    # positions: only with codes, one per issue (so every code of the case), in text order
    located = [c for c in CASES if "positions" in c]
    assert len(located) >= 40
    assert [
        c["name"]
        for c in located
        if not c["codes"]
        or sorted({p[0] for p in c["positions"]}) != c["codes"]
        or c["positions"] != sorted(c["positions"], key=position_order)
        or any(len(p) != 3 or (p[1] is None) != (p[2] is None) for p in c["positions"])
    ] == []
    aggregates = [c for c in CASES if c["shape"].startswith("aggregate")]
    assert len(aggregates) >= 30
    refreshes = Counter((r["inserts"], r["any"]) for c in CASES if (r := c.get("refresh")))
    assert set(refreshes) == {
        ("append", "rewrite"),
        ("merge", "merge"),
        ("merge", "recompute"),
        ("recompute", "recompute"),
    }
    assert min(refreshes.values()) >= 3
    # append/rewrite is the join-only path, the others the aggregate and DISTINCT paths
    aggregate_refreshes = {(r["inserts"], r["any"]) for c in aggregates if (r := c.get("refresh"))}
    assert aggregate_refreshes == set(refreshes) - {("append", "rewrite")}
    # IVM016 and IVM017 are checked on the output columns Spark reports, at a full build (test_errors)
    catalog = package_runtime().macro("ivm_restriction_catalog")()
    codes = Counter(code for case in CASES for code in case["codes"])
    assert set(codes) == set(catalog) - {"IVM016", "IVM017"}
    assert {code: n for code, n in codes.items() if n < 2} == {}
    shapes = Counter(case["shape"] for case in CASES)
    assert set(shapes) == {"join_only", "aggregate", "aggregate_over_joins", "distinct", "keyed", "unknown"}
    assert min(shapes.values()) >= 5


def test_upstream_problem_is_reported_once_at_its_first_read() -> None:
    sql = (
        "select c.id from analytics.orders o\n"
        "join analytics.customers c on o.customer_id = c.id\n"
        "join analytics.customers d on d.id = c.id"
    )
    problems = [
        i for i in analyze_sql(sql, problems={"analytics.customers": "IVM031"}).issues if i.code == "IVM031"
    ]
    assert problems == [
        Issue("IVM031", "upstream analytics.customers", 2, 6, fix=restriction("IVM031").fix),
    ]


def test_two_upstreams_naming_one_relation_are_both_named() -> None:
    """Two sources over the same table read in one query: IVM022 names the relation and both
    (a FULL join leaves the keyed path no key, so the model is refused)."""
    ups = [
        {"name": "shop.orders", "parts": ["raw", "orders"], "problems": []},
        {"name": "shop.orders_again", "parts": ["raw", "orders"], "problems": []},
    ]
    result = analyze(
        package_runtime(), "select a.id from raw.orders a full join raw.orders b on a.id = b.parent_id", ups
    )
    assert ("IVM022", "relation raw.orders read twice (as shop.orders and shop.orders_again)") in [
        (i.code, i.construct) for i in result.issues
    ]


def test_query_reading_no_upstream_is_reported_for_the_model() -> None:
    sql = "with a as (select x from b), b as (select x from a) select x from a"
    result = analyze_sql(sql)
    assert result.shape == "join_only"
    assert result.issues == (Issue("IVM050", "no ref() or source() in FROM"),)


# -- what the analysis promises ---------------------------------------------------------------


def test_unparsable_sql_is_never_guessed() -> None:
    result = analyze_sql("select (o.id, rand() from analytics.orders o group by 1")
    assert result.shape == "unknown"
    assert [i.code for i in result.issues] == ["IVM001"]
    assert result.refresh is None


def test_maintainable_model_has_no_issues() -> None:
    result = analyze_sql(
        "select o.id from analytics.orders o join analytics.customers c on o.customer_id = c.id"
    )
    assert result.refresh is not None
    assert result.issues == ()
