"""Classify a compiled model the way the run-time Jinja analyzer does (ivm_analyze in
macros/analysis/classify.sql): the same shape and the same restriction codes, reported
at the same tokens. The SQL is read with sqlglot's Spark dialect; the rules are in
blocks.py (query blocks, FROM, joins), conditions.py (join equalities), functions.py
(function calls) and aggregates.py (aggregates and DISTINCT), positions in tokens.py.

Known differences from the Jinja side, all on SQL that Spark rejects or that no model
should contain:
- SQL sqlglot cannot parse is IVM001 with shape "unknown" and nothing else, where the
  Jinja parser may read part of it (a clause given twice). IVM001 positions are not
  promised to match.
- The Jinja tokenizer takes an unqualified clause keyword for a clause wherever it stands
  at a block's depth, even as a name (a column called `window`). So the GROUP of
  `percentile_cont(...) WITHIN GROUP (ORDER BY x)` is its GROUP BY (both sides follow
  that), and a real GROUP BY after it ends the Jinja FROM clause: IVM001 there only.
- A set operation whose first branch has no FROM but has WHERE, GROUP BY or HAVING: the
  Jinja FROM clause then runs into the WHERE of the branch that has the FROM.
- Join conditions: an AND inside a CASE at the top level splits conjuncts on the Jinja side
  only; sqlglot adds parentheses of its own in `a = b IS TRUE`; a cast to a type missing
  from ivm_non_column_words counts as a column on the Jinja side only.
- A subquery none of whose tokens sqlglot locates (`(select current_date)`) is reported
  without position.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot.errors import ParseError, TokenError

from dbt_ivm.analysis.aggregates import MainQuery, aggregate_rules
from dbt_ivm.analysis.blocks import Rel, parse_query
from dbt_ivm.analysis.functions import scan_functions
from dbt_ivm.analysis.model import Analysis, Issue, Refresh, Shape, Upstream
from dbt_ivm.analysis.tokens import TokenIndex


def analyze(sql: str, upstreams: Sequence[Upstream]) -> Analysis:
    try:
        tree = sqlglot.parse_one(sql, read="spark")
        index = TokenIndex.build(sql)
    except (ParseError, TokenError) as error:
        # never guess what unparsable SQL means
        return Analysis("unknown", (Issue("IVM001", f"unparsable SQL ({_describe(error)})"),))
    parsed = parse_query(tree, index, upstreams)
    scan = scan_functions(tree, index)
    issues = [*parsed.issues, *scan.issues]

    first_reads: dict[int, Rel] = {}
    for rel in parsed.rels:
        if rel.upstream in first_reads:
            issues.append(Issue("IVM022", _read_twice(upstreams, rel.upstream), *index.position(rel.index)))
        first_reads.setdefault(rel.upstream, rel)
    if not parsed.rels and not issues:
        issues.append(Issue("IVM050", "no ref() or source() in FROM"))
    for upstream, rel in first_reads.items():
        declared = upstreams[upstream]
        issues += [
            Issue(code, f"upstream {declared.name}", *index.position(rel.index), fix=fix)
            for code, fix in declared.problems
        ]

    main = aggregate_rules(parsed.blocks, index)
    issues += main.issues
    shape: Shape
    if main.aggregate:
        shape = "aggregate" if len(first_reads) <= 1 else "aggregate_over_joins"
    elif main.distinct:
        shape = "distinct"
    elif parsed.blocks and all(b.ok for b in parsed.blocks):
        shape = "join_only"
    else:
        shape = "unknown"
    return Analysis(shape, tuple(issues), None if issues else _refresh(shape, main))


def _refresh(shape: Shape, main: MainQuery) -> Refresh | None:
    if shape == "join_only":
        return Refresh(inserts="append", any="rewrite")
    if shape == "distinct":
        return Refresh(inserts="merge", any="merge")
    if shape == "unknown":
        return None
    if main.having or "recompute" in main.kinds:
        return Refresh(inserts="recompute", any="recompute")
    if "extremum" in main.kinds:
        return Refresh(inserts="merge", any="recompute")
    return Refresh(inserts="merge", any="merge")


def _describe(error: ParseError | TokenError) -> str:
    details = error.errors[0] if isinstance(error, ParseError) and error.errors else None
    if details is None:
        return str(error).splitlines()[0]
    return f"{details['description']} near line {details['line']}, column {details['col']}"


def _read_twice(upstreams: Sequence[Upstream], upstream: int) -> str:
    """The construct of IVM022: the upstream, or every upstream naming the same relation."""
    parts = upstreams[upstream].parts
    names = [u.name for u in upstreams if u.parts == parts]
    if len(names) == 1:
        return f"upstream {names[0]} read twice"
    return f"relation {'.'.join(parts)} read twice (as {' and '.join(names)})"
