"""sqlglot as the oracle of the Jinja parser: every corpus case the macros accept (a
maintainable model, whose reading decides how its table is maintained) is parsed again by
sqlglot's Spark dialect, an independent parser, and the structure must agree: the upstream
relations read, the join kinds, the join equalities, the GROUP BY keys and the aggregate
calls of the main query. Rejected cases are left out: the macros stop reading at the first
construct they refuse. No Spark, no dbt.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, NamedTuple

import pytest
import sqlglot
from sqlglot import exp

from tests.manifests import package_runtime
from tests.test_analyzer import CASES, DEFAULT_UPSTREAMS, upstreams

# aggregates compared by name; others (collect_set, percentile, ...) are named differently by sqlglot
COMPARED_AGGREGATES = {"count", "sum", "avg", "min", "max"}


class Reading(NamedTuple):
    """What one parser reads of a query, as plain values."""

    relations: Counter[str]
    joins: Counter[str]
    equalities: set[frozenset[str]]
    groups: list[str]
    calls: set[tuple[str, bool]]


def readings(case: dict[str, Any]) -> tuple[Reading, Reading] | None:
    """(macros' reading, sqlglot's reading), or None when either parser refuses the SQL."""
    names = case.get("upstreams") or DEFAULT_UPSTREAMS
    result = package_runtime().macro("ivm_analyze")(case["sql"], upstreams(names, case.get("problems")))
    if result["issues"]:
        return None
    try:
        tree = sqlglot.parse_one(case["sql"], read="spark")
    except sqlglot.errors.ParseError:
        return None
    if not isinstance(tree, exp.Select):
        return None
    return macro_reading(result, names), sqlglot_reading(tree)


def macro_reading(result: dict[str, Any], names: list[str]) -> Reading:
    parsed = result["parsed"]
    tk = parsed["tk"]

    def text(start: int, end: int, sep: str = "") -> str:
        return sep.join(tk["tokens"][tk["significant"][p]]["lower"] for p in range(start, end))

    joins: Counter[str] = Counter()
    equalities: set[frozenset[str]] = set()
    for block in parsed["blocks"]:
        for item in block["from_items"]:
            if item["join"] != "from":
                joins[join_kind(item["join"])] += 1
            if item.get("on") and not item.get("using"):
                equalities |= conjunct_equalities(text(*item["on"], sep=" "))
    aggregation = result.get("aggregation") or {}
    groups = [normalized(text(*g)) for g in aggregation.get("group_exprs", [])]
    calls = {
        (c["name"], c["distinct"]) for c in aggregation.get("calls", []) if c["name"] in COMPARED_AGGREGATES
    }
    relations = Counter(names[r["upstream"]].lower() for r in parsed["rels"])
    return Reading(relations, joins, equalities, groups, calls)


def conjunct_equalities(condition: str) -> set[frozenset[str]]:
    """The ON condition the Jinja parser delimited, as column pairs; a conjunct that is not
    a plain equality of two columns is left out, as on sqlglot's side."""
    sql = sqlglot.parse_one(f"select 1 where {condition}", read="spark")
    return equalities_of(sql.args["where"].this)


def equalities_of(condition: exp.Expression) -> set[frozenset[str]]:
    pairs = set()
    for conjunct in condition.flatten() if isinstance(condition, exp.And) else [condition]:
        if isinstance(conjunct, exp.EQ) and all(
            isinstance(side, exp.Column) for side in conjunct.args.values()
        ):
            pairs.add(
                frozenset(
                    side.sql(dialect="spark").lower().replace("`", "") for side in conjunct.args.values()
                )
            )
    return pairs


def sqlglot_reading(tree: exp.Select) -> Reading:
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    relations = Counter(
        ".".join(part for part in (table.catalog, table.db, table.name) if part).lower()
        for table in tree.find_all(exp.Table)
        if not (not table.db and table.name.lower() in ctes) and table.find_ancestor(exp.Hint) is None
    )
    joins: Counter[str] = Counter()
    equalities: set[frozenset[str]] = set()
    for join in tree.find_all(exp.Join):
        words = [str(join.args.get(k) or "").lower() for k in ("method", "side", "kind")]
        joins[join_kind(" ".join(w for w in words if w))] += 1
        if join.args.get("on") is not None:
            equalities |= equalities_of(join.args["on"])
    group = tree.args.get("group")
    groups = [
        # GROUP BY 2: the Jinja parser reads the select item it names
        normalized((tree.expressions[int(g.name) - 1].unalias() if g.is_int else g).sql(dialect="spark"))
        for g in (group.expressions if group else [])
    ]
    # the select list's aggregate calls (HAVING's are checked apart by the macros)
    calls = {
        (agg.key.lower(), isinstance(agg.this, exp.Distinct))
        for item in tree.expressions
        for agg in item.find_all(exp.AggFunc)
        if agg.find_ancestor(exp.Window, exp.Subquery) is None and agg.key.lower() in COMPARED_AGGREGATES
    }
    return Reading(relations, joins, equalities, groups, calls)


def join_kind(words: str) -> str:
    """A join's kind in one vocabulary for both parsers: a comma is a cross join, OUTER is
    implied by the side, a bare JOIN is inner."""
    kept = [w for w in words.split() if w != "outer"]
    if not kept or kept == ["comma"]:
        return "cross" if kept else "inner"
    return " ".join(kept)


def normalized(expression: str) -> str:
    """An expression's text without spaces and backticks, lower case."""
    return expression.lower().replace(" ", "").replace("`", "")


# each case is read once, at collection
READINGS = {case["name"]: readings(case) for case in CASES}
COMPARED = [case for case in CASES if READINGS[case["name"]] is not None]


@pytest.mark.parametrize("case", COMPARED, ids=[case["name"] for case in COMPARED])
def test_jinja_parser_agrees_with_sqlglot(case: dict[str, Any]) -> None:
    pair = READINGS[case["name"]]
    assert pair is not None
    macros, oracle = pair
    for facet in Reading._fields:
        assert getattr(macros, facet) == getattr(oracle, facet), (facet, macros, oracle)


def test_every_accepted_case_is_compared() -> None:
    # a top-level UNION (the keyed path) has no single select list to compare
    accepted = [
        case["name"]
        for case in CASES
        if not case["codes"] and not isinstance(sqlglot.parse_one(case["sql"], read="spark"), exp.Union)
    ]
    assert [case["name"] for case in COMPARED] == accepted
    assert len(accepted) >= 60
