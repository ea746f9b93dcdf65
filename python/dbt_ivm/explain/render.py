"""`dbt-ivm explain` output: a readable report, or JSON for tools (schema_version 1; new keys
may be added, existing ones keep their meaning)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from dbt_ivm.explain.manifest import UpstreamDeclaration
from dbt_ivm.explain.report import Capability, ModelReport

SCHEMA_VERSION = 1
_OUTCOMES = {
    "incremental": "refreshed incrementally",
    "full_rebuild_every_run": "rebuilt in full on every run (ivm_on_unsupported: full_rebuild)",
    "fails": "dbt run fails",
}


# -- text ------------------------------------------------------------------------------------


def render_text(reports: Sequence[ModelReport]) -> str:
    blocks = [_model_text(report) for report in reports]
    return "\n\n".join([*blocks, _summary(reports)]) + "\n"


def _model_text(report: ModelReport) -> str:
    model = report.model
    lines = [f"{model.name}  ({model.file})", f"  class: {report.model_class}"]
    lines.append(f"  dbt run: {_OUTCOMES[report.outcome]}")
    if report.analysis and report.analysis.key:
        lines.append(f"  slice key: {', '.join(report.analysis.key)} (keyed recompute)")
    lines += [f"  note: {note}" for note in (report.analysis.notes if report.analysis else ())]
    lines += [f"  error: {error}" for error in report.errors]
    if model.upstreams:
        lines.append("  upstreams:")
        lines += _table([[u.name, u.relation, _declared(u)] for u in model.upstreams], indent=4)
    if report.capabilities:
        rows = [["capability", "possible", "how" if not report.restrictions else "how / why not"]]
        rows += [[_tier(c), "yes" if c.possible else "no", c.how] for c in report.capabilities]
        lines += _table(rows, indent=2)
    if report.restrictions:
        lines.append("  restrictions:")
        for r in report.restrictions:
            lines.append(f"    {r.code} {r.what}: {r.construct} at {r.where}")
            if r.why:
                lines.append(f"      why: {r.why}")
            lines.append(f"      fix: {r.fix}")
    return "\n".join(lines)


def _tier(capability: Capability) -> str:
    if capability.tier == "inserts":
        return "incremental after inserts"
    if capability.tier == "any_dml":
        return f"incremental after any DML on {capability.upstream}"
    return "full rebuild"


def _declared(upstream: UpstreamDeclaration) -> str:
    if upstream.kind == "change_log":
        key = ", ".join(upstream.unique_key) or "none"
        if upstream.feed == "detect":
            return (
                f"Delta change data feed {upstream.change_log}, row key {key} (checked at run time: "
                "a Delta table with delta.enableChangeDataFeed=true, else IVM031)"
            )
        if upstream.feed == "ivm":
            return (
                "another ivm model: its row key (table property dbt_ivm.row_key) and changes are read "
                "at run time (its change data feed, or for parquet its own change log)"
            )
        if upstream.feed == "delta":
            return f"Delta change data feed {upstream.change_log}, row key {key}"
        if upstream.feed == "diff":
            return (
                f"diff capture, row key {key}: each run compares the table with the model's last "
                f"snapshot of it ({upstream.change_log})"
            )
        return f"change log {upstream.change_log}, row key {key}"
    if upstream.kind == "append_only":
        return f"append-only, watermark {upstream.watermark}"
    return "no change feed declared"


def _table(rows: list[list[str]], indent: int) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    pad = " " * indent
    return [
        pad + "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in rows
    ]


def _summary(reports: Sequence[ModelReport]) -> str:
    counts = {outcome: sum(r.outcome == outcome for r in reports) for outcome in _OUTCOMES}
    return (
        f"{len(reports)} ivm model{'' if len(reports) == 1 else 's'}: {counts['incremental']} incremental, "
        f"{counts['full_rebuild_every_run']} rebuilt in full on every run, {counts['fails']} failing. "
        "Change logs themselves (IVM032) are checked at run time."
    )


# -- JSON ------------------------------------------------------------------------------------


def render_json(reports: Sequence[ModelReport], manifest: str) -> str:
    document = {
        "schema_version": SCHEMA_VERSION,
        "manifest": manifest,
        "models": [_model_json(report) for report in reports],
        "failing": [r.model.name for r in reports if r.fails],
    }
    return json.dumps(document, indent=2) + "\n"


def _model_json(report: ModelReport) -> dict[str, Any]:
    model = report.model
    return {
        "name": model.name,
        "unique_id": model.unique_id,
        "file": model.file,
        "class": report.model_class,
        "shape": report.analysis.shape if report.analysis else None,
        "outcome": report.outcome,
        "on_unsupported": report.on_unsupported,
        "refresh": asdict(report.refresh) if report.refresh else None,
        "key": list(report.analysis.key) if report.analysis else [],
        "notes": list(report.analysis.notes) if report.analysis else [],
        "upstreams": [
            {
                "name": u.name,
                "relation": u.relation,
                "kind": u.kind,
                "unique_key": list(u.unique_key),
                "change_log": u.change_log,
                "feed": u.feed,
                "watermark": u.watermark,
            }
            for u in model.upstreams
        ],
        "capabilities": [
            {
                "tier": c.tier,
                "upstream": c.upstream,
                "possible": c.possible,
                "how": c.how,
                "codes": list(c.codes),
            }
            for c in report.capabilities
        ],
        "restrictions": [
            {
                "code": r.code,
                "what": r.what,
                "construct": r.construct,
                "line": r.line,
                "column": r.column,
                "why": r.why,
                "fix": r.fix,
            }
            for r in report.restrictions
        ],
        "errors": list(report.errors),
    }
