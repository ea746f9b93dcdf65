"""The aggregate rules of the Jinja analyzer: which query blocks aggregate, whether the main
query is an aggregate or a DISTINCT, restrictions IVM040 to IVM045, and the kinds of the
aggregate calls that decide how a refresh maintains the result.

These rules are about tokens (which block holds a call, which words of a select item are
column references), so they run on the token index rather than sqlglot's AST: the AST
keeps no position for keywords, and it would see `sum(x) over (...)` as a window, not as
a call of `sum` as the Jinja side does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sqlglot import TokenType

from dbt_ivm.analysis.blocks import Block
from dbt_ivm.analysis.model import Issue
from dbt_ivm.analysis.tokens import TokenIndex
from dbt_ivm.analysis.vocabulary import (
    ADDITIVE_AGGREGATES,
    AGGREGATES,
    CLAUSE_KEYWORDS,
    EXTREMUM_AGGREGATES,
    NON_COLUMN_WORDS,
)

AggregateKind = Literal["additive", "extremum", "recompute"]

# first words at the top level of a GROUP BY list that make grouping sets
_GROUPING_SETS = frozenset({"rollup", "cube", "grouping", "with"})


@dataclass(frozen=True)
class AggregateCall:
    name: str
    index: int  # the name token
    kind: AggregateKind


@dataclass(frozen=True)
class MainQuery:
    """What the aggregate rules say about the main query, and the issues they found."""

    aggregate: bool
    distinct: bool
    having: bool
    kinds: frozenset[AggregateKind]
    issues: tuple[Issue, ...]


@dataclass(frozen=True)
class _Item:
    """A select item: tokens [start, end), the expression without its alias [start, value_end)."""

    start: int
    end: int
    value_end: int


def aggregate_rules(blocks: Sequence[Block], index: TokenIndex) -> MainQuery:
    calls = _aggregate_calls(index)
    owners = [_owner(blocks, call.index) for call in calls]
    issues: list[Issue] = []
    # a block not read up to its FROM clause has its issue already: it is not judged here
    for number, block in enumerate(blocks[1:], start=1):
        inner = [call for call, owner in zip(calls, owners, strict=True) if owner == number]
        issue = _inner_block_issue(block, inner, index) if block.ok else None
        if issue is not None:
            issues.append(issue)
    if not blocks or not blocks[0].ok:
        return MainQuery(False, False, False, frozenset(), tuple(issues))
    main = blocks[0]
    own = [call for call, owner in zip(calls, owners, strict=True) if owner == 0]
    aggregate = main.group is not None or bool(own)
    if aggregate:
        issues += _aggregate_issues(main, own, index)
    return MainQuery(
        aggregate=aggregate,
        distinct=main.distinct is not None and not aggregate,
        having=main.having is not None,
        kinds=frozenset(call.kind for call in own),
        issues=tuple(issues),
    )


def _aggregate_calls(index: TokenIndex) -> list[AggregateCall]:
    """Every call of an aggregate name, as the Jinja side finds them: a word followed by `(`."""
    calls = []
    for i in range(len(index.tokens)):
        if index.is_call(i) and index.word(i) in AGGREGATES:
            calls.append(AggregateCall(index.word(i), i, _kind(index, i)))
    return calls


def _kind(index: TokenIndex, call: int) -> AggregateKind:
    name = index.word(call)
    if index.words(call + 2) == ("distinct",):
        return "recompute"
    if name in ADDITIVE_AGGREGATES:
        return "additive"
    return "extremum" if name in EXTREMUM_AGGREGATES else "recompute"


def _owner(blocks: Sequence[Block], token: int) -> int | None:
    """The innermost block whose tokens hold the token (block regions nest)."""
    holding = [
        (block.region.end - block.region.start, number)
        for number, block in enumerate(blocks)
        if block.region is not None and block.region.start <= token < block.region.end
    ]
    return min(holding)[1] if holding else None


def _inner_block_issue(block: Block, calls: list[AggregateCall], index: TokenIndex) -> Issue | None:
    where = "in a CTE or derived table"
    if block.group is not None:
        return Issue("IVM040", f"GROUP BY {where}", *index.position(block.group))
    if block.distinct is not None:
        return Issue("IVM040", f"SELECT DISTINCT {where}", *index.position(block.distinct))
    if calls:
        return Issue("IVM040", f"{calls[0].name}() {where}", *index.position(calls[0].index))
    return None


def _aggregate_issues(main: Block, calls: list[AggregateCall], index: TokenIndex) -> list[Issue]:
    issues: list[Issue] = []
    if main.distinct is not None:
        issues.append(Issue("IVM043", "SELECT DISTINCT", *index.position(main.distinct)))
    grouping = _grouping_sets(main, index)
    if grouping is not None:
        construct = "GROUP BY ALL" if index.words(grouping)[:1] == ("all",) else "grouping sets"
        issues.append(Issue("IVM044", construct, *index.position(grouping)))
    for item in _select_items(main, index):
        if _is_star(item, index):
            issues.append(Issue("IVM041", "* in the SELECT list", *index.position(item.start)))
        elif _mixes_columns_and_aggregates(item, calls, index):
            construct = "select item with a column outside its aggregates"
            issues.append(Issue("IVM042", construct, *index.position(item.start)))
    if main.group is None:
        # its only group is the whole input: recomputing it is a full rebuild
        found: list[tuple[int, str]] = []
        if main.having is not None:
            found.append((main.having, "HAVING"))
        recompute = next((call for call in calls if call.kind == "recompute"), None)
        if recompute is not None:
            written = "(DISTINCT ...)" if index.words(recompute.index + 2) == ("distinct",) else "()"
            found.append((recompute.index, recompute.name + written))
        if found:
            at, construct = min(found)
            issues.append(Issue("IVM045", f"{construct} without GROUP BY", *index.position(at)))
    return issues


def _grouping_sets(main: Block, index: TokenIndex) -> int | None:
    """GROUP BY ALL, or ROLLUP / CUBE / GROUPING SETS / WITH ... at the top level of GROUP BY."""
    if main.group is None or main.region is None:
        return None
    # sqlglot reads GROUP BY as one token, the Jinja tokenizer as two words
    start = main.group + (1 if index.words(main.group) == ("group", "by") else 2)
    firsts: dict[str, int] = {}
    for i in index.scan_depth(main.region, main.select if main.select is not None else -1):
        word = index.words(i)[:1]
        if word and word[0] in CLAUSE_KEYWORDS and not index.after_dot(i):
            firsts.setdefault(word[0], i)
    end = min((i for i in firsts.values() if i > main.group), default=main.region.end)
    for i in index.scan_depth(main.region, start - 1):
        if i >= end:
            break
        word = index.words(i)[:1]
        if (i == start and word == ("all",)) or (word and word[0] in _GROUPING_SETS):
            return i
    return None


def _select_items(main: Block, index: TokenIndex) -> list[_Item]:
    if main.select is None or main.from_ is None or main.region is None:
        return []
    start = main.select + 1
    if index.words(start) in (("distinct",), ("all",)):
        start += 1
    commas = [i for i in index.scan(main.region, frozenset({TokenType.COMMA}), start - 1) if i < main.from_]
    bounds = zip([start, *(c + 1 for c in commas)], [*commas, main.from_], strict=True)
    return [_Item(s, e, _value_end(s, e, index)) for s, e in bounds if e > s]


def _value_end(start: int, end: int, index: TokenIndex) -> int:
    """Where the item's alias starts (`expr [as] name`), read as the Jinja side does."""
    if end - start < 2 or _kind_of(index, end - 1) not in ("word", "qid"):
        return end
    before = end - 2
    if index.words(before) == ("as",):
        return before
    tokens = index.tokens
    implicit = (
        tokens[before].token_type != TokenType.DOT
        and (tokens[before].token_type == TokenType.R_PAREN or _kind_of(index, before) != "other")
        and index.words(end - 1) != ("end",)
    )
    return end - 1 if implicit else end


