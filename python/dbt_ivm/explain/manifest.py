"""The ivm models of a dbt manifest (target/manifest.json) and their upstream declarations.

Upstreams are read by the package's own macro ivm_upstreams (macros/change_capture), run by
the macro runtime on the manifest's graph: the same declarations, problems (IVM030, IVM031)
and YAML fixes as at run time. The macros come from the manifest itself, so `dbt-ivm`
applies the rules of the dbt_ivm version the project installed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dbt_ivm.macro_runtime import MacroError, Runtime

UpstreamKind = Literal["change_log", "append_only"]


class ManifestError(RuntimeError):
    """The manifest is missing or not a dbt manifest; the message says what to do."""


@dataclass(frozen=True)
class UpstreamDeclaration:
    name: str  # source_name.table or the model name, as in run-time messages
    relation: str
    kind: UpstreamKind | None
    unique_key: tuple[str, ...]
    change_log: str | None
    watermark: str | None
    problems: tuple[tuple[str, str], ...]  # (code, fix)
    # 'delta': Delta change data feed; 'detect': only a key declared, so at run time the
    # table must be Delta with its change data feed on (else IVM031); 'ivm': another ivm
    # model, its row key and change feed read at run time; 'diff': changes found by comparing
    # the table with the model's snapshot of it. declared: as ivm_upstreams returned it
    feed: str | None = None
    declared: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class IvmModel:
    unique_id: str
    name: str
    file: str  # original_file_path, relative to the project directory
    raw_sql: str | None
    compiled_sql: str | None  # None until `dbt compile` (a `dbt parse` manifest has none)
    node: Mapping[str, Any] = field(compare=False, repr=False)
    upstreams: tuple[UpstreamDeclaration, ...] = ()
    errors: tuple[str, ...] = ()  # declarations the macros refused

    @property
    def config(self) -> Mapping[str, Any]:
        return self.node.get("config") or {}


@dataclass(frozen=True)
class Manifest:
    path: Path
    models: tuple[IvmModel, ...]
    runtime: Runtime = field(compare=False, repr=False)


def load_manifest(path: Path) -> Manifest:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(
            f"no dbt manifest at {path}: run `dbt compile` in the dbt project first, "
            "or point --manifest (or --project-dir) at it"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ManifestError(f"cannot read the dbt manifest {path}: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict):
        raise ManifestError(f"{path} is not a dbt manifest (no `nodes`): pass target/manifest.json")
    return parse_manifest(data, path)


def parse_manifest(data: Mapping[str, Any], path: Path = Path("target/manifest.json")) -> Manifest:
    try:
        runtime = Runtime.from_manifest(data)
    except MacroError as error:
        raise ManifestError(f"{path}: {error}") from None
    models = [
        _model(unique_id, node, runtime)
        for unique_id, node in (data.get("nodes") or {}).items()
        if node.get("resource_type") == "model" and (node.get("config") or {}).get("materialized") == "ivm"
    ]
    # by name: dbt writes nodes in file-system order, which differs between machines
    return Manifest(path, tuple(sorted(models, key=lambda m: m.name)), runtime)


def _model(unique_id: str, node: Mapping[str, Any], runtime: Runtime) -> IvmModel:
    try:
        declared = runtime.macro("ivm_upstreams")(node)
        errors: tuple[str, ...] = ()
    except MacroError as error:
        declared, errors = [], (str(error),)
    # depends_on lists a model's upstreams in no fixed order
    upstreams = tuple(sorted((_declaration(up) for up in declared), key=lambda u: u.name))
    return IvmModel(
        unique_id=unique_id,
        name=node["name"],
        file=node.get("original_file_path") or node.get("path") or "",
        raw_sql=node.get("raw_code"),
        compiled_sql=node.get("compiled_code"),
        node=node,
        upstreams=upstreams,
        errors=errors,
    )


def _declaration(up: Mapping[str, Any]) -> UpstreamDeclaration:
    relation = up["relation"].render()
    kind = up["kind"]
    feed = up["feed"]
    change_log = None
    if kind == "change_log":
        if feed in ("delta", "detect"):
            change_log = f"table_changes({relation})"
        elif feed == "ivm":
            change_log = f"{relation} (an ivm model)"
        elif feed == "diff":
            change_log = f"snapshots {up['snapshots']['prefix']}<version> of {relation}"
        else:
            change_log = up["change_log"].render()
    return UpstreamDeclaration(
        name=up["name"],
        relation=relation,
        kind=kind,
        unique_key=tuple(up["unique_key"]) if kind == "change_log" else (),
        change_log=change_log,
        watermark=str(up["watermark"]) if kind == "append_only" else None,
        problems=tuple((p["code"], p["fix"]) for p in up["problems"]),
        feed=feed if kind == "change_log" else None,
        declared=up,
    )
