"""The analysis macros (macros/analysis, the only implementation of the rules) on the SQL
corpus, run by the macro runtime: no Spark, no dbt, milliseconds per case. What the Jinja
parser reads is checked against an independent parser in tests/test_sqlglot_oracle.py.
"""

from __future__ import annotations

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


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_corpus_case(case: dict[str, Any]) -> None:
    result = analyze_sql(case["sql"], case.get("upstreams"), case.get("problems"))
    assert (result.shape, list(result.codes)) == (case["shape"], case["codes"]), result.issues
    assert result.refresh == expected_refresh(case)


def test_corpus_is_complete() -> None:
    names = [case["name"] for case in CASES]
    assert len(CASES) >= 45
    assert len(set(names)) == len(names)
    assert all(case["codes"] == sorted(set(case["codes"])) for case in CASES)
    # a refresh is stated exactly for the maintainable cases
    assert [c["name"] for c in CASES if ("refresh" in c) == bool(c["codes"])] == []
    aggregates = [c for c in CASES if c["shape"].startswith("aggregate")]
    assert len(aggregates) >= 30
    assert {(r["inserts"], r["any"]) for c in aggregates if (r := c.get("refresh"))} == {
        ("merge", "merge"),
        ("merge", "recompute"),
        ("recompute", "recompute"),
    }
    # IVM016 and IVM017 are checked on the output columns Spark reports, at a full build (test_errors)
    catalog = package_runtime().macro("ivm_restriction_catalog")()
    assert {code for case in CASES for code in case["codes"]} == set(catalog) - {"IVM016", "IVM017"}
    assert {case["shape"] for case in CASES} == {
        "join_only",
        "aggregate",
        "aggregate_over_joins",
        "distinct",
        "unknown",
    }


# -- positions ------------------------------------------------------------------------------

# (sql, code, line, column of the first issue with that code)
POSITIONS = [
    (
        "select o.id\nfrom analytics.orders o\n  left outer join analytics.customers c on o.id = c.id",
        "IVM020",
        3,
        3,
    ),
    ("select o.id from analytics.orders o ,analytics.order_lines l", "IVM021", 1, 37),
    (
        "select o.id from analytics.orders o join analytics.order_lines l on o.amount > l.price",
        "IVM021",
        1,
        37,
    ),
    ("select o.id\nfrom analytics.orders o\njoin raw.lookup k on o.kind = k.kind", "IVM002", 3, 6),
    ("select o.id, rand() as r,\n  current_date as d\nfrom analytics.orders o", "IVM010", 1, 14),
    ("select o.id,\n  current_date as d\nfrom analytics.orders o", "IVM010", 2, 3),
    ("select o.id, rank() over (order by o.id) as r from analytics.orders o", "IVM011", 1, 21),
    ("select o.id from analytics.orders o\nwhere o.id > 0\norder by 1\nlimit 5", "IVM012", 3, 1),
    ("select id from analytics.orders\nunion all\nselect id from analytics.order_lines", "IVM013", 2, 1),
    (
        "select o.id from analytics.orders o\nwhere o.id in (select order_id from analytics.order_lines)",
        "IVM014",
        2,
        15,
    ),
    (
        "select o.id from analytics.orders o left semi join analytics.order_lines l on l.order_id = o.id",
        "IVM014",
        1,
        37,
    ),
    ("select o.id, t.tag from analytics.orders o\nlateral view explode(o.tags) t as tag", "IVM015", 2, 1),
    ("select o.id from analytics.orders o\njoin analytics.orders p on o.parent_id = p.id", "IVM022", 2, 6),
    (
        "with t as (\n  select customer_id, count(*) as n from analytics.orders\n  group by customer_id\n)\n"
        "select * from t",
        "IVM040",
        3,
        3,
    ),
    ("with d as (\n  select distinct customer_id from analytics.orders\n)\nselect * from d", "IVM040", 2, 10),
    ("with m as (select id,\n max(amount) as a from analytics.orders)\nselect * from m", "IVM040", 2, 2),
    ("select o.status,\n  o.*, count(*) as n\nfrom analytics.orders o\ngroup by o.status", "IVM041", 2, 3),
    (
        "select o.status,\n  upper(o.status) || count(*) as n\nfrom analytics.orders o group by 1",
        "IVM042",
        2,
        3,
    ),
    ("select distinct o.status, count(*) as n\nfrom analytics.orders o group by 1", "IVM043", 1, 8),
    ("select o.status, count(*) as n\nfrom analytics.orders o\ngroup by all", "IVM044", 3, 10),
    (
        "select o.a, o.b, count(*) as n\nfrom analytics.orders o\ngroup by o.a, o.b with rollup",
        "IVM044",
        3,
        19,
    ),
    ("select o.a, count(*) as n\nfrom analytics.orders o\ngroup by grouping sets ((o.a))", "IVM044", 3, 10),
    (
        "select count(*) as n,\n  collect_list(o.id) as ids\nfrom analytics.orders o\nhaving n > 1",
        "IVM045",
        2,
        3,
    ),
    ("select count(*) as n\nfrom analytics.orders o\nhaving count(*) > 1", "IVM045", 3, 1),
    ("with c as (select 1 as one)\nselect one from c", "IVM050", 1, 12),
]


@pytest.mark.parametrize(("sql", "code", "line", "column"), POSITIONS)
def test_position(sql: str, code: str, line: int, column: int) -> None:
    issue = next(i for i in analyze_sql(sql).issues if i.code == code)
    assert (issue.line, issue.column) == (line, column), issue


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
    """Two sources over the same table read in one query: IVM022 names the relation and both."""
    ups = [
        {"name": "shop.orders", "parts": ["raw", "orders"], "problems": []},
        {"name": "shop.orders_again", "parts": ["raw", "orders"], "problems": []},
    ]
    result = analyze(
        package_runtime(), "select a.id from raw.orders a join raw.orders b on a.id = b.parent_id", ups
    )
    assert [(i.code, i.construct) for i in result.issues] == [
        ("IVM022", "relation raw.orders read twice (as shop.orders and shop.orders_again)")
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
