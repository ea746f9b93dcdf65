"""The README's restriction catalog is the catalog of the analysis macros, its
`dbt-ivm explain` sample is the command's output, and the pre-commit hook it documents is
the one published in .pre-commit-hooks.yaml.

After changing ivm_restriction_catalog, rewrite the README table with

    UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_readme.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from dbt_ivm.cli import main
from dbt_ivm.explain.analysis import catalog, markdown_table
from tests.manifests import package_runtime, shop_manifest

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- restriction-catalog:start -->\n", "<!-- restriction-catalog:end -->"


def test_readme_catalog_table_is_generated_from_the_catalog() -> None:
    text = README.read_text()
    before, rest = text.split(START)
    table, after = rest.split(END)
    expected = markdown_table(catalog(package_runtime())) + "\n"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        README.write_text(before + START + expected + END + after)
        table = expected
    assert table == expected, "README restriction catalog is stale: regenerate it (see this file's docstring)"


def test_readme_explain_sample_is_the_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shop_manifest().write(tmp_path / "target/manifest.json")
    main(["explain", "--project-dir", str(tmp_path), "revenue", "bad_facts"])
    assert f"```text\n{capsys.readouterr().out}```\n" in README.read_text()


def test_readme_names_the_published_hook() -> None:
    hooks = yaml.safe_load((README.parent / ".pre-commit-hooks.yaml").read_text())
    assert [(h["id"], h["entry"], h["language"]) for h in hooks] == [
        ("dbt-ivm-check", "dbt-ivm check", "python")
    ]
    assert "      - id: dbt-ivm-check\n" in README.read_text()
