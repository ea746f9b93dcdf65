"""Small dbt manifests for the CLI tests: only the fields `dbt-ivm` reads, shaped as
`dbt compile` writes them (dbt-spark renders relations as schema.table)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt_ivm.explain.analysis import CatalogEntry, catalog
from dbt_ivm.macro_runtime import Runtime

PROJECT = "shop_project"
MACROS = Path(__file__).resolve().parents[1] / "macros"


@functools.cache
def package_runtime() -> Runtime:
    return Runtime.from_directory(MACROS)


def restriction(code: str) -> CatalogEntry:
    """A code's entry in the package's restriction catalog (the macro)."""
    return catalog(package_runtime())[code]


def package_macros() -> dict[str, Any]:
    """The package's macro files as manifest entries (dbt writes one per macro; the runtime
    reads every macro of an entry)."""
    return {
        f"macro.dbt_ivm.{path.stem}": {"package_name": "dbt_ivm", "macro_sql": path.read_text()}
        for path in sorted(MACROS.rglob("*.sql"))
    }


@dataclass
class ManifestBuilder:
    nodes: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, Any] = field(default_factory=dict)

    def source(self, table: str, ivm: dict[str, Any] | None, source: str = "shop") -> str:
        uid = f"source.{PROJECT}.{source}.{table}"
        self.sources[uid] = {
            "resource_type": "source",
            "unique_id": uid,
            "source_name": source,
            "name": table,
            "identifier": table,
            "schema": "raw",
            "database": None,
            "relation_name": f"raw.{table}",
            "source_meta": {},
            "meta": {"ivm": ivm} if ivm is not None else {},
            "config": {"meta": {"ivm": ivm} if ivm is not None else {}},
        }
        return uid

    def model(
        self,
        name: str,
        compiled: str | None,
        depends_on: list[str],
        raw: str | None = None,
        materialized: str = "ivm",
        **config: Any,
    ) -> str:
        uid = f"model.{PROJECT}.{name}"
        self.nodes[uid] = {
            "resource_type": "model",
            "unique_id": uid,
            "name": name,
            "alias": name,
            "schema": "analytics",
            "relation_name": f"analytics.{name}",
            "original_file_path": f"models/{name}.sql",
            "raw_code": raw
            if raw is not None
            else f"{{{{ config(materialized='{materialized}') }}}}\n{compiled}",
            "compiled_code": compiled,
            "depends_on": {"nodes": depends_on},
            "config": {"materialized": materialized, "meta": {}, **config},
            "meta": {},
        }
        if compiled is None:
            del self.nodes[uid]["compiled_code"]
        return uid

    def manifest(self) -> dict[str, Any]:
        return {"metadata": {}, "nodes": self.nodes, "sources": self.sources, "macros": package_macros()}

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.manifest()))
        return path

    def write_model_files(self, project: Path) -> None:
        """Each model's raw_code as its file, as dbt read it."""
        for node in self.nodes.values():
            file = project / node["original_file_path"]
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(node["raw_code"] + "\n")


def shop_manifest() -> ManifestBuilder:
    """A good join-only model, a bad one (outer join, undeclared upstream), an aggregate, a
    full_rebuild fallback and one dbt has not compiled yet."""
    m = ManifestBuilder()
    orders = m.source("orders", {"unique_key": ["order_id"], "change_log": "orders_changes"})
    customers = m.source("customers", {"unique_key": "customer_id", "change_log": "customers_changes"})
    visits = m.source("visits", {"watermark": "loaded_at"})
    legacy = m.source("legacy", None)
    m.model(
        "order_facts",
        "select o.order_id, c.region\nfrom raw.orders o\n"
        "join raw.customers c on o.customer_id = c.customer_id",
        [orders, customers],
    )
    m.model(
        "bad_facts",
        "select o.order_id, l.code\nfrom raw.orders o\nleft join raw.legacy l on o.order_id = l.order_id",
        [orders, legacy],
    )
    m.model(
        "revenue",
        "select c.region, sum(o.amount) as revenue, max(o.amount) as top\nfrom raw.orders o\n"
        "join raw.customers c on o.customer_id = c.customer_id\ngroup by c.region",
        [orders, customers],
    )
    m.model(
        "visit_counts",
        "select v.page, count(distinct v.visitor) as visitors\nfrom raw.visits v\ngroup by v.page",
        [visits],
    )
    m.model(
        "fallback",
        "select o.order_id, rand() as r from raw.orders o",
        [orders],
        ivm_on_unsupported="full_rebuild",
    )
    m.model("fresh", None, [orders], raw="{{ config(materialized='ivm') }}\nselect * from {{ ref('x') }}")
    m.model("plain_view", "select 1 as one", [], materialized="view")
    return m
