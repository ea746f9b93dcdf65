"""What `dbt-ivm explain` says about one ivm model: its class, what a refresh can do after
inserts, after any change on each upstream, and by full rebuild (Oracle's three tiers of
EXPLAIN_MVIEW), and every restriction with its position and fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dbt_ivm.analysis import CATALOG, Analysis, Issue, Refresh, analyze
from dbt_ivm.explain.manifest import ON_CHANGE_FEED_ERROR, ON_UNSUPPORTED, IvmModel

ModelClass = Literal[
    "join-only",
    "aggregate",
    "aggregate over joins",
    "distinct",
    "recompute-affected-keys",
    "not maintainable",
    "not compiled",
]
Tier = Literal["inserts", "any_dml", "full_rebuild"]
Outcome = Literal["incremental", "full_rebuild_every_run", "fails"]

NOT_COMPILED = "no compiled SQL in the manifest: run dbt compile first"
_CLASSES: dict[str, ModelClass] = {
    "join_only": "join-only",
    "aggregate": "aggregate",
    "aggregate_over_joins": "aggregate over joins",
    "distinct": "distinct",
}
_HOW_INSERTS = {
    "append": "insert the rows the new upstream rows produce",
    "merge": "merge the new rows into their groups (counts, sums, least/greatest)",
    "recompute": "recompute the groups the new rows enter",
}
_HOW_ANY = {
    "rewrite": "delete the rows that came from changed {up} rows, insert the rows of their new images",
    "merge": "merge signed per-group deltas of the changed {up} rows",
    "recompute": "recompute the groups that changed {up} rows leave or enter",
}


@dataclass(frozen=True)
class Capability:
    tier: Tier
    upstream: str | None  # the upstream of an any_dml row
    possible: bool
    how: str  # how a refresh does it, or why it cannot
    codes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Restriction:
    """One restriction of the model, with the catalog's words."""

    code: str
    what: str
    construct: str
    line: int | None
    column: int | None
    why: str
    fix: str

    @property
    def where(self) -> str:
        if self.line is None:
            return "the model"
        return f"line {self.line}, column {self.column} of the compiled SQL"


@dataclass(frozen=True)
class ModelReport:
    model: IvmModel
    model_class: ModelClass
    analysis: Analysis | None  # None when there is no compiled SQL
    capabilities: tuple[Capability, ...]
    restrictions: tuple[Restriction, ...]
    errors: tuple[str, ...]  # problems that are not restrictions: no compiled SQL, bad config

    @property
    def refresh(self) -> Refresh | None:
        return self.analysis.refresh if self.analysis else None

    @property
    def outcome(self) -> Outcome:
        if self.errors:
            return "fails"
        if self.restrictions:
            return "full_rebuild_every_run" if self.model.on_unsupported == "full_rebuild" else "fails"
        return "incremental"

    @property
    def fails(self) -> bool:
        return self.outcome == "fails"


def explain_model(model: IvmModel) -> ModelReport:
    errors = _config_errors(model)
    if model.compiled_sql is None:
        return ModelReport(model, "not compiled", None, (), (), (NOT_COMPILED, *errors))
    analysis = analyze(model.compiled_sql, [u.for_analysis() for u in model.upstreams])
    restrictions = tuple(_restriction(issue) for issue in analysis.issues)
    if analysis.refresh is None:
        model_class: ModelClass = "not maintainable"
    elif analysis.refresh.inserts == "recompute":
        model_class = "recompute-affected-keys"
    else:
        model_class = _CLASSES[analysis.shape]
    capabilities = _capabilities(model, analysis)
    return ModelReport(model, model_class, analysis, capabilities, restrictions, errors)


def _config_errors(model: IvmModel) -> tuple[str, ...]:
    # the same checks and words as ivm_model_settings at run time
    errors = []
    if model.on_unsupported not in ON_UNSUPPORTED:
        errors.append(
            f"Model '{model.name}': ivm_on_unsupported must be 'error' or 'full_rebuild', "
            f"got '{model.on_unsupported}'."
        )
    if model.file_format not in ("parquet", "delta"):
        errors.append(
            f"Model '{model.name}': materialized='ivm' stores tables as parquet or delta; "
            f"file_format='{model.file_format}' is not supported. Remove file_format or set it "
            "to 'parquet' or 'delta'."
        )
    if model.on_change_feed_error not in ON_CHANGE_FEED_ERROR:
        errors.append(
            f"Model '{model.name}': ivm_on_change_feed_error must be 'fail' or 'rebuild', "
            f"got '{model.on_change_feed_error}'."
        )
    threshold = model.rebuild_above
    if (
        threshold is not None
        and threshold is not False
        and (isinstance(threshold, bool) or not isinstance(threshold, int | float) or threshold <= 0)
    ):
        errors.append(
            f"Model '{model.name}': ivm_rebuild_above must be a positive number (changed rows as a "
            "fraction of the changed upstreams' rows, e.g. 0.05) or false to never rebuild for size, "
            f"got '{threshold}'."
        )
    return tuple(errors)


def _restriction(issue: Issue) -> Restriction:
    entry = CATALOG[issue.code]
    return Restriction(
        issue.code, entry.what, issue.construct, issue.line, issue.column, entry.why, issue.fix or entry.fix
    )


def _capabilities(model: IvmModel, analysis: Analysis) -> tuple[Capability, ...]:
    read = model.upstreams
    refresh = analysis.refresh
    if refresh is None:
        codes = analysis.codes
        why = "cannot be maintained incrementally: " + ", ".join(codes)
        rebuild = (
            "on every run (ivm_on_unsupported: full_rebuild)"
            if model.on_unsupported == "full_rebuild"
            else "only with ivm_on_unsupported: full_rebuild; until then dbt run fails"
        )
        return (
            Capability("inserts", None, False, why, codes),
            *(Capability("any_dml", u.name, False, why, codes) for u in read),
            Capability("full_rebuild", None, True, rebuild),
        )
    rows = [Capability("inserts", None, True, _HOW_INSERTS[refresh.inserts])]
    for upstream in read:
        if upstream.kind == "append_only":
            how = (
                f"append-only upstream (watermark {upstream.watermark}): updates and deletes are never "
                "read; declare a change_log and unique_key to absorb them"
            )
            rows.append(Capability("any_dml", upstream.name, False, how))
        else:
            rows.append(
                Capability("any_dml", upstream.name, True, _HOW_ANY[refresh.any].format(up=upstream.name))
            )
    rows.append(
        Capability("full_rebuild", None, True, "dbt run --full-refresh, or when the definition changes")
    )
    return tuple(rows)
