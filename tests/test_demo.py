"""The quick-start demo runs end to end on a copy of integration_tests/ (CI guards it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dbt_ivm import demo

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_demo_builds_refreshes_and_tests(spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "integration_tests"
    shutil.copytree(
        REPO_ROOT / "integration_tests",
        project,
        ignore=shutil.ignore_patterns("target", "logs", "dbt_packages", "spark-warehouse", "metastore_db"),
    )
    (project / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    assert demo.main(["--project-dir", str(project)]) == 0
    out = capsys.readouterr().out
    log = out[out.index("==> Refresh log") :]
    for model in ("order_facts", "line_facts", "customer_page_views", "revenue_by_region", "sku_sales"):
        lines = [line.split() for line in log.splitlines() if line.startswith(model)]
        assert [line[1] for line in lines] == ["full", "no-op", "incremental"], lines
