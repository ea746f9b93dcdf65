"""The integration project (integration_tests/) through a Spark Thrift Server, `method: thrift`,
as teams run dbt-spark against a cluster: the server is the session fixture `thrift`
(pyspark's own jars, Delta loaded), dbt is a client of it (dbtRunner in this process: the
thrift method never touches the embedded session), and every upstream statement goes
through the server too (PyHive), as the demo's steps (dbt_ivm.demo) in SQL: create the
Delta upstreams with change data feed from the seeds, first build, the demo's batch of
inserts, updates (join keys too), deletes and a MERGE, incremental refresh, `dbt test`.
The project runs in its own schemas (thrift_it, _raw, _seed) on the shared server.
"""

from __future__ import annotations

import json
import urllib.request
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from dbt_common.events.base_types import EventMsg

from dbt_ivm import demo
from dbt_ivm.runner import DbtProject
from dbt_ivm.spark import ThriftServer
from tests.kill_worker import Query, thrift_query
from tests.support import copy_integration_project

pytestmark = pytest.mark.usefixtures("delta")

SCHEMA = "thrift_it"
RAW, SEED = f"{SCHEMA}_raw", f"{SCHEMA}_seed"  # sources.yml: {{ target.schema }}_raw; seeds: +schema seed
MODELS = ("order_facts", "line_facts", "customer_page_views", "revenue_by_region", "sku_sales")
PROFILE = """\
dbt_ivm_integration_tests:
  target: thrift
  outputs:
    thrift:
      type: spark
      method: thrift
      host: {host}
      port: {port}
      schema: {schema}
      threads: 4
      # dbt-spark polls a statement still running every poll_interval seconds (5 by default)
      poll_interval: 1
"""


def thrift_project(tmp_path: Path, server: ThriftServer) -> DbtProject:
    """A copy of integration_tests/ installing this package, its profile a thrift client."""
    project = copy_integration_project(tmp_path)
    (project / "profiles.yml").write_text(PROFILE.format(host=server.host, port=server.port, schema=SCHEMA))
    return DbtProject(project, project)


def successes(q: Query) -> dict[str, list[dict[str, Any]]]:
    """The package's refresh log, 'success' rows per model, oldest first."""
    rows = q(
        "select model, path, reason, message, to_json(versions_from) as versions_from, "
        "to_json(versions_to) as versions_to, rows_inserted, rows_deleted "
        f"from {SCHEMA}.__ivm_refresh_log where status = 'success' order by logged_at"
    )
    log: dict[str, list[dict[str, Any]]] = {m: [] for m in MODELS}
    for r in rows:
        name = r["model"].rsplit(".", 1)[-1]
        if name in log:
            log[name].append(r)
    return log


def cached_tables(server: ThriftServer) -> list[str]:
    """The tables cached on the server (CACHE TABLE), from its UI's REST API: the data of a
    refresh's cached temporary views, while they are alive."""
    base = f"http://{server.host}:{server.ui_port}/api/v1/applications"
    with urllib.request.urlopen(base, timeout=10) as r:
        app = json.load(r)[0]["id"]
    with urllib.request.urlopen(f"{base}/{app}/storage/rdd", timeout=10) as r:
        names = [e["name"] for e in json.load(r)]
    prefix = "In-memory table "
    return [n.removeprefix(prefix) for n in names if n.startswith(prefix)]


