"""`dbt-ivm explain` on the integration project (integration_tests/) after a real
`dbt compile`, pinned as snapshots: the text report and the JSON in tests/snapshots/.

After changing the models of integration_tests/ or the report, regenerate both with

    UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_explain_snapshots.py

and review `git diff tests/snapshots/`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from dbt_ivm.cli import main
from dbt_ivm.runner import DbtProject

REPO_ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = REPO_ROOT / "tests/snapshots"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1"


@pytest.fixture(scope="module")
def compiled_project(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of integration_tests/ compiled in this process, on the shared Spark session."""
    project = tmp_path_factory.mktemp("explain") / "integration_tests"
    shutil.copytree(
        REPO_ROOT / "integration_tests",
        project,
        ignore=shutil.ignore_patterns(
            "target",
            "logs",
            "dbt_packages",
            "spark-warehouse",
            "metastore_db",
            "derby.log",
            "package-lock.yml",
        ),
    )
    (project / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    dbt = DbtProject(project, project)
    dbt.invoke("deps")
    # the ivm models are all explain reads; no relation cache needed to compile them
    dbt.invoke("compile", "--select", "config.materialized:ivm", "--no-populate-cache")
    return project


@pytest.mark.parametrize(("fmt", "snapshot"), [("text", "explain.txt"), ("json", "explain.json")])
def test_explain_integration_project(
    compiled_project: Path,
    fmt: str,
    snapshot: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(compiled_project)  # paths in the report are relative to the project
    code = main(["explain", "--format", fmt])
    out = capsys.readouterr().out
    path = SNAPSHOTS / snapshot
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(out)
    assert path.exists(), f"no snapshot {path}: run with UPDATE_SNAPSHOTS=1 to create it"
    assert out == path.read_text(), (
        f"explain output differs from {path}; if intended, regenerate (see docstring)"
    )
    # every model of the demo project builds, so explain must accept every one
    assert code == 0
    if fmt == "json":
        assert json.loads(out)["failing"] == []
