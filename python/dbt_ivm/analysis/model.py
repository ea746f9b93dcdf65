"""What the analyzer takes and returns: upstream declarations, issues and the analysis."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Shape = Literal["join_only", "aggregate", "aggregate_over_joins", "distinct", "unknown"]


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
class Analysis:
    shape: Shape
    issues: tuple[Issue, ...]

    @property
    def maintainable(self) -> bool:
        return not self.issues

    @property
    def codes(self) -> tuple[str, ...]:
        """The distinct restriction codes, sorted."""
        return tuple(sorted({issue.code for issue in self.issues}))