def test_integration_project_through_thrift(tmp_path: Path, thrift: ThriftServer) -> None:
    q = thrift_query(f"{thrift.host}:{thrift.port}")
    for db in (SCHEMA, RAW, SEED):
        q(f"drop database if exists {db} cascade")
    dbt = thrift_project(tmp_path, thrift)
    dbt.invoke("deps")
    dbt.invoke("seed")
    q(f"create database {RAW}")
    for statement in demo.upstream_statements("delta", RAW, SEED):
        q(statement)

    dbt.invoke("run")
    log = successes(q)
    assert {m: [r["path"] for r in rows] for m, rows in log.items()} == {m: ["full"] for m in MODELS}, log
    for model in MODELS:
        assert q(f"describe detail {SCHEMA}.{model}")[0]["format"] == "delta", model

    # the demo's batch, statement by statement through the server: Delta commits read back
    # by the refresh from the change data feeds; two page views appended (watermark)
    for statement in [*demo.delta_batch(RAW), demo.page_views_insert(RAW)]:
        q(statement)
    statements: list[str] = []

    def record(msg: EventMsg) -> None:
        if msg.info.name == "SQLQuery":
            statements.append(msg.data.sql)

    dbt.invoke("run", callbacks=[record])
    log = successes(q)
    detail = json.dumps(log, default=str, indent=1)
    for model in MODELS:
        assert [r["path"] for r in log[model]] == ["full", "incremental"], detail
        build, refresh = log[model]
        assert refresh["versions_to"] != build["versions_to"], detail
        assert refresh["rows_inserted"] + refresh["rows_deleted"] > 0, detail
    # every upstream of a model was read through its change feed or its watermark
    assert {"shop.orders", "shop.customers"} <= set(json.loads(log["order_facts"][1]["versions_to"]))
    assert "shop.page_views" in json.loads(log["customer_page_views"][1]["versions_to"])
    # the refresh changed each Delta table in one commit, not by rewriting it: the aggregate by
    # MERGE, the join by REPLACE WHERE on its listed keys (a WRITE), whose counts the log took
    # from the commit's metrics, as the thrift server renders them
    for model, operation in (("order_facts", "WRITE"), ("revenue_by_region", "MERGE")):
        operations = [c["operation"] for c in q(f"describe history {SCHEMA}.{model}")]
        assert operations[0] == operation and len(operations) == 2, (model, operations)
    # orders 100 and 101 (customer 1) go; 101, 105 and 107 come: the slices of the changed
    # orders (100, 101, 105, 107) and customers (3, whose order 103 is cancelled, and 6)
    replaced = log["order_facts"][1]
    assert (replaced["rows_deleted"], replaced["rows_inserted"]) == (2, 3), detail
    # the outcome, recomputed by hand from the seeds and the batch: order 100 deleted, 105
    # moved to customer 2, 107 (customer 6, APAC) new, customer 3 moved to AMER (103 cancelled)
    revenue = q(f"select region, orders, cast(revenue as string) as revenue from {SCHEMA}.revenue_by_region")
    assert {(r["region"], r["orders"], Decimal(r["revenue"])) for r in revenue} == {
        ("EMEA", 1, Decimal("35.00")),
        ("AMER", 2, Decimal("1022.00")),
        ("APAC", 2, Decimal("18.00")),
        (None, 1, Decimal("77.70")),
    }, revenue
    order_ids = sorted(r["order_id"] for r in q(f"select order_id from {SCHEMA}.order_facts"))
    assert order_ids == [101, 102, 104, 105, 106, 107], order_ids

    # the refreshes read their change sets inline, cached nothing on the server and left
    # nothing behind: a long-lived server keeps nothing of a finished refresh in memory
    assert not [sql for sql in statements if "cache " in sql.lower()]
    leftover = [t for t in cached_tables(thrift) if "__ivm_" in t]
    assert leftover == [], leftover

    # dbt test: every ivm table equals its definition recomputed (dbt_ivm.consistent)
    result = dbt.invoke("test")
    statuses = {r.node.name: str(r.status) for r in result.result.results if r.node.resource_type == "test"}
    assert len(statuses) == len(MODELS) and set(statuses.values()) == {"pass"}, statuses
    # ... and the test sees a table that drifted from its definition
    q(f"delete from {SCHEMA}.order_facts where order_id = 107")
    drifted = dbt.invoke("test", "--select", "order_facts", check=False)
    assert not drifted.success
    [failed] = [r for r in drifted.result.results if r.node.resource_type == "test"]
    assert str(failed.status) == "fail" and failed.failures == 1, failed
