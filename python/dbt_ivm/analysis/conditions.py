"""Does a join condition equate columns? (ivm_has_equality on the Jinja side.)

True when, after stripping parentheses around the whole condition, some top-level AND
conjunct holds a single top-level `=`, `==` or `<=>` comparison with a column reference
on both sides. Any top-level OR makes it false. "Top level" means outside parentheses, as
the Jinja side counts parenthesis depth: the branches of a CASE expression are top level
(and so is the comparison in `NOT a = b`), a function's arguments are not.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

_EQUALITIES = (exp.EQ, exp.NullSafeEQ)
# nodes whose operands are written inside parentheses
_PARENTHESISED = (exp.Paren, exp.Tuple, exp.Query, exp.Window)


def has_equality(condition: exp.Expr | None) -> bool:
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if condition is None:
        return False
    conjuncts: list[exp.Expr] = []
    pending = [condition]
    while pending:
        node = pending.pop()
        if isinstance(node, exp.And):
            pending += [node.this, node.expression]
        else:
            conjuncts.append(node)
    if any(isinstance(n, exp.Or) for c in conjuncts for n in _top_level(c)):
        return False
    return any(_equates_columns(c) for c in conjuncts)


def _equates_columns(conjunct: exp.Expr) -> bool:
    equalities = [n for n in _top_level(conjunct) if isinstance(n, _EQUALITIES)]
    if len(equalities) != 1:
        return False
    return _has_column(equalities[0].this) and _has_column(equalities[0].expression)


def _top_level(node: exp.Expr) -> Iterator[exp.Expr]:
    yield node
    if isinstance(node, _PARENTHESISED) or (isinstance(node, exp.Func) and not _in_case(node)):
        return
    children = [node.this] if isinstance(node, exp.In) else node.iter_expressions()
    for child in children:
        yield from _top_level(child)


def _in_case(node: exp.Expr) -> bool:
    """CASE and its WHEN branches: functions in sqlglot, written without parentheses."""
    return isinstance(node, exp.Case) or (isinstance(node, exp.If) and isinstance(node.parent, exp.Case))


def _has_column(side: exp.Expr) -> bool:
    """A word the Jinja side takes for a column: any name that is not a literal, a type or
    a function called with parentheses, such as a column, a unit (`interval 1 day`) or a
    function written without parentheses (`current_date`)."""
    return any(
        isinstance(n, (exp.Column, exp.Var, exp.Query))
        or (isinstance(n, exp.Func) and "start" not in n.meta and not list(n.iter_expressions()))
        for n in side.walk()
    )
