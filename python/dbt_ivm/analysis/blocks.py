"""Query blocks and their FROM clauses (ivm_parse_query, ivm_parse_block, ivm_parse_from
and ivm_check_joins on the Jinja side).

A block is the main query, a CTE body or a derived table in FROM. Blocks are read in the
Jinja order, breadth first with CTEs before derived tables, because a CTE name counts
from the moment its WITH is read. Subqueries anywhere else are not blocks: they are
reported (IVM014) where the Jinja side looks for them, in the SELECT list, WHERE, HAVING
and join conditions.

A set operation is one block: the Jinja parser reads a block's clause keywords at the
block's own parenthesis depth, so a clause counts when any branch outside parentheses has
it; the SELECT list and FROM are those of the first branch with a FROM, WHERE and HAVING
those of the first branch that has one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import TokenType, exp

from dbt_ivm.analysis.conditions import has_equality
from dbt_ivm.analysis.model import Issue, Upstream
from dbt_ivm.analysis.tokens import Region, TokenIndex
from dbt_ivm.analysis.vocabulary import GENERATORS

# (AST argument, keyword token, construct) of the clauses that are restrictions
_ORDERING = (
    ("order", TokenType.ORDER_BY, "ORDER BY"),
    ("limit", TokenType.LIMIT, "LIMIT"),
    ("offset", TokenType.OFFSET, "OFFSET"),
    ("sort", TokenType.SORT_BY, "SORT BY"),
    ("cluster", TokenType.CLUSTER_BY, "CLUSTER BY"),
    ("distribute", TokenType.DISTRIBUTE_BY, "DISTRIBUTE BY"),
)
_WINDOWING = (
    ("windows", TokenType.WINDOW, "WINDOW clause"),
    ("qualify", TokenType.QUALIFY, "QUALIFY clause"),
)
# MINUS is an EXCEPT token spelled differently; the Jinja side tells them apart
_SET_OPERATIONS = (
    ("union", TokenType.UNION),
    ("intersect", TokenType.INTERSECT),
    ("except", TokenType.EXCEPT),
    ("minus", TokenType.EXCEPT),
)
_EXCEPT = frozenset({TokenType.EXCEPT})
_LATERAL = frozenset({TokenType.LATERAL})
_TABLE_NAME_ARGS = frozenset({"this", "db", "catalog", "alias"})


@dataclass(frozen=True)
class Rel:
    """An upstream read in the FROM clause of a block."""

    upstream: int
    index: int | None  # first token of its name


@dataclass(frozen=True)
class Block:
    """One query block: its tokens and, once read up to its FROM clause (ok), the keyword
    tokens of its clauses (the first of each word at the block's depth, as on the Jinja
    side: `within group` counts as GROUP there)."""

    region: Region | None
    ok: bool
    select: int | None = None
    distinct: int | None = None  # DISTINCT right after SELECT
    group: int | None = None
    having: int | None = None
    from_: int | None = None


@dataclass(frozen=True)
class ParsedQuery:
    blocks: tuple[Block, ...]
    rels: tuple[Rel, ...]
    issues: tuple[Issue, ...]


@dataclass(frozen=True)
class _Job:
    node: exp.Expr
    region: Region | None


@dataclass(frozen=True)
class _Item:
    """How one FROM item was read: its first token, whether it counts, whether FROM ends."""

    first: int | None
    kept: bool
    last: bool


def parse_query(tree: exp.Expr, index: TokenIndex, upstreams: Sequence[Upstream]) -> ParsedQuery:
    return _QueryParser(index, upstreams).parse(tree)


class _QueryParser:
    """The state of one parse: issues, upstream reads and CTE names found so far."""

    def __init__(self, index: TokenIndex, upstreams: Sequence[Upstream]) -> None:
        self.index = index
        self.upstreams = upstreams
        self.issues: list[Issue] = []
        self.rels: list[Rel] = []
        self.ctes: set[str] = set()
        self.cte_reads: dict[str, list[int | None]] = {}
        self.pending: deque[_Job] = deque()

    def parse(self, tree: exp.Expr) -> ParsedQuery:
        self.pending.append(_Job(tree, self.index.root()))
        blocks: list[Block] = []
        while self.pending:
            blocks.append(self._block(self.pending.popleft()))
        # a CTE read twice joins the upstreams it reads with themselves
        for name, reads in self.cte_reads.items() if self.rels else ():
            for at in reads[1:]:
                self._issue("IVM022", f"CTE {name} read twice", at)
        return ParsedQuery(tuple(blocks), tuple(self.rels), tuple(self.issues))

    def _issue(self, code: str, construct: str, at: int | None) -> None:
        self.issues.append(Issue(code, construct, *self.index.position(at)))

    # -- one block ---------------------------------------------------------------------------

    def _block(self, job: _Job) -> Block:
        node, region = _unwrap(job.node), job.region
        with_ok, start = self._with_clause(node, region.start if region else None)
        if not with_ok or not self._starts_with_select(node, region, start):
            return Block(region, ok=False)
        spine = self._spine(node, region)
        branches = [n for n in spine if isinstance(n, exp.Select)]
        self._clause_issues(spine, branches, region, start)
        from_branch = next((b for b in branches if b.args.get("from_")), None)
        if from_branch is None:
            self._issue("IVM050", "SELECT without FROM", start)
            return Block(region, ok=False)
        for branch in branches[: branches.index(from_branch) + 1]:
            for item in branch.expressions:
                self._subqueries(item, "SELECT list", region)
        where = _first_clause(branches, "where")
        self._from_clause(from_branch, region, where)
        self._subqueries(where, "WHERE", region)
        self._subqueries(_first_clause(branches, "having"), "HAVING", region)
        after = _after(start)
        first = after + 1
        return Block(
            region,
            ok=True,
            select=start,
            distinct=first if start is not None and self.index.words(first) == ("distinct",) else None,
            group=self.index.clause(region, "group", after),
            having=self.index.clause(region, "having", after),
            from_=self.index.clause(region, "from", after),
        )

    def _with_clause(self, node: exp.Expr, start: int | None) -> tuple[bool, int | None]:
        """Queue the CTEs; return whether the WITH clause is readable and the token after it."""
        with_ = node.args.get("with_")
        if with_ is None:
            return True, start
        if with_.args.get("recursive"):
            self._issue("IVM001", "WITH RECURSIVE", None if start is None else start + 1)
            return False, None
        for cte in with_.expressions:
            self.ctes.add(cte.alias.lower())
            if cte.args["alias"].columns:
                self._issue("IVM001", "WITH clause (expected `name as (select ...)`)", None)
                return False, None
            name = self.index.first_anchor(cte.args["alias"])
            body = None if name is None else self.index.region_after(name)
            self.pending.append(_Job(cte.this, body))
            start = None if body is None or body.opener is None else self.index.partners[body.opener] + 1
        return True, start

    def _starts_with_select(self, node: exp.Expr, region: Region | None, start: int | None) -> bool:
        # sqlglot turns VALUES and FROM-first queries into SELECTs: the first token tells
        tokens = self.index.tokens
        at_select = start is None or (
            region is not None and start < region.end and tokens[start].token_type == TokenType.SELECT
        )
        if _leftmost(node) is not None and at_select:
            return True
        found = tokens[start].text if start is not None and region and start < region.end else "end of query"
        self._issue("IVM001", f"expected SELECT, found `{found}`", start)
        return False

    def _spine(self, node: exp.Expr, region: Region | None) -> list[exp.Expr]:
        """The set operations and branches of a block outside parentheses, in text order."""
        if isinstance(node, exp.SetOperation):
            return [node, *self._spine(node.this, region), *self._spine(node.expression, region)]
        # sqlglot wraps `b INTERSECT c` of `a UNION b INTERSECT c` in parentheses of its own
        if (
            isinstance(node, exp.Subquery)
            and isinstance(node.this, exp.Intersect)
            and _bare(node)
            and region is not None
            and self.index.query_region(node.this) == region
        ):
            return self._spine(node.this, region)
        return [node]

    def _clause_issues(
        self, spine: list[exp.Expr], branches: list[exp.Select], region: Region | None, start: int | None
    ) -> None:
        after = _after(start)
        operations = self._set_operations(spine, branches, region)
        for name, token in _SET_OPERATIONS:
            if name in operations:
                spelled = self.index.scan(region, frozenset({token}), after)
                at = next((i for i in spelled if self.index.word(i) == name), None)
                self._issue("IVM013", f"set operation {name.upper()}", at)
        if any(n.args.get("laterals") for n in spine) or any(_joins_lateral(b) for b in branches):
            self._issue("IVM015", "LATERAL VIEW", self.index.find(region, _LATERAL, after))
        for code, clauses in (("IVM012", _ORDERING), ("IVM011", _WINDOWING)):
            for arg, token, construct in clauses:
                if any(n.args.get(arg) for n in spine):
                    self._issue(code, construct, self.index.find(region, frozenset({token}), after))

    def _set_operations(
        self, spine: list[exp.Expr], branches: list[exp.Select], region: Region | None
    ) -> set[str]:
        names = {"union" for n in spine if isinstance(n, exp.Union)}
        names |= {"intersect" for n in spine if isinstance(n, exp.Intersect)}
        # `* EXCEPT (...)` is the EXCEPT keyword too for the Jinja side
        stars = (e.this if isinstance(e, exp.Column) else e for b in branches for e in b.expressions)
        star_except = any(isinstance(s, exp.Star) and s.args.get("except_") for s in stars)
        if star_except or any(isinstance(n, exp.Except) for n in spine):
            spelled = {self.index.word(i) for i in self.index.scan(region, _EXCEPT)}
            names |= spelled or {"except"}
        return names

    # -- FROM --------------------------------------------------------------------------------

    def _from_clause(self, branch: exp.Select, region: Region | None, where: exp.Expr | None) -> None:
        joins: list[exp.Join] = branch.args.get("joins") or []
        entries = [(None, branch.args["from_"].this), *((j, j.this) for j in joins)]
        kept: list[tuple[exp.Join, int | None]] = []
        for join, item in entries:
            if isinstance(item, exp.Lateral):
                break  # LATERAL is a clause keyword: the FROM clause ends there
            read = self._from_item(item, region)
            if join is not None and read.kept:
                kept.append((join, read.first))
            if read.last:
                break
            if join is not None:
                self._subqueries(join.args.get("on"), "join condition", region)
        for join, first in kept:
            self._check_join(join, first, where)

    def _from_item(self, item: exp.Expr, region: Region | None) -> _Item:
        # the `(` of a FROM item, at the block's depth
        opener = self.index.opener_at(self.index.first_anchor(item), region.depth) if region else None
        if isinstance(item, exp.Subquery):
            return self._derived_table(item, opener)
        if isinstance(item, exp.Table) and isinstance(item.this, exp.Func):
            name = self.index.first_anchor(item.this)
            written = self.index.word(name) if name is not None else item.this.sql_name().lower()
            code = "IVM015" if written in GENERATORS else "IVM002"
            self._issue(code, f"table function {written}()", name)
            return _Item(None, kept=False, last=True)
        if isinstance(item, exp.Table):
            return self._relation(item)
        if isinstance(item, exp.Values):
            # the Jinja side reads `values (...)` as a call of a table function named values
            self._issue("IVM002", "table function values()", None if opener is None else opener - 1)
            return _Item(None, kept=False, last=True)
        self._issue("IVM001", f"FROM item `{item.sql(dialect='spark')}`", self.index.first_anchor(item))
        return _Item(None, kept=False, last=True)

    def _derived_table(self, item: exp.Subquery, opener: int | None) -> _Item:
        if _leftmost(item.this) is None:
            self._issue("IVM001", "parenthesised join", opener)
            return _Item(None, kept=False, last=True)
        region = None if opener is None else self.index.region_at(opener)
        if region is None:
            alias = item.args.get("alias")
            name = self.index.first_anchor(alias.this) if alias and alias.this else None
            region = (
                self.index.region_before(name) if name is not None else self.index.query_region(item.this)
            )
        self.pending.append(_Job(item.this, region))
        first = region.opener if region else None
        return _Item(first, kept=True, last=self._modified(item, frozenset({"this", "alias"})))

    def _relation(self, table: exp.Table) -> _Item:
        parts = tuple(part.name.lower() for part in table.parts)
        first = min((i for p in table.parts for i in self.index.anchors(p)), default=None)
        upstream = next((i for i, u in enumerate(self.upstreams) if u.parts == parts), None)
        if table.args.get("sample"):
            self._issue("IVM010", "TABLESAMPLE (a random sample of the upstream)", first)
            return _Item(first, kept=False, last=True)
        if upstream is not None:
            self.rels.append(Rel(upstream, first))
        elif len(parts) == 1 and parts[0] in self.ctes:
            self.cte_reads.setdefault(parts[0], []).append(first)
        else:
            self._issue("IVM002", "relation " + ".".join(parts), first)
        return _Item(first, kept=True, last=self._modified(table, _TABLE_NAME_ARGS))

    def _modified(self, item: exp.Expr, allowed: frozenset[str]) -> bool:
        """Column aliases, PIVOT, TABLESAMPLE, time travel, ...: the Jinja parser stops there."""
        alias = item.args.get("alias")
        if any(value for key, value in item.args.items() if key not in allowed) or (alias and alias.columns):
            self._issue("IVM001", f"FROM clause after `{item.sql(dialect='spark')}`", None)
            return True
        return False

    def _check_join(self, join: exp.Join, first: int | None, where: exp.Expr | None) -> None:
        at = self.index.join_operator(first)
        comma = (
            join.kind == "CROSS" and at is not None and self.index.tokens[at].token_type == TokenType.COMMA
        )
        words = [w.lower() for w in (join.method, join.side, join.kind) if w and w != "OUTER"]
        kind = "comma" if comma else " ".join(words) or "inner"
        if kind in ("left", "right", "full"):
            self._issue("IVM020", f"{kind.upper()} OUTER JOIN", at)
        elif kind in ("left semi", "left anti", "semi", "anti"):
            self._issue("IVM014", f"{kind.upper()} JOIN", at)
        elif "natural" in kind:
            self._issue("IVM021", "NATURAL JOIN (name the join columns with ON)", at)
        elif kind == "cross":
            self._issue("IVM021", "CROSS JOIN", at)
        elif kind == "comma":
            if not has_equality(where):
                self._issue("IVM021", "comma join without an equality in WHERE", at)
        elif not join.args.get("using") and not has_equality(join.args.get("on")):
            self._issue("IVM021", "join condition without an equality between columns", at)

    # -- subqueries --------------------------------------------------------------------------

    def _subqueries(self, clause: exp.Expr | None, where: str, block: Region | None) -> None:
        """One IVM014 per `(select` or `(with` inside the clause, at that parenthesis."""
        if clause is None:
            return
        queries = [q for q in clause.walk() if isinstance(q, (exp.Select, exp.SetOperation))]
        regions = (self.index.query_region(q) for q in queries)
        openers = sorted({r.opener for r in regions if r and r.opener is not None and r != block})
        for opener in openers:
            self._issue("IVM014", f"subquery in {where}", opener)
        if queries and not openers:
            self._issue("IVM014", f"subquery in {where}", None)  # none of its tokens located


def _unwrap(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Subquery) and _bare(node):
        node = node.this
    return node


def _bare(node: exp.Subquery) -> bool:
    """Parentheses and nothing else (no alias, no ORDER BY after them, ...)."""
    return not any(value for key, value in node.args.items() if key != "this")


def _leftmost(node: exp.Expr) -> exp.Select | None:
    """The first branch when it is a SELECT written without parentheses."""
    while isinstance(node, exp.SetOperation):
        node = node.this
    return node if isinstance(node, exp.Select) else None


def _first_clause(branches: list[exp.Select], arg: str) -> exp.Expr | None:
    clause = next((b.args[arg] for b in branches if b.args.get(arg)), None)
    return clause.this if clause is not None else None


def _joins_lateral(branch: exp.Select) -> bool:
    items = [branch.args["from_"].this] if branch.args.get("from_") else []
    items += [j.this for j in branch.args.get("joins") or []]
    return any(isinstance(i, exp.Lateral) for i in items)


def _after(start: int | None) -> int:
    return -1 if start is None else start
