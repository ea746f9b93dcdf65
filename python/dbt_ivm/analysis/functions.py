"""Function calls anywhere in the query (ivm_scan_functions on the Jinja side): window
functions, non-deterministic functions and generators (aggregates: aggregates.py).

Names are matched as written. sqlglot records the name token of most calls; calls it
parses with a dedicated parser (CAST, ANY, MAX_BY, PERCENTILE, STRING_AGG, ...) carry no
position, so their name is the word in front of the innermost call parentheses holding
their arguments. Each name token counts once, as on the Jinja side.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sqlglot import exp

from dbt_ivm.analysis.model import Issue
from dbt_ivm.analysis.tokens import TokenIndex
from dbt_ivm.analysis.vocabulary import BARE_NONDETERMINISTIC, GENERATORS, NONDETERMINISTIC


@dataclass(frozen=True)
class Call:
    name: str
    index: int  # the name token


@dataclass(frozen=True)
class FunctionScan:
    issues: tuple[Issue, ...]


def scan_functions(root: exp.Expr, index: TokenIndex) -> FunctionScan:
    calls, call_of = _calls(root, index)
    found: list[tuple[int | None, str, str]] = []  # (token, code, construct)
    for call in calls:
        if call.name in NONDETERMINISTIC:
            found.append((call.index, "IVM010", f"{call.name}()"))
        elif call.name in GENERATORS:
            found.append((call.index, "IVM015", f"{call.name}()"))
    found += [(i, "IVM010", f"{name}()") for name, i in _bare_nondeterministic(root, index)]
    found += [(i, "IVM011", "window function (OVER)") for i in _overs(root, index, call_of)]
    found.sort(key=lambda f: (f[0] is None, f[0] or 0))
    issues = tuple(Issue(code, construct, *index.position(i)) for i, code, construct in found)
    return FunctionScan(issues)


def _calls(root: exp.Expr, index: TokenIndex) -> tuple[list[Call], dict[int, int]]:
    """Every function call with its name token; also the name token of each call node (by id)."""
    call_of: dict[int, int] = {}
    # children first: a located inner call helps to place an unlocated outer one
    for node in reversed(list(root.walk(bfs=True))):
        if not isinstance(node, (exp.Func, exp.SubqueryPredicate)):  # ANY(...) is a predicate
            continue
        if "start" in node.meta:
            name = index.index_at(node.meta["start"])
        else:
            inner = [call_of[id(n)] for n in node.walk() if id(n) in call_of]
            name = index.call_name([*index.anchors(node), *inner])
        if name is not None and index.is_call(name):
            call_of[id(node)] = name
    tokens = sorted(set(call_of.values()))
    return [Call(index.word(i), i) for i in tokens], call_of


def _bare_nondeterministic(root: exp.Expr, index: TokenIndex) -> list[tuple[str, int | None]]:
    """current_date, current_timestamp and localtimestamp written without parentheses."""
    columns = [
        (node.name.lower(), index.first_anchor(node.this))
        for node in root.find_all(exp.Column)
        if not node.table and not node.this.quoted and node.name.lower() in BARE_NONDETERMINISTIC
    ]
    # sqlglot keeps no position for the keyword forms: pair them with the bare words left
    keywords = Counter(
        node.sql_name().lower()
        for node in root.find_all(exp.Func)
        if "start" not in node.meta
        and not list(node.iter_expressions())
        and node.sql_name().lower() in BARE_NONDETERMINISTIC
    )
    taken = {i for _, i in columns}
    found: list[tuple[str, int | None]] = list(columns)
    for name, count in keywords.items():
        words = [i for i in index.bare_words(name) if i not in taken]
        found += [(name, i) for i in words] if len(words) == count else [(name, None)] * count
    return found


def _overs(root: exp.Expr, index: TokenIndex, call_of: dict[int, int]) -> list[int | None]:
    """The OVER of every window function (window definitions of a WINDOW clause have none)."""
    overs: list[int | None] = []
    for window in root.find_all(exp.Window):
        if not window.args.get("over"):
            continue
        names = [call_of[id(n)] for n in window.this.walk() if id(n) in call_of]
        over = index.next_over(min(names)) if names else None
        if over is None or over not in overs:
            overs.append(over)
    return overs
