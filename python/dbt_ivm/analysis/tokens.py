"""Token positions, from sqlglot's tokenizer.

sqlglot's AST keeps the position of names, literals and most function calls, but not of
keywords (ORDER BY, JOIN, ...) nor of query blocks, and it folds together a few things the
Jinja analyzer tells apart (a comma join is a CROSS join, MINUS is EXCEPT). The Jinja side
reports every issue at a token, so this index gives sqlglot's tokens what the Jinja
tokenizer gives its own: a parenthesis depth per token, and a query region for every `(`
followed by SELECT or WITH (a CTE body, a derived table or a subquery).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import sqlglot
from sqlglot import Token, TokenType, exp

_NOT_WORDS = frozenset(
    {
        TokenType.STRING, TokenType.IDENTIFIER, TokenType.NUMBER, TokenType.BIT_STRING,
        TokenType.HEX_STRING, TokenType.BYTE_STRING, TokenType.NATIONAL_STRING, TokenType.RAW_STRING,
        TokenType.UNICODE_STRING,
    }
)  # fmt: skip
_OPENS_QUERY = frozenset({TokenType.SELECT, TokenType.WITH})
_JOIN_WORDS = frozenset(
    {
        TokenType.JOIN, TokenType.INNER, TokenType.LEFT, TokenType.RIGHT, TokenType.FULL,
        TokenType.CROSS, TokenType.OUTER, TokenType.SEMI, TokenType.ANTI, TokenType.NATURAL,
    }
)  # fmt: skip


@dataclass(frozen=True)
class Region:
    """The tokens [start, end) of one query block, redundant parentheses removed.

    opener: the `(` in front of the block (None for the whole query), not part of the
    comparison since redundant parentheses may differ; depth: the parenthesis depth of the
    block's own clauses.
    """

    opener: int | None = field(compare=False)
    start: int
    end: int
    depth: int


@dataclass(frozen=True)
class TokenIndex:
    sql: str
    tokens: tuple[Token, ...]
    depths: tuple[int, ...]  # parenthesis depth; a `)` counts as inside its pair
    partners: tuple[int, ...]  # the matching parenthesis, -1 for other tokens
    parents: tuple[int, ...]  # innermost `(` enclosing the token, -1 at top level

    @classmethod
    def build(cls, sql: str) -> TokenIndex:
        """Tokenize like sqlglot's Spark dialect; raises sqlglot's TokenError."""
        tokens = tuple(sqlglot.tokenize(sql, read="spark"))
        depths: list[int] = []
        partners = [-1] * len(tokens)
        parents: list[int] = []
        stack: list[int] = []
        for i, token in enumerate(tokens):
            if token.token_type == TokenType.R_PAREN and stack:
                opener = stack.pop()
                partners[opener], partners[i] = i, opener
                depths.append(len(stack) + 1)
                parents.append(opener)
                continue
            depths.append(len(stack))
            parents.append(stack[-1] if stack else -1)
            if token.token_type == TokenType.L_PAREN:
                stack.append(i)
        return cls(sql, tokens, tuple(depths), tuple(partners), tuple(parents))

    # -- positions ---------------------------------------------------------------------

    def position(self, index: int | None) -> tuple[int | None, int | None]:
        """1-based line and column of a token, counted like the Jinja side."""
        if index is None:
            return None, None
        start = self.tokens[index].start
        return self.sql.count("\n", 0, start) + 1, start - self.sql.rfind("\n", 0, start)

    def index_at(self, offset: int) -> int | None:
        i = bisect.bisect_left(self.tokens, offset, key=lambda token: token.start)
        return i if i < len(self.tokens) and self.tokens[i].start == offset else None

    def anchors(self, node: exp.Expr) -> list[int]:
        """Tokens of the names, literals and calls under node that sqlglot located."""
        offsets = (n.meta["start"] for n in node.walk() if "start" in n.meta)
        return [i for i in map(self.index_at, offsets) if i is not None]

    def first_anchor(self, node: exp.Expr) -> int | None:
        return min(self.anchors(node), default=None)

    # -- words ---------------------------------------------------------------------------

    def is_word(self, index: int) -> bool:
        """A bare word, as the Jinja tokenizer sees it (not a string or a `quoted` name)."""
        token = self.tokens[index]
        return token.token_type not in _NOT_WORDS and token.text.isidentifier()

    def word(self, index: int) -> str:
        return self.tokens[index].text.lower()

    def words(self, index: int) -> tuple[str, ...]:
        """The Jinja side's words of a token: sqlglot reads `GROUP BY`, `PARTITION BY`, ... as
        one token where the Jinja tokenizer sees two words."""
        if index >= len(self.tokens) or self.tokens[index].token_type in _NOT_WORDS:
            return ()
        parts = self.tokens[index].text.lower().split()
        return tuple(parts) if parts and all(p.isidentifier() for p in parts) else ()

    def after_dot(self, index: int) -> bool:
        return index > 0 and self.tokens[index - 1].token_type == TokenType.DOT

    def clause(self, region: Region | None, word: str, after: int = -1) -> int | None:
        """First token starting with the word at the block's depth, not after a `.`: where
        the Jinja parser finds a clause keyword."""
        for i in self.scan_depth(region, after):
            if self.words(i)[:1] == (word,) and not self.after_dot(i):
                return i
        return None

    def is_call(self, index: int) -> bool:
        """A word followed by `(` and not preceded by `.`, the Jinja side's function call."""
        after, before = index + 1, index - 1
        return (
            self.is_word(index)
            and after < len(self.tokens)
            and self.tokens[after].token_type == TokenType.L_PAREN
            and not (before >= 0 and self.tokens[before].token_type == TokenType.DOT)
        )

    def bare_words(self, word: str) -> list[int]:
        """Occurrences of word not called with parentheses and not after a `.`."""
        return [
            i
            for i in range(len(self.tokens))
            if self.is_word(i)
            and self.word(i) == word
            and (i + 1 == len(self.tokens) or self.tokens[i + 1].token_type != TokenType.L_PAREN)
            and (i == 0 or self.tokens[i - 1].token_type != TokenType.DOT)
        ]

    # -- regions ---------------------------------------------------------------------------

    def root(self) -> Region:
        end = len(self.tokens)
        if end and self.tokens[end - 1].token_type == TokenType.SEMICOLON:
            end -= 1
        return self._region(None, 0, end)

    def region_at(self, opener: int) -> Region | None:
        if self.tokens[opener].token_type != TokenType.L_PAREN:
            return None
        return self._region(opener, opener + 1, self.partners[opener])

    def region_after(self, name: int) -> Region | None:
        """The parenthesised body after a CTE name (`name [as] (...)`)."""
        i = name + 1
        if i < len(self.tokens) and self.tokens[i].token_type == TokenType.ALIAS:
            i += 1
        return self.region_at(i) if i < len(self.tokens) else None

    def region_before(self, alias: int) -> Region | None:
        """The parenthesised derived table in front of its alias (`(...) [as] alias`)."""
        i = alias - 1
        if i >= 0 and self.tokens[i].token_type == TokenType.ALIAS:
            i -= 1
        if i < 0 or self.tokens[i].token_type != TokenType.R_PAREN:
            return None
        return self.region_at(self.partners[i])

    def query_region(self, node: exp.Expr) -> Region | None:
        """The innermost `(select ...)` region holding every located token of node."""
        anchors = self.anchors(node)
        if not anchors:
            return None
        opener = self._common_parent(anchors)
        while opener >= 0 and self.tokens[opener + 1].token_type not in _OPENS_QUERY:
            opener = self.parents[opener]
        return self.root() if opener < 0 else self.region_at(opener)

    def call_name(self, anchors: Iterable[int]) -> int | None:
        """The name token of the innermost call whose parentheses hold every anchor."""
        indices = list(anchors)
        if not indices:
            return None
        opener = self._common_parent(indices)
        while opener > 0 and not self.is_call(opener - 1):
            opener = self.parents[opener]
        return opener - 1 if opener > 0 else None

    def opener_at(self, index: int | None, depth: int) -> int | None:
        """The `(` at the given depth that encloses a token."""
        opener = -1 if index is None else self.parents[index]
        while opener >= 0 and self.depths[opener] > depth:
            opener = self.parents[opener]
        return opener if opener >= 0 and self.depths[opener] == depth else None

    def _region(self, opener: int | None, start: int, end: int) -> Region:
        # the Jinja parser drops parentheses around a whole block
        while (
            end - start >= 2
            and self.tokens[start].token_type == TokenType.L_PAREN
            and self.partners[start] == end - 1
        ):
            start, end = start + 1, end - 1
        depth = self.depths[start] if start < end else 0
        return Region(opener, start, end, depth)

    def _enclosing(self, index: int) -> Iterator[int]:
        opener = self.parents[index]
        while opener >= 0:
            yield opener
            opener = self.parents[opener]
        yield -1

    def _common_parent(self, indices: list[int]) -> int:
        common = set(self._enclosing(indices[0])).intersection(*map(self._enclosing, indices[1:]))
        return next(opener for opener in self._enclosing(indices[0]) if opener in common)

    # -- tokens of a block -------------------------------------------------------------------

    def find(self, region: Region | None, types: frozenset[TokenType], after: int = -1) -> int | None:
        """First token of one of types at the block's own depth, after index `after`."""
        return next(self.scan(region, types, after), None)

    def scan(self, region: Region | None, types: frozenset[TokenType], after: int = -1) -> Iterator[int]:
        return (i for i in self.scan_depth(region, after) if self.tokens[i].token_type in types)

    def scan_depth(self, region: Region | None, after: int = -1) -> Iterator[int]:
        """The tokens at the block's own depth, after index `after`."""
        if region is None:
            return
        for i in range(max(region.start, after + 1), region.end):
            if self.depths[i] == region.depth:
                yield i

    def join_operator(self, item: int | None) -> int | None:
        """First token of the `,` or join keywords in front of a FROM item."""
        if item is None or item == 0:
            return None
        if self.tokens[item - 1].token_type == TokenType.COMMA:
            return item - 1
        start = item
        while start > 0 and item - start < 4 and self.tokens[start - 1].token_type in _JOIN_WORDS:
            start -= 1
        return start if start < item else None

    def next_over(self, call: int) -> int | None:
        """The OVER after a window function's name, at the same depth."""
        depth = self.depths[call]
        for i in range(call + 1, len(self.tokens)):
            if self.depths[i] < depth:
                return None
            if self.depths[i] == depth and self.tokens[i].token_type == TokenType.OVER:
                return i
        return None
