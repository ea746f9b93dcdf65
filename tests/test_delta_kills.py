"""Exactly-once under crashes, for a join and an aggregate over a join stored as Delta and
as parquet (the parquet join partitioned).

* test_sigkill_campaign_through_thrift: 10 `dbt run` processes SIGKILLed before, during and
  after the writes of their refreshes (a Delta MERGE or INSERT, a parquet generation
  directory and location switch or partition overwrite), as dbt clients of a
  Spark Thrift Server that outlives them (a scheduler's worker dying while the cluster
  runs on); after each, the next process recovers and every model must equal its
  definition recomputed from scratch (see tests/kill_worker.py).
* test_sigkill_campaign_embedded: the same with the embedded session, where a kill also
  takes the Spark driver (the JVM) down in the middle of a write; each child starts its
  own JVM, so one kill here (`make soak` runs 20 of each kind and writes the reports).
* test_refresh_after_two_interrupted_ones: the case the campaign found, in-process and
  deterministic: a refresh that committed without logging 'success', then a refresh
  interrupted before its commit; the next run must continue from the first one's versions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from dbt_ivm.spark import ThriftServer
from tests.kill_worker import MODELS, PARQUET, TABLES, Campaign
from tests.support import IvmProject

pytestmark = pytest.mark.usefixtures("delta")
DELTA_MODELS = [m for m in MODELS if m not in PARQUET]


def check_campaign(campaign: Campaign, kills: int) -> dict[str, Any]:
    summary = campaign.run(kills, log=lambda line: None)
    (campaign.work / "records.json").write_text(json.dumps(campaign.records, default=str))
    detail = (json.dumps(summary), f"child logs in {campaign.work}")
    assert summary["kills"] >= kills, detail
    assert summary["landed"] >= kills // 3, detail
    assert summary["converged"] == summary["kills"], detail
    assert summary["log_lost"] == 0, detail
    return summary


def test_sigkill_campaign_through_thrift(tmp_path: Path, thrift: ThriftServer) -> None:
    check_campaign(Campaign(tmp_path / "kills", seed=20261123, thrift=thrift), 4)


def test_sigkill_campaign_embedded(tmp_path: Path) -> None:
    check_campaign(Campaign(tmp_path / "kills", seed=20261124), 1)


def delta_upstreams(project: IvmProject) -> None:
    for name, columns in TABLES.items():
        project.spark.sql(
            f"create table {project.raw}.{name} ({columns}) using delta "
            "tblproperties ('delta.enableChangeDataFeed' = 'true')"
        )
    project.spark.sql(f"insert into {project.raw}.customers values (1, 'eu'), (2, 'us')")
    project.spark.sql(f"insert into {project.raw}.orders values (1, 1, 10), (2, 2, 20), (3, 1, 5)")
    declared = "config: {meta: {ivm: {unique_key: [id]}}}"
    tables = "\n".join(f"      - {{name: {t}, {declared}}}" for t in TABLES)
    project.write(
        "models/sources.yml",
        f"version: 2\nsources:\n  - name: shop\n    schema: {project.raw}\n    tables:\n{tables}\n",
    )
    # the Delta models: the case is about reading a Delta table's history
    for name in DELTA_MODELS:
        project.write(f"models/{name}.sql", MODELS[name])


def test_refresh_after_two_interrupted_ones(project_factory) -> None:
    project = project_factory("delta_two_interrupted")
    spark = project.spark
    delta_upstreams(project)
    models = DELTA_MODELS
    project.run()
    # refresh A commits its writes (an INSERT, a MERGE), then "dies" before logging success
    spark.sql(f"insert into {project.raw}.orders values (4, 2, 7)")
    project.run()
    log = f"{project.schema}.__ivm_refresh_log"
    a = {m: project.last_refresh(m)["refresh_id"] for m in models}
    assert all(project.last_refresh(m)["path"] == "incremental" for m in models)
    # each log row is a partition (model, event)
    rows = [f"partition (model = '{i.split(':', 1)[1]}', event = 'success:{i}')" for i in a.values()]
    spark.sql(f"alter table {log} drop {', '.join(rows)}")
    # without its success row A's lease stays taken, as after a kill: freed as a user would
    for m in models:
        project.dbt.invoke("run-operation", "dbt_ivm.ivm_release_lease", "--args", f"{{model: {m}}}")
    # refresh B logs 'started' and "dies" before its write commits
    started = spark.table(log).where(
        F.col("refresh_id").isin(list(a.values())) & (F.col("status") == "started")
    )
    assert started.count() == len(models)
    rows = started.withColumn("refresh_id", F.concat(F.lit("killed-before-commit:"), F.col("refresh_id")))
    rows = rows.withColumn("event", F.concat(F.lit("started:"), F.col("refresh_id")))
    rows.withColumn("logged_at", F.current_timestamp()).write.insertInto(log)
    # the next run must neither re-apply A (its commit is the table's last) nor lose it
    spark.sql(f"delete from {project.raw}.orders where id = 1")
    project.run()
    project.assert_consistent(models, "after a committed and an uncommitted interrupted refresh")
    assert all(project.last_refresh(m)["versions_from"] for m in models)
