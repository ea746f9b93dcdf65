"""The ivm models of a dbt manifest (target/manifest.json) and their upstream declarations.

Upstreams are read as ivm_upstreams (macros/change_capture/upstreams.sql) reads them at run
time: every model, seed, source or snapshot the model depends on, its `ivm` meta merged
from the source's meta, the node's config meta and its meta, and the same declaration
problems (IVM030, IVM031) with the same YAML fix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sqlglot import exp
from sqlglot.errors import ParseError

from dbt_ivm.analysis import Upstream

UpstreamKind = Literal["change_log", "append_only"]
_UPSTREAM_TYPES = frozenset({"model", "seed", "source", "snapshot"})
ON_UNSUPPORTED = ("error", "full_rebuild")
ON_CHANGE_FEED_ERROR = ("fail", "rebuild")


class ManifestError(RuntimeError):
    """The manifest is missing or not a dbt manifest; the message says what to do."""


@dataclass(frozen=True)
class UpstreamDeclaration:
    name: str  # source_name.table or the model name, as in run-time messages
    relation: str
    parts: tuple[str, ...]  # lower-case name parts as the relation renders in compiled SQL
    kind: UpstreamKind | None
    unique_key: tuple[str, ...]
    change_log: str | None
    watermark: str | None
    problems: tuple[tuple[str, str], ...]  # (code, fix)
    # 'delta': Delta change data feed; 'detect': only a key declared, so at run time the
    # table must be Delta with its change data feed on (else IVM031); 'ivm': another ivm
    # model, its row key and change feed read at run time
    feed: str | None = None

    def for_analysis(self) -> Upstream:
        return Upstream(self.name, self.parts, self.problems)


@dataclass(frozen=True)
class IvmModel:
    unique_id: str
    name: str
    file: str  # original_file_path, relative to the project directory
    raw_sql: str | None
    compiled_sql: str | None  # None until `dbt compile` (a `dbt parse` manifest has none)
    on_unsupported: str
    file_format: str
    upstreams: tuple[UpstreamDeclaration, ...]
    on_change_feed_error: str = "fail"
    rebuild_above: Any = 0.05  # as configured: a number, or false/None to never rebuild for size


@dataclass(frozen=True)
class Manifest:
    path: Path
    models: tuple[IvmModel, ...]


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
    return Manifest(path, read_models(data))


def read_models(manifest: Mapping[str, Any]) -> tuple[IvmModel, ...]:
    nodes: Mapping[str, Any] = manifest.get("nodes") or {}
    sources: Mapping[str, Any] = manifest.get("sources") or {}
    models = []
    for unique_id, node in nodes.items():
        config = node.get("config") or {}
        if node.get("resource_type") != "model" or config.get("materialized") != "ivm":
            continue
        depends = (node.get("depends_on") or {}).get("nodes") or []
        models.append(
            IvmModel(
                unique_id=unique_id,
                name=node["name"],
                file=node.get("original_file_path") or node.get("path") or "",
                raw_sql=node.get("raw_code"),
                compiled_sql=node.get("compiled_code"),
                on_unsupported=str(config.get("ivm_on_unsupported") or "error"),
                file_format=str(config.get("file_format") or "parquet"),
                upstreams=_upstreams(depends, nodes, sources),
                on_change_feed_error=str(config.get("ivm_on_change_feed_error") or "fail"),
                rebuild_above=config.get("ivm_rebuild_above", 0.05),
            )
        )
    # by name: dbt writes nodes in file-system order, which differs between machines
    return tuple(sorted(models, key=lambda m: m.name))


def _upstreams(
    depends: Sequence[str], nodes: Mapping[str, Any], sources: Mapping[str, Any]
) -> tuple[UpstreamDeclaration, ...]:
    found = []
    for uid in depends:
        node = nodes.get(uid) or sources.get(uid)
        if node is not None and node.get("resource_type") in _UPSTREAM_TYPES:
            found.append(_declaration(node))
    # depends_on lists a model's upstreams in no fixed order
    return tuple(sorted(found, key=lambda u: u.name))


def _declaration(node: Mapping[str, Any]) -> UpstreamDeclaration:
    is_source = node["resource_type"] == "source"
    identifier = node.get("identifier") if is_source else (node.get("alias") or node["name"])
    meta: dict[str, Any] = {}
    if is_source:
        meta.update(_ivm(node.get("source_meta")))
    meta.update(_ivm((node.get("config") or {}).get("meta")))
    meta.update(_ivm(node.get("meta")))
    display = f"{node['source_name']}.{node['name']}" if is_source else node["name"]
    key = meta.get("unique_key")
    keys = (key,) if isinstance(key, str) else tuple(key or ())
    if is_source:
        yaml_where = (
            f"sources: [{{name: {node['source_name']}, tables: [{{name: {node['name']}, meta: {{ivm: {{"
        )
        yaml_end = "}}}]}]"
    else:
        yaml_where = f"models: [{{name: {node['name']}, config: {{meta: {{ivm: {{"
        yaml_end = "}}}}]"
    problems: list[tuple[str, str]] = []
    kind: UpstreamKind | None
    feed = "delta" if meta.get("change_feed") == "delta" and not meta.get("change_log") else None
    if feed is None and keys and not meta.get("change_log") and not meta.get("watermark"):
        feed = "detect"
    ivm_model = node["resource_type"] == "model" and (node.get("config") or {}).get("materialized") == "ivm"
    if not meta and ivm_model:
        # another ivm model, undeclared: its row key (table property dbt_ivm.row_key) and
        # change feed are read at run time (IVM030 there when it records no key)
        kind = "change_log"
        feed = "ivm"
    elif feed:
        # a Delta table with change data feed: its own table_changes() is the change log
        kind = "change_log"
        if not keys:
            problems.append(
                (
                    "IVM030",
                    "a change feed is netted per row key: add `unique_key: [<key column>, ...]` next to "
                    f"change_feed in {yaml_where}change_feed: delta, unique_key: [id]{yaml_end}",
                )
            )
    elif meta.get("change_log"):
        kind = "change_log"
        if not keys:
            problems.append(
                (
                    "IVM030",
                    "a change log is netted per row key: add `unique_key: [<key column>, ...]` next to "
                    f"change_log in {yaml_where}change_log: {meta['change_log']}, unique_key: [id]{yaml_end}",
                )
            )
    elif meta.get("watermark"):
        kind = "append_only"
    else:
        kind = None
        problems.append(
            (
                "IVM031",
                f"declare how changes of {display} are read, e.g. {yaml_where}unique_key: [id], "
                f"change_log: {identifier}_changes{yaml_end}  or, for a Delta table with change data "
                "feed, only its key {ivm: {unique_key: [id]}}, or, for an append-only table, "
                "{ivm: {watermark: loaded_at}}",
            )
        )
    relation = node.get("relation_name") or ".".join(str(p) for p in (node.get("schema"), identifier) if p)
    return UpstreamDeclaration(
        name=display,
        relation=relation,
        parts=relation_parts(relation),
        kind=kind,
        unique_key=keys if kind == "change_log" else (),
        change_log=(
            f"table_changes({relation})"
            if feed in ("delta", "detect")
            else f"{relation} (an ivm model)"
            if feed
            else str(meta["change_log"])
        )
        if kind == "change_log"
        else None,
        watermark=str(meta["watermark"]) if kind == "append_only" else None,
        problems=tuple(problems),
        feed=feed if kind == "change_log" else None,
    )


def _ivm(meta: Any) -> Mapping[str, Any]:
    ivm = meta.get("ivm") if isinstance(meta, Mapping) else None
    return ivm if isinstance(ivm, Mapping) else {}


def relation_parts(relation: str) -> tuple[str, ...]:
    """`catalog.schema.table` (quoted or not) as the lower-case parts the analyzer matches."""
    try:
        table = exp.to_table(relation, dialect="spark")
    except ParseError:
        return (relation.lower(),)
    return tuple(part.name.lower() for part in table.parts)
