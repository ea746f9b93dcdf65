"""The restriction catalog, word for word the one in macros/analysis/restrictions.sql
(tests/test_analyzer.py compares the two)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final


@dataclass(frozen=True)
class Restriction:
    what: str
    fix: str


CATALOG: Final[Mapping[str, Restriction]] = MappingProxyType(
    {
        "IVM001": Restriction(
            "SQL the analyzer cannot parse",
            "write the model as SELECT ... FROM ... [JOIN ...] [WHERE ...], with CTEs if you like; "
            "move unusual syntax to an upstream model",
        ),
        "IVM002": Restriction(
            "relation that is not a ref() or source() of this model",
            "read every upstream through ref() or source() so its changes can be tracked",
        ),
        "IVM010": Restriction(
            "non-deterministic function",
            "a refresh would recompute it for changed rows only; compute it in an upstream model "
            "or pass the value as a var",
        ),
        "IVM011": Restriction(
            "window function",
            "move the window function to a downstream model (materialized as table or view)",
        ),
        "IVM012": Restriction(
            "ORDER BY / LIMIT / OFFSET / SORT BY",
            "remove it: a table has no order, and LIMIT depends on all rows; order in the consumer",
        ),
        "IVM013": Restriction(
            "set operation (UNION / INTERSECT / EXCEPT)",
            "split the branches into separate ivm models and union them in a view",
        ),
        "IVM014": Restriction(
            "subquery in SELECT, WHERE, HAVING or a join condition, or a semi/anti join",
            "rewrite it as an inner join with an upstream, or precompute it in an upstream model",
        ),
        "IVM015": Restriction(
            "LATERAL VIEW / generator function (explode, stack, ...)",
            "explode in an upstream model and declare its row key",
        ),
        "IVM020": Restriction(
            "outer join",
            "use an inner join, or keep the outer join in a downstream view over ivm models",
        ),
        "IVM021": Restriction(
            "join without an equality between columns (cross, natural or theta join)",
            "join on equality of columns (a.x = b.y); extra non-equality conditions may follow with AND",
        ),
        "IVM022": Restriction(
            "self-join: the same upstream appears more than once",
            "create a second upstream model (a view over the same table) for the second role",
        ),
        "IVM030": Restriction(
            "upstream without a row key",
            "declare the row key of the upstream in its YAML",
        ),
        "IVM031": Restriction(
            "upstream without a change feed",
            "declare a change log relation or an append-only watermark column for the upstream in its YAML",
        ),
        "IVM032": Restriction(
            "declared change log relation does not exist or lacks the change columns",
            "create the change log with the upstream columns plus _change_type, _commit_version and "
            "_commit_timestamp, or fix its name",
        ),
        "IVM040": Restriction(
            "aggregate (GROUP BY or aggregate function): not supported by this version",
            "materialize the join as an ivm model and aggregate it in a downstream model, "
            "or opt into ivm_on_unsupported: full_rebuild",
        ),
        "IVM041": Restriction(
            "SELECT DISTINCT: not supported by this version",
            "remove DISTINCT (the row keys already make rows distinct), "
            "or opt into ivm_on_unsupported: full_rebuild",
        ),
        "IVM050": Restriction(
            "query reads no upstream relation",
            "an ivm model needs at least one ref() or source() in FROM",
        ),
    }
)
