"""dbt 1.10+ conventions: custom config keys live in `meta`, and `meta` in `config`. dbt
checks project files against its JSON schemas and warns (CustomKeyInConfigDeprecation,
PropertyMovedToConfigDeprecation, ...) only for some adapters, databricks among them but not
spark: these tests turn that validation on for spark, as dbt runs it for databricks.

`dbt parse` of the integration project, with those warnings as errors, and the README's YAML
examples against dbt's own schemas. Neither opens a Spark connection."""

from __future__ import annotations

import contextvars
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from dbt import deprecations
from dbt.adapters.spark.connections import SparkConnectionManager
from dbt.jsonschemas import jsonschemas
from dbt_common.context import get_invocation_context, set_invocation_context

from dbt_ivm.explain.manifest import parse_manifest
from dbt_ivm.runner import DbtProject
from tests.support import REPO_ROOT, copy_integration_project

WARNINGS = (
    "CustomKeyInConfigDeprecation",
    "CustomKeyInObjectDeprecation",
    "PropertyMovedToConfigDeprecation",
)
# the same deprecations by the names dbt.deprecations.warn takes
NAMES = (
    "custom-key-in-config-deprecation",
    "custom-key-in-object-deprecation",
    "property-moved-to-config-deprecation",
)


@pytest.fixture
def validating(monkeypatch: pytest.MonkeyPatch) -> None:
    """dbt's YAML validation on for spark; opening a Spark connection fails the test."""
    monkeypatch.setattr(
        jsonschemas, "_JSONSCHEMA_SUPPORTED_ADAPTERS", jsonschemas._JSONSCHEMA_SUPPORTED_ADAPTERS | {"spark"}
    )

    def no_spark(cls: type, connection: Any) -> Any:
        raise AssertionError("dbt opened a Spark connection")

    monkeypatch.setattr(SparkConnectionManager, "open", classmethod(no_spark))


def test_integration_project_parses_without_config_deprecations(tmp_path: Path, validating: None) -> None:
    """The integration project, plus a model over a seed and a table model declared with
    `config: {meta: {ivm: ...}}` and its own ivm_* key in `config(meta=...)`: no deprecation,
    and the declarations and keys reach the macros that read them (dbt-ivm runs them on the
    manifest as dbt run does on the graph)."""
    project = copy_integration_project(tmp_path)
    seeds = yaml.safe_load((project / "seeds/seeds.yml").read_text())
    orders = next(s for s in seeds["seeds"] if s["name"] == "orders")
    orders["config"]["meta"] = {"ivm": {"unique_key": ["order_id"], "change_feed": "delta"}}
    (project / "seeds/seeds.yml").write_text(yaml.safe_dump(seeds))
    (project / "models/orders_table.sql").write_text(
        "{{ config(materialized='table') }}\nselect * from {{ ref('orders') }}\n"
    )
    (project / "models/conventions.yml").write_text(
        "version: 2\nmodels:\n  - {name: orders_table, config: {meta: {ivm: {unique_key: [order_id]}}}}\n"
    )
    (project / "models/seed_facts.sql").write_text(
        "{{ config(materialized='ivm', meta={'ivm_rebuild_above': 0.2}) }}\n"
        "select o.order_id, t.status from {{ ref('orders') }} o\n"
        "join {{ ref('orders_table') }} t on o.order_id = t.order_id\n"
    )
    dbt = DbtProject(project, project)
    dbt.invoke("deps", "--quiet")
    # every occurrence: dbt shows a deprecation once per process unless asked for all
    errors = json.dumps({"error": list(WARNINGS)})
    dbt.invoke("parse", "--no-partial-parse", "--show-all-deprecations", "--warn-error-options", errors)

    manifest = parse_manifest(json.loads((project / "target/manifest.json").read_text()))
    models = {m.name: m for m in manifest.models}
    assert {
        name: [(u.name, u.problems) for u in m.upstreams if u.problems] for name, m in models.items()
    } == {name: [] for name in models}
    declared = {u.name: (u.kind, u.feed, u.unique_key) for u in models["seed_facts"].upstreams}
    assert declared == {
        "orders": ("change_log", "delta", ("order_id",)),
        "orders_table": ("change_log", "detect", ("order_id",)),
    }
    watermarked = {u.name: u.kind for u in models["customer_page_views"].upstreams}
    assert watermarked["shop.page_views"] == "append_only"
    settings: dict[str, Any] = {}
    for name, model in models.items():
        with manifest.runtime.bound(model.config):
            settings[name] = manifest.runtime.macro("_ivm_model_settings")(model.node)["rebuild_above"]
    # +meta of dbt_project.yml (false: never rebuild for size), overridden by the model's config(meta=...)
    assert settings == {**{name: None for name in models}, "seed_facts": 0.2}


def yaml_blocks(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(first line, parsed document) of each ```yaml block."""
    return [
        (block.split("\n", 1)[0], yaml.safe_load(block))
        for block in re.findall(r"^```yaml\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)
    ]


def test_readme_yaml_examples_follow_the_conventions(
    monkeypatch: pytest.MonkeyPatch, validating: None
) -> None:
    """Each README example of dbt_project.yml or of a properties file is checked against
    dbt's JSON schema the way dbt checks the files it parses."""
    warned: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(deprecations, "warn", lambda name, *args, **kwargs: warned.append((name, kwargs)))
    checked = []
    for first_line, document in yaml_blocks((REPO_ROOT / "README.md").read_text()):
        if first_line == "# dbt_project.yml":
            checked.append((jsonschemas.project_schema(), document, "dbt_project.yml"))
        elif {"sources", "models", "seeds", "snapshots"} & set(document):
            checked.append((jsonschemas.resources_schema(), document, "models/schema.yml"))

    def validate() -> None:
        # as in a dbt invocation on spark (outside one, dbt has no invocation context)
        set_invocation_context({})
        get_invocation_context().uses_adapter("spark")
        for schema, document, file in checked:
            jsonschemas.jsonschema_validate(schema, document, file)

    contextvars.copy_context().run(validate)
    assert [w for w in warned if w[0] in NAMES] == []
    # the upstream declarations, the ivm_* keys in dbt_project.yml and YAML, the hooks, dbt test
    assert len(checked) >= 7


def test_the_version_is_released_in_the_changelog_and_pinned_in_the_readme() -> None:
    version = yaml.safe_load((REPO_ROOT / "dbt_project.yml").read_text())["version"]
    assert f'\nversion = "{version}"\n' in (REPO_ROOT / "pyproject.toml").read_text()
    changelog = (REPO_ROOT / "CHANGELOG.md").read_text()
    assert f"\n## {version}\n" in changelog, f"CHANGELOG.md has no section for version {version}"
    assert f"revision: v{version}" in (REPO_ROOT / "README.md").read_text()
