"""What `dbt-ivm explain` says about one ivm model: its class, what a refresh can do after
inserts, after any change on each upstream, and by full rebuild (Oracle's three tiers of
EXPLAIN_MVIEW), and every restriction with its position and fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dbt_ivm.explain.analysis import Analysis, CatalogEntry, Issue, Refresh, analyze, catalog
from dbt_ivm.explain.manifest import IvmModel
from dbt_ivm.macro_runtime import MacroError, Runtime

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
    # as _ivm_model_settings reads it; None when the model's settings are invalid
    on_unsupported: str | None = None

    @property
    def refresh(self) -> Refresh | None:
        return self.analysis.refresh if self.analysis else None

    @property
    def outcome(self) -> Outcome:
        if self.errors:
            return "fails"
        if self.restrictions:
            return "full_rebuild_every_run" if self.on_unsupported == "full_rebuild" else "fails"
        return "incremental"

    @property
    def fails(self) -> bool:
        return self.outcome == "fails"


def explain_model(model: IvmModel, runtime: Runtime) -> ModelReport:
    on_unsupported, unique_key, config_errors = _settings(model, runtime)
    errors = (*model.errors, *config_errors)
    if model.compiled_sql is None:
        return ModelReport(model, "not compiled", None, (), (), (NOT_COMPILED, *errors), on_unsupported)
    try:
        analysis = analyze(runtime, model.compiled_sql, [u.declared for u in model.upstreams], unique_key)
    except MacroError as error:
        failed = f"the analysis failed: {error}"
        return ModelReport(model, "not maintainable", None, (), (), (*errors, failed), on_unsupported)
    entries = catalog(runtime)
    restrictions = tuple(_restriction(issue, entries) for issue in analysis.issues)
    if analysis.refresh is None:
        model_class: ModelClass = "not maintainable"
    elif analysis.refresh.inserts == "recompute":
        model_class = "recompute-affected-keys"
    else:
        model_class = _CLASSES[analysis.shape]
    capabilities = _capabilities(model, analysis, on_unsupported)
    return ModelReport(model, model_class, analysis, capabilities, restrictions, errors, on_unsupported)


def _settings(model: IvmModel, runtime: Runtime) -> tuple[str | None, list[str] | None, tuple[str, ...]]:
    """(ivm_on_unsupported, unique_key, config errors) by the materialization's own config
    checks (the first one that fails)."""
    try:
        with runtime.bound(model.config):
            settings = runtime.macro("_ivm_model_settings")(model.node)
    except MacroError as error:
        return None, None, (str(error),)
    return settings["on_unsupported"], settings.get("unique_key"), ()


def _restriction(issue: Issue, entries: dict[str, CatalogEntry]) -> Restriction:
    entry = entries[issue.code]
    return Restriction(
        issue.code, entry.what, issue.construct, issue.line, issue.column, entry.why, issue.fix or entry.fix
    )


def _capabilities(model: IvmModel, analysis: Analysis, on_unsupported: str | None) -> tuple[Capability, ...]:
    read = model.upstreams
    refresh = analysis.refresh
    if refresh is None:
        codes = analysis.codes
        why = "cannot be maintained incrementally: " + ", ".join(codes)
        rebuild = (
            "on every run (ivm_on_unsupported: full_rebuild)"
            if on_unsupported == "full_rebuild"
            else "only with ivm_on_unsupported: full_rebuild; until then dbt run fails"
        )
        return (
            Capability("inserts", None, False, why, codes),
            *(Capability("any_dml", u.name, False, why, codes) for u in read),
            Capability("full_rebuild", None, True, rebuild),
        )
    # the keyed path: slices of its key (macros/analysis/keyed.sql)
    slices = f"recompute the slices of {', '.join(analysis.key)} that {{up}} rows touch, from the definition"
    inserts = slices.format(up="new upstream") if analysis.key else _HOW_INSERTS[refresh.inserts]
    how_any = slices.replace("{up}", "changed {up}") if analysis.key else _HOW_ANY[refresh.any]
    rows = [Capability("inserts", None, True, inserts)]
    for upstream in read:
        if upstream.kind == "append_only":
            how = (
                f"append-only upstream (watermark {upstream.watermark}): updates and deletes are never "
                "read; declare a change_log and unique_key to absorb them"
            )
            rows.append(Capability("any_dml", upstream.name, False, how))
        else:
            rows.append(
                Capability(
                    "any_dml",
                    upstream.name,
                    True,
                    how_any.format(up=upstream.name),
                )
            )
    rows.append(
        Capability("full_rebuild", None, True, "dbt run --full-refresh, or when the definition changes")
    )
    return tuple(rows)
