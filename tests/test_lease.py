"""The refresh lease (macros/state/lease.sql): a refresh of a table while another holds its
lease fails naming the holder and changes nothing, or waits; a lease older than
ivm_lease_timeout is taken over; a failed refresh's lease is dropped by on-run-end; a
killed one is released by the ivm_release_lease operation."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from dbt_ivm.changelog import ChangeLoggedTable, Op
from tests.support import IvmProject, sources_yaml

MODEL = """\
    {{ config(materialized='ivm', ivm_lease_timeout=var('lease_timeout', 3600),
              ivm_lease_wait=var('lease_wait', 0)) }}
    select o.order_id, o.amount from {{ source('shop', 'orders') }} o
    """


@pytest.fixture(scope="module")
def shop(project_factory) -> tuple[IvmProject, ChangeLoggedTable]:
    project = project_factory("lease")
    project.create_table("orders", "order_id bigint, amount double", [{"order_id": 1, "amount": 1.0}])
    orders = project.logged_table("orders", ["order_id"])
    declared = {"orders": "unique_key: [order_id], change_log: orders_changes"}
    project.write("models/sources.yml", sources_yaml(project.raw, declared))
    project.write("models/facts.sql", MODEL)
    project.run()
    return project, orders


def leases(project: IvmProject) -> list[str]:
    found = project.spark.sql(f"show tables in {project.schema} like '__ivm_lease__*'").collect()
    return [r["tableName"] for r in found]


def hold(project: IvmProject, holder: str, age_s: float, generation: int = 1) -> str:
    """A lease of the facts table held by someone else since age_s seconds ago."""
    since = (datetime.now(timezone.utc) - timedelta(seconds=age_s)).strftime("%Y-%m-%dT%H:%M:%S")
    name = f"__ivm_lease__{project.schema}__facts__g{generation}"
    project.spark.sql(
        f"create table {project.schema}.{name} (holder string) stored as textfile "
        f"tblproperties ('dbt_ivm.holder' = '{holder}', 'dbt_ivm.since' = '{since}')"
    )
    return name


def test_refresh_drops_its_lease(shop) -> None:
    project, orders = shop
    orders.apply([Op("insert", {"order_id": 2, "amount": 2.0})])
    project.run()
    assert leases(project) == []
    project.assert_consistent(["facts"], "after a refresh")


def test_held_lease_fails_naming_the_holder_and_changes_nothing(shop) -> None:
    project, orders = shop
    name = hold(project, "other-run:model.x.facts", age_s=5)
    rows_before = project.spark.table(f"{project.schema}.facts").count()
    log_before = len(project.refresh_log("facts"))
    orders.apply([Op("insert", {"order_id": 3, "amount": 3.0})])
    error = project.run_error("--select", "facts")
    assert "another refresh of" in error and "other-run:model.x.facts" in error, error
    assert "ivm_release_lease" in error and "ivm_lease_wait" in error, error
    assert project.spark.table(f"{project.schema}.facts").count() == rows_before
    assert len(project.refresh_log("facts")) == log_before
    assert leases(project) == [name]  # someone else's lease: on-run-end leaves it
    project.dbt.invoke("run-operation", "dbt_ivm.ivm_release_lease", "--args", "{model: facts}")
    assert leases(project) == []
    project.run()
    project.assert_consistent(["facts"], "after the lease was released")


def test_dead_lease_is_taken_over_after_waiting(shop) -> None:
    """Held since 'now' with a 6 s timeout: a run that waits up to 20 s sees it expire and
    takes it over as generation 2."""
    project, orders = shop
    hold(project, "killed-run:model.x.facts", age_s=0)
    orders.apply([Op("update", {"order_id": 1, "amount": 10.0})])
    project.run("--vars", "{lease_timeout: 6, lease_wait: 20}")
    assert leases(project) == []
    assert project.last_refresh("facts")["path"] == "incremental"
    project.assert_consistent(["facts"], "after taking over a dead lease")


def test_failed_refresh_lease_is_dropped_at_run_end(shop) -> None:
    project, _ = shop
    dbt_log = project.root / "logs" / "dbt.log"
    logged = dbt_log.stat().st_size
    log, away = f"{project.raw}.orders_changes", f"{project.raw}.orders_changes_away"
    project.spark.sql(f"alter table {log} rename to {away}")
    try:
        error = project.run_error("--select", "facts")
        assert "IVM032" in error, error
        with dbt_log.open() as f:
            f.seek(logged)
            assert "stored as textfile" in f.read(), "the refresh failed before taking its lease"
        assert leases(project) == []
    finally:
        project.spark.sql(f"alter table {away} rename to {log}")
