"""Random ivm models from the SQL grammar the package supports, for the fuzz test: joins
with or without aliases (plain, backticked, reserved words), CTEs and derived tables,
WHERE, GROUP BY with aggregates and HAVING, DISTINCT, unnamed select items, columns named
like reserved words, mixed keyword case and comments. Every query is valid Spark SQL with
unique output names: a failure is either an IVM restriction or a bug of the package."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# upstream tables: column -> 'num' | 'str' (`order` and `group` are reserved words)
TABLES: dict[str, dict[str, str]] = {
    "orders": {"id": "num", "customer_id": "num", "amount": "num", "order": "str", "status": "str"},
    "customers": {"id": "num", "region": "str", "group": "num"},
}
RESERVED = {"order", "group", "select", "from", "table", "where", "join"}
ALIASES = ["o", "c", "x", "`t`", "`order`", "`select`", "src", "`Odd Name`"]


def quote(name: str) -> str:
    return f"`{name}`" if name in RESERVED or not name.replace("_", "a").isalnum() else name


@dataclass
class Scope:
    """A relation of the FROM clause: how it is referred to and its columns."""

    alias: str
    columns: dict[str, str]


@dataclass
class Query:
    pick: random.Random
    ctes: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    from_items: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)

    def kw(self, word: str) -> str:
        return word.upper() if self.pick.random() < 0.3 else word

    def relation(self, table: str, alias: str) -> Scope:
        """The upstream as it is, or behind a CTE or a derived table keeping some columns."""
        source = f"{{{{ source('src', '{table}') }}}}"
        columns = dict(TABLES[table])
        shape = self.pick.random()
        if shape < 0.6:
            self.from_item(source, alias)
            return Scope(alias, columns)
        keep = ["id", *(c for c in columns if c != "id" and (c == "customer_id" or self.pick.random() < 0.7))]
        where = ""
        if self.pick.random() < 0.4:
            where = f" {self.kw('where')} {quote('id')} is not null"
        inner = f"{self.kw('select')} {', '.join(quote(c) for c in keep)} {self.kw('from')} {source}{where}"
        kept = {c: columns[c] for c in keep}
        if shape < 0.8:
            name = f"cte_{table}_{len(self.ctes)}"
            self.ctes.append(f"{name} {self.kw('as')} (\n  {inner}\n)")
            self.from_item(name, alias)
        else:
            self.from_item(f"(\n  {inner}\n)", alias)
        return Scope(alias, kept)

    def from_item(self, text: str, alias: str) -> None:
        as_kw = f"{self.kw('as')} " if self.pick.random() < 0.5 else ""
        self.from_items.append(f"{text} {as_kw}{alias}")
        self.aliases.append(alias)

    def ref(self, scopes: list[Scope], scope: Scope, column: str) -> str:
        shared = sum(1 for s in scopes if column in s.columns) > 1
        if not shared and self.pick.random() < 0.3:
            return quote(column)
        return f"{scope.alias}.{quote(column)}"

    def column(self, scopes: list[Scope], kind: str | None = None) -> tuple[str, str, str]:
        """A random column reference: (sql, column name, kind)."""
        options = [(s, c, k) for s in scopes for c, k in s.columns.items() if kind is None or k == kind]
        scope, column, k = self.pick.choice(options)
        return self.ref(scopes, scope, column), column, k

    def expression(self, scopes: list[Scope]) -> tuple[str, str | None]:
        """(sql, the name Spark gives it when it is a bare column, else None)."""
        sql, column, kind = self.column(scopes)
        form = self.pick.random()
        if form < 0.45:
            return sql, column
        if kind == "num":
            return self.pick.choice(
                [f"{sql} + 1", f"{sql} * 2", f"round({sql}, 1)", f"coalesce({sql}, 0)"]
            ), None
        if form < 0.75:
            return self.pick.choice(
                [f"upper({sql})", f"concat({sql}, '-')", f"coalesce({sql}, 'none')"]
            ), None
        return self.pick.choice(
            [f"case when {sql} is null then 'n' else 'y' end", f"cast({sql} as string)"]
        ), None

    def aliased(self, sql: str, bare: str | None) -> str | None:
        """The select item with an alias, or without one when Spark's name for it is
        unique; None when it cannot be added without a duplicate output name."""
        style = self.pick.random()
        if style < 0.35:
            # Spark names an unnamed item after its text without qualifiers
            name = bare or sql
            for alias in self.aliases:
                name = name.replace(f"{alias}.", "")
            name = name.lower()
            if name in self.names:
                return None
            self.names.add(name)
            return sql
        name = self.pick.choice(["a", "b", "total", "`select`", "`from`", "`Mixed Case`", "Upper"])
        name = f"{name[:-1]}_{len(self.names)}`" if name.startswith("`") else f"{name}_{len(self.names)}"
        self.names.add(name.strip("`").lower())
        as_kw = f"{self.kw('as')} " if style < 0.8 else ""
        return f"{sql} {as_kw}{name}"

    def predicate(self, scopes: list[Scope]) -> str:
        sql, _, kind = self.column(scopes)
        if kind == "num":
            return self.pick.choice([f"{sql} > 1", f"{sql} between 0 and 50", f"{sql} is not null"])
        return self.pick.choice([f"{sql} is not null", f"{sql} in ('a', 'b')", f"{sql} like 'a%'"])


def random_model(pick: random.Random) -> str:
    """One model's SQL (with its config line)."""
    q = Query(pick)
    aliases = pick.sample(ALIASES, 2)
    scopes = [q.relation("orders", aliases[0])]
    join = ""
    if pick.random() < 0.6:
        scopes.append(q.relation("customers", aliases[1]))
        on = f"{q.ref(scopes, scopes[0], 'customer_id')} = {q.ref(scopes, scopes[1], 'id')}"
        if pick.random() < 0.3:
            on += f" {q.kw('and')} {q.predicate(scopes)}"
        join = f"\n{q.kw('join')} {q.from_items[1]} {q.kw('on')} {on}"
    shape = pick.random()
    items: list[str] = []
    group_by = ""
    distinct = ""
    if shape < 0.4:
        groups = [q.expression(scopes) for _ in range(pick.randint(0, 2))]
        for sql, bare in groups:
            item = q.aliased(sql, bare)
            if item:
                items.append(item)
        if groups:
            group_by = f"\n{q.kw('group by')} " + ", ".join(dict.fromkeys(sql for sql, _ in groups))
        aggregates = ["count(*)", "count({a})", "sum({n})", "avg({n})", "min({a})", "max({a})"]
        if groups:
            aggregates.append("count(distinct {a})")
        for template in pick.sample(aggregates, pick.randint(1, 3)):
            sql = template.format(a=q.column(scopes)[0], n=q.column(scopes, "num")[0])
            item = q.aliased(sql, None)
            if item:
                items.append(item)
        if groups and pick.random() < 0.3:
            group_by += f"\n{q.kw('having')} count(*) > 1"
    else:
        if shape > 0.85:
            distinct = f"{q.kw('distinct')} "
        for _ in range(pick.randint(1, 4)):
            item = q.aliased(*q.expression(scopes))
            if item:
                items.append(item)
    if not items:
        items.append(f"count(*) {q.kw('as')} n_rows" if group_by or shape < 0.4 else f"{scopes[0].alias}.id")
    where = f"\n{q.kw('where')} {q.predicate(scopes)}" if pick.random() < 0.5 else ""
    comment = pick.choice(["", "-- a comment\n", "/* block */ "])
    with_clause = f"{q.kw('with')} " + ",\n".join(q.ctes) + "\n" if q.ctes else ""
    fmt = ", file_format='delta'" if pick.random() < 0.3 else ""
    return (
        f"{{{{ config(materialized='ivm'{fmt}) }}}}\n{comment}{with_clause}{q.kw('select')} {distinct}"
        + ", ".join(items)
        + f"\n{q.kw('from')} {q.from_items[0]}{join}{where}{group_by}\n"
    )
