"""The published pre-commit hook, installed the way users get it: `pre-commit try-repo` on
this repository (uncommitted changes included) builds the hook's own virtualenv from
pyproject.toml (sqlglot and pyyaml only) and runs `dbt-ivm check` on the files given.

The dbt project under test lives in dbt/ of a throw-away git repository, named by
.dbt-checkpoint.yaml as dbt-checkpoint's hooks expect; its manifest is hand-made
(tests/manifests.py), so no dbt or Spark runs here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.manifests import ManifestBuilder, restriction

REPO_ROOT = Path(__file__).resolve().parents[1]
PRE_COMMIT = Path(sys.executable).parent / "pre-commit"


@pytest.fixture(scope="module")
def user_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("user_repo")
    m = ManifestBuilder()
    orders = m.source("orders", {"unique_key": ["order_id"], "change_log": "orders_changes"})
    customers = m.source("customers", {"unique_key": ["customer_id"], "change_log": "customers_changes"})
    select = "select o.order_id, c.region\nfrom raw.orders o\n"
    m.model("good", select + "join raw.customers c on o.customer_id = c.customer_id", [orders, customers])
    m.model("bad", select + "full join raw.customers c on o.customer_id = c.customer_id", [orders, customers])
    m.write(repo / "dbt/target/manifest.json")
    m.write_model_files(repo / "dbt")
    (repo / ".dbt-checkpoint.yaml").write_text("version: 1\ndbt-project-dir: dbt\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    return repo


def test_hook_passes_a_good_model_and_fails_a_bad_one(
    user_repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path_factory.mktemp("pre_commit_home"))}
    env.pop("GIT_DIR", None)

    def try_repo(model: str) -> subprocess.Popen[str]:
        command = [str(PRE_COMMIT), "try-repo", str(REPO_ROOT), "dbt-ivm-check", "--files", model]
        return subprocess.Popen(
            command, cwd=user_repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    # each try-repo builds its own hook environment: run both at once
    good, bad = try_repo("dbt/models/good.sql"), try_repo("dbt/models/bad.sql")
    good_out, bad_out = good.communicate(timeout=300)[0], bad.communicate(timeout=300)[0]
    assert good.returncode == 0, good_out
    assert "dbt-ivm check" in good_out and "Passed" in good_out
    assert bad.returncode == 1, bad_out
    expected = (
        "dbt/models/bad.sql: IVM020 outer join: FULL OUTER JOIN at line 3, column 1 of the compiled SQL; "
        f"fix: {restriction('IVM020').fix}"
    )
    assert expected in bad_out.splitlines(), bad_out