def _kind_of(index: TokenIndex, i: int) -> str:
    token_type = index.tokens[i].token_type
    if token_type == TokenType.IDENTIFIER:
        return "qid"
    if token_type == TokenType.NUMBER:
        return "num"
    if "STRING" in token_type.name:
        return "str"
    return "word" if index.words(i) else "other"


def _is_star(item: _Item, index: TokenIndex) -> bool:
    tokens = index.tokens
    width = item.end - item.start
    if width == 1:
        return tokens[item.start].token_type == TokenType.STAR
    return (
        width == 3
        and tokens[item.end - 1].token_type == TokenType.STAR
        and tokens[item.end - 2].token_type == TokenType.DOT
    )


def _mixes_columns_and_aggregates(item: _Item, calls: list[AggregateCall], index: TokenIndex) -> bool:
    inside = [call for call in calls if item.start <= call.index < item.value_end]
    if not inside:
        return False
    hidden: set[int] = set()
    for call in inside:
        close = index.partners[call.index + 1]
        # the FILTER (WHERE ...) of an aggregate belongs to it
        if index.words(close + 1) == ("filter",) and _opens(index, close + 2):
            close = index.partners[close + 2]
        hidden.update(range(call.index, close + 1))
    return any(_is_column(index, i) for i in range(item.start, item.value_end) if i not in hidden)


def _opens(index: TokenIndex, i: int) -> bool:
    return i < len(index.tokens) and index.tokens[i].token_type == TokenType.L_PAREN


def _is_column(index: TokenIndex, i: int) -> bool:
    """A quoted name, or a word that is not a keyword of ivm_non_column_words nor a call."""
    if index.tokens[i].token_type == TokenType.IDENTIFIER:
        return True
    words = index.words(i)
    return any(
        word not in NON_COLUMN_WORDS and not (k == len(words) - 1 and _opens(index, i + 1))
        for k, word in enumerate(words)
    )
