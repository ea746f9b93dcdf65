"""The restriction catalog. `what` and `fix` are word for word those of
macros/analysis/restrictions.sql (tests/test_analyzer.py compares them); `why` is for the
docs and `dbt-ivm explain` only (the README table is generated from it, see
tests/test_readme.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final


@dataclass(frozen=True)
class Restriction:
    what: str
    fix: str
    why: str = ""


CATALOG: Final[Mapping[str, Restriction]] = MappingProxyType(
    {
        "IVM001": Restriction(
            "SQL the analyzer cannot parse",
            "write the model as SELECT ... FROM ... [JOIN ...] [WHERE ...], with CTEs if you like; "
            "move unusual syntax to an upstream model",
            "what cannot be read is never guessed: a wrong guess would maintain the table wrongly",
        ),
        "IVM002": Restriction(
            "relation that is not a ref() or source() of this model",
            "read every upstream through ref() or source() so its changes can be tracked",
            "changes of a relation that is not declared as an upstream are never read",
        ),
        "IVM010": Restriction(
            "non-deterministic function",
            "a refresh would recompute it for changed rows only; compute it in an upstream model "
            "or pass the value as a var",
            "rows that did not change keep the old value, so the table drifts from its definition",
        ),
        "IVM011": Restriction(
            "window function",
            "move the window function to a downstream model (materialized as table or view)",
            "a window value depends on other rows of its partition, which may not have changed",
        ),
        "IVM012": Restriction(
            "ORDER BY / LIMIT / OFFSET / SORT BY",
            "remove it: a table has no order, and LIMIT depends on all rows; order in the consumer",
            "which rows LIMIT keeps depends on all rows, and a table keeps no order",
        ),
        "IVM013": Restriction(
            "set operation (UNION / INTERSECT / EXCEPT)",
            "split the branches into separate ivm models and union them in a view",
            "the rows of one branch cannot be traced to the upstream rows of the other branches",
        ),
        "IVM014": Restriction(
            "subquery in SELECT, WHERE, HAVING or a join condition, or a semi/anti join",
            "rewrite it as an inner join with an upstream, or precompute it in an upstream model",
            "its result depends on a whole relation, so any change there may change every row",
        ),
        "IVM015": Restriction(
            "LATERAL VIEW / generator function (explode, stack, ...)",
            "explode in an upstream model and declare its row key",
            "generated rows have no row key that ties them to their upstream row",
        ),
        "IVM016": Restriction(
            "output column whose name starts with __ivm_",
            "rename it (... as another_name); with an ivm upstream, list its columns instead of *, "
            "which brings its bookkeeping columns",
            "the package keeps its bookkeeping in __ivm_ columns of the table, and the consistency "
            "test compares the other columns only",
        ),
        "IVM017": Restriction(
            "output column name that a Delta table cannot hold (space or one of , ; { } ( ) = tab newline)",
            "name the select item (... as total_amount), or store the model as parquet",
            "Delta refuses these characters in column names without column mapping, as it does for a "
            "table model",
        ),
        "IVM020": Restriction(
            "outer join",
            "use an inner join, or keep the outer join in a downstream view over ivm models",
            "a change on one side turns NULL-extended rows into matches and back",
        ),
        "IVM021": Restriction(
            "join without an equality between columns (cross, natural or theta join)",
            "join on equality of columns (a.x = b.y); extra non-equality conditions may follow with AND",
            "without an equality each changed row must be joined with every row of the other side",
        ),
        "IVM022": Restriction(
            "self-join: the same upstream or CTE is read more than once",
            "create a second upstream model (a view over the same table) for the second role",
            "rows are traced to their upstream rows by one identity per upstream, not per role",
        ),
        "IVM030": Restriction(
            "upstream without a row key",
            "declare the row key of the upstream in its YAML",
            "the changes in one refresh window are netted per row key",
        ),
        "IVM031": Restriction(
            "upstream without a change feed",
            "declare a change log relation (with unique_key), only unique_key for a Delta table with "
            "change data feed, or an append-only watermark column for the upstream in its YAML",
            "without a change log or a watermark the changes since the last refresh cannot be read",
        ),
        "IVM032": Restriction(
            "declared change log relation does not exist or lacks the change columns",
            "create the change log with the upstream columns plus _change_type, _commit_version and "
            "_commit_timestamp, or fix its name",
            "every refresh reads the upstream's changes from it (checked at run time only)",
        ),
        "IVM040": Restriction(
            "aggregate or DISTINCT inside a CTE or derived table",
            "keep aggregation in the outermost query: make the inner aggregate its own ivm model "
            "and ref() it",
            "only the groups of the outermost query are kept, as the rows of the table",
        ),
        "IVM041": Restriction(
            "SELECT * in an aggregate query",
            "list the group columns and the aggregates explicitly",
            "every column of an aggregate table must be a group column or a maintained aggregate",
        ),
        "IVM042": Restriction(
            "select item combines aggregates with columns outside the aggregate calls",
            "select the group column and the aggregate as separate columns and combine them in a "
            "downstream model",
            "a group's aggregates are updated from their deltas; other columns in the same "
            "expression have no delta",
        ),
        "IVM043": Restriction(
            "SELECT DISTINCT over GROUP BY or aggregates",
            "remove DISTINCT (groups are already distinct) or apply it in a downstream model",
            "two groups with equal values would have to share one row",
        ),
        "IVM044": Restriction(
            "GROUP BY ALL, ROLLUP, CUBE or GROUPING SETS",
            "list the group expressions; compute rollups in a downstream model from this one",
            "each input row must belong to exactly one group, named by explicit group expressions",
        ),
        "IVM045": Restriction(
            "aggregate that needs a group recompute in a query without GROUP BY "
            "(its only group is the whole input)",
            "add a GROUP BY, or use only count, sum, avg, min and max",
            "recomputing the only group reads the whole input: a full rebuild on every change",
        ),
        "IVM050": Restriction(
            "query reads no upstream relation",
            "an ivm model needs at least one ref() or source() in FROM",
            "there is no upstream whose changes a refresh could apply",
        ),
    }
)


def markdown_table() -> str:
    """The catalog as the README's table: one line per code (what, why, fix)."""
    lines = ["| code | what | why | fix |", "| --- | --- | --- | --- |"]
    lines += [f"| {code} | {r.what} | {r.why} | {r.fix} |" for code, r in CATALOG.items()]
    return "\n".join(lines)
