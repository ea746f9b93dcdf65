"""What the analyzer takes and returns: upstream declarations, issues and the analysis."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Shape = Literal["join_only", "aggregate", "aggregate_over_joins", "distinct", "unknown"]
# append: insert the new rows; rewrite: delete the changed slice, insert its new rows;
# merge: merge per-group (or per-row) deltas; recompute: recompute the affected groups
RefreshMethod = Literal["append", "rewrite", "merge", "recompute"]


@dataclass(frozen=True)
class Upstream:
    """A ref() or source() of the model.

    parts: the lower-case name parts the relation renders to in compiled SQL, e.g.
    ("analytics", "orders"). problems: (code, fix) of declaration problems (IVM030, ...).
    """

    name: str
    parts: tuple[str, ...]
    problems: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Issue:
    """One restriction found in the model.

    line and column (1-based) point at the token the Jinja analyzer reports; both are None
    where it reports "the model". fix overrides the catalog's fix (upstream problems).
    """

    code: str
    construct: str
    line: int | None = None
    column: int | None = None
    fix: str | None = None


@dataclass(frozen=True)
class Refresh:
    """How a refresh applies a batch: `inserts` when every upstream change in it is an
    insert, `any` when it has deletes or updates."""

    inserts: RefreshMethod
    any: RefreshMethod


@dataclass(frozen=True)
class Analysis:
    shape: Shape
    issues: tuple[Issue, ...]
    refresh: Refresh | None = None  # None when the model cannot be maintained

    @property
    def maintainable(self) -> bool:
        return not self.issues

    @property
    def codes(self) -> tuple[str, ...]:
        """The distinct restriction codes, sorted."""
        return tuple(sorted({issue.code for issue in self.issues}))
