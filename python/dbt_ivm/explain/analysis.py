"""Typed results of the package's analysis macros, run by the macro runtime: the macros in
macros/analysis are the only implementation of the rules (the ones `dbt run` applies)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dbt_ivm.macro_runtime import Runtime

Shape = Literal["join_only", "aggregate", "aggregate_over_joins", "distinct", "keyed", "unknown"]
# append: insert the new rows; rewrite: delete the changed slice, insert its new rows;
# merge: merge per-group (or per-row) deltas; recompute: recompute the affected groups
RefreshMethod = Literal["append", "rewrite", "merge", "recompute"]


@dataclass(frozen=True)
class Issue:
    """One restriction found in the model; line and column are None where the macros
    report "the model". fix overrides the catalog's fix (upstream problems)."""

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
    key: tuple[str, ...] = ()  # the keyed path's slice key (shape 'keyed')
    notes: tuple[str, ...] = ()  # what the analysis left out of the model (a final ORDER BY)

    @property
    def codes(self) -> tuple[str, ...]:
        """The distinct restriction codes, sorted."""
        return tuple(sorted({issue.code for issue in self.issues}))


@dataclass(frozen=True)
class CatalogEntry:
    what: str
    why: str
    fix: str


def analyze(
    runtime: Runtime,
    sql: str,
    upstreams: Sequence[Mapping[str, Any]],
    unique_key: Sequence[str] | None = None,
) -> Analysis:
    """ivm_analyze on compiled SQL; upstreams as ivm_upstreams returns them; unique_key as
    _ivm_model_settings reads the model's config."""
    result = runtime.macro("ivm_analyze")(sql, list(upstreams), list(unique_key) if unique_key else None)
    issues = tuple(_issue(issue) for issue in result["issues"])
    refresh = result.get("refresh")
    keyed = result.get("keyed") or {}
    return Analysis(
        result["shape"],
        issues,
        Refresh(refresh["inserts"], refresh["any"]) if refresh else None,
        tuple(keyed.get("key") or ()),
        tuple(result.get("notes") or ()),
    )


def catalog(runtime: Runtime) -> dict[str, CatalogEntry]:
    return {
        code: CatalogEntry(entry["what"], entry["why"], entry["fix"])
        for code, entry in runtime.macro("ivm_restriction_catalog")().items()
    }


def markdown_table(entries: Mapping[str, CatalogEntry]) -> str:
    """The catalog as the README's table: one line per code (what, why, fix)."""
    lines = ["| code | what | why | fix |", "| --- | --- | --- | --- |"]
    lines += [f"| {code} | {e.what} | {e.why} | {e.fix} |" for code, e in entries.items()]
    return "\n".join(lines)


def _issue(issue: Mapping[str, Any]) -> Issue:
    # the macros' position text: 'line 3, column 7' or 'the model'
    position: str = issue["position"]
    line = column = None
    if position.startswith("line "):
        line_text, column_text = position.removeprefix("line ").split(", column ")
        line, column = int(line_text), int(column_text)
    return Issue(issue["code"], issue["construct"], line, column, issue.get("fix"))
