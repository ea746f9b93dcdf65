"""Two `dbt run`s of the same ivm models at once through a Spark Thrift Server (a scheduler
retry overlapping a running job), with random overlap, 2 trials: one without and one with
ivm_lease_wait: a join stored as Delta and an aggregate stored as parquet, over Delta
upstreams with change data feed.

After each trial every table equals its definition, no refresh is left interrupted, and
each run's outcome per model is the documented one (README, "Concurrent runs"): with
ivm_lease_wait the second run waits for the first and then refreshes (both succeed, both
logged); without it, the run that finds the lease held fails naming the holder and logs
nothing for that model.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dbt_ivm.spark import ThriftServer
from tests.kill_worker import SCHEMA, commit_batch, differences, setup_upstreams, thrift_query, write_project

LEASE = "ivm_lease_wait=var('lease_wait', 0)"
JOIN = "from {{ source('shop', 'orders') }} o join {{ source('shop', 'customers') }} c on o.customer_id=c.id"
MODELS = {
    "facts": f"""\
        {{{{ config(materialized='ivm', file_format='delta', {LEASE}) }}}}
        select o.id, o.amount, c.id as customer_id, c.region
        {JOIN}
        """,
    "by_region": f"""\
        {{{{ config(materialized='ivm', {LEASE}) }}}}
        select c.region, count(*) as n, sum(o.amount) as total
        {JOIN}
        group by c.region
        """,
}
DBT = [sys.executable, "-c", "from dbt.cli.main import cli; cli()"]


def start_run(project: Path, name: str, wait: int) -> subprocess.Popen[bytes]:
    """`dbt run` in its own process, with its own target and log folders."""
    args = ["run", "--select", *MODELS, "--project-dir", str(project), "--profiles-dir", str(project)]
    args += ["--vars", f"{{lease_wait: {wait}}}", "--target-path", f"target_{name}"]
    args += ["--log-path", str(project / f"logs_{name}")]
    return subprocess.Popen([*DBT, *args], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def outcome(project: Path, name: str, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    output = proc.communicate(timeout=600)[0].decode()
    results = json.loads((project / f"target_{name}" / "run_results.json").read_text())
    return {
        "invocation": results["metadata"]["invocation_id"],
        "status": {r["unique_id"].rsplit(".", 1)[-1]: r["status"] for r in results["results"]},
        "messages": {r["unique_id"].rsplit(".", 1)[-1]: r.get("message") or "" for r in results["results"]},
        "output": output,
    }


def test_two_runs_at_once(tmp_path: Path, thrift: ThriftServer) -> None:
    address = f"{thrift.host}:{thrift.port}"
    q = thrift_query(address)
    pick = random.Random(20261125)
    project = tmp_path / "project"
    write_project(project, address, MODELS, lease_timeout=3600)
    setup_upstreams(q, pick)
    subprocess.run([*DBT, "deps", "--project-dir", str(project), "--profiles-dir", str(project)], check=True)
    first = outcome(project, "setup", start_run(project, "setup", 0))
    assert set(first["status"].values()) == {"success"}, first["output"]
    seen = {"waited": 0, "refused": 0}
    for trial in range(2):
        commit_batch(q, pick)
        wait = (0, 120)[trial % 2]
        a = start_run(project, "a", wait)
        time.sleep(pick.uniform(0.0, 3.0))
        b = start_run(project, "b", wait)
        runs = [outcome(project, "a", a), outcome(project, "b", b)]
        log = q(f"select model, refresh_id, status from {SCHEMA}.__ivm_refresh_log")
        detail = f"trial {trial}, wait {wait}: " + "\n".join(r["output"][-3000:] for r in runs)
        for model in MODELS:
            # this session cached the parquet table's previous generation (another session
            # switched its location): Spark's rule for tables rewritten elsewhere
            q(f"refresh table {SCHEMA}.{model}")
            assert differences(q, model) == [], detail
            for run in runs:
                refresh_id = f"{run['invocation']}:model.ivm_kills.{model}"
                mine = {r["status"] for r in log if r["refresh_id"] == refresh_id}
                if run["status"][model] == "success":
                    # a refresh ends with its 'success' row; a no-op writes none
                    assert mine <= {"started", "success"} and (not mine or "success" in mine), detail
                else:
                    assert wait == 0 and mine == set(), detail
                    assert "another refresh of" in run["messages"][model], detail
                    seen["refused"] += 1
            if wait and any(f"{model}: waiting up to" in r["output"] for r in runs):
                seen["waited"] += 1
        interrupted = q(
            f"select refresh_id from {SCHEMA}.__ivm_refresh_log group by refresh_id "
            "having count_if(status = 'success') = 0"
        )
        assert interrupted == [], detail
    # the random overlap produced both outcomes
    assert seen["refused"] > 0 and seen["waited"] > 0, seen
