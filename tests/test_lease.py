"""The refresh lease (macros/state/lease.sql): a refresh of a table while another holds its
lease fails naming the holder and changes nothing, or waits; a lease older than
ivm_lease_timeout is taken over; a failed refresh's lease is freed by on-run-end; a
killed one is freed by the ivm_release_lease operation. With the package's hooks off (var
dbt_ivm_hooks), the refresh creates the state schema and the refresh log itself."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from dbt_ivm.changelog import ChangeLoggedTable, Op
from tests.support import IvmProject

MODEL = """\
    {{ config(materialized='ivm', ivm_lease_timeout=var('lease_timeout', 3600),
              ivm_lease_wait=var('lease_wait', 0), pre_hook=var('pre_hook', 'select 1')) }}
    select o.order_id, o.amount from {{ source('shop', 'orders') }} o
    """


@pytest.fixture(scope="module")
def shop(project_factory) -> tuple[IvmProject, ChangeLoggedTable]:
    project = project_factory("lease")
    return project, project.build_facts(MODEL)


def lease(project: IvmProject, state: str | None = None) -> tuple[int, str | None]:
    """(newest generation, its holder when it is held) of the facts table's lease, in the
    state schema (default: the target schema). Odd generations are taken; a holder that
    logged success has freed its generation."""
    state = state or project.schema
    prefix = f"__ivm_lease__{project.schema}__facts__g"
    found = project.spark.sql(f"show tables in {state} like '{prefix}*'").collect()
    top = max((int(r["tableName"][len(prefix) :]) for r in found), default=0)
    if top % 2 == 0:
        return top, None
    properties = project.spark.sql(f"show tblproperties {state}.{prefix}{top}").collect()
    holder = {r["key"]: r["value"] for r in properties}["dbt_ivm.holder"]
    success = f"select count(*) from {state}.__ivm_refresh_log where event = 'success:{holder}'"
    return top, None if project.spark.sql(success).first()[0] else holder


def next_taken(generation: int) -> int:
    """The generation a refresh takes after `generation`: the next odd one."""
    return generation + (2 if generation % 2 else 1)


def hold(project: IvmProject, holder: str, age_s: float) -> int:
    """The facts table's lease, taken by someone else age_s seconds ago; its generation."""
    since = (datetime.now(timezone.utc) - timedelta(seconds=age_s)).strftime("%Y-%m-%dT%H:%M:%S")
    generation = next_taken(lease(project)[0])
    project.spark.sql(
        f"create table {project.schema}.__ivm_lease__{project.schema}__facts__g{generation} (holder string) "
        f"stored as textfile tblproperties ('dbt_ivm.holder' = '{holder}', 'dbt_ivm.since' = '{since}')"
    )
    return generation


def test_refresh_frees_its_lease(shop) -> None:
    project, orders = shop
    before = lease(project)[0]
    orders.apply([Op("insert", {"order_id": 2, "amount": 2.0})])
    project.run()
    assert lease(project) == (next_taken(before), None), "taken, and freed by the refresh's success row"
    project.assert_consistent(["facts"], "after a refresh")


def test_held_lease_fails_naming_the_holder_and_changes_nothing(shop) -> None:
    project, orders = shop
    generation = hold(project, "other-run:model.x.facts", age_s=5)
    rows_before = project.spark.table(f"{project.schema}.facts").count()
    log_before = len(project.refresh_log("facts"))
    orders.apply([Op("insert", {"order_id": 3, "amount": 3.0})])
    error = project.run_error("--select", "facts")
    assert "another refresh of" in error and "other-run:model.x.facts" in error, error
    assert "ivm_release_lease" in error and "ivm_lease_wait" in error, error
    assert project.spark.table(f"{project.schema}.facts").count() == rows_before
    assert len(project.refresh_log("facts")) == log_before
    # someone else's lease: on-run-end leaves it
    assert lease(project) == (generation, "other-run:model.x.facts")
    project.dbt.invoke("run-operation", "dbt_ivm.ivm_release_lease", "--args", "{model: facts}")
    assert lease(project) == (generation + 1, None)
    project.run()
    project.assert_consistent(["facts"], "after the lease was released")


def test_dead_lease_is_taken_over_after_waiting(shop) -> None:
    """Held since 'now' with a 6 s timeout: a run that waits up to 20 s sees it expire and
    takes it over with the odd generation after next."""
    project, orders = shop
    generation = hold(project, "killed-run:model.x.facts", age_s=0)
    orders.apply([Op("update", {"order_id": 1, "amount": 10.0})])
    project.run("--vars", "{lease_timeout: 6, lease_wait: 20}")
    assert lease(project) == (generation + 2, None)
    assert project.last_refresh("facts")["path"] == "incremental"
    project.assert_consistent(["facts"], "after taking over a dead lease")


def test_failed_refresh_lease_is_freed_at_run_end_and_old_generations_dropped(shop) -> None:
    """A refresh that fails under its lease (here in a pre-hook, which runs after the lease
    is taken) leaves it to on-run-end, which frees it."""
    project, orders = shop
    dbt_log = project.root / "logs" / "dbt.log"
    logged = dbt_log.stat().st_size
    before = lease(project)[0]
    orders.apply([Op("insert", {"order_id": 4, "amount": 4.0})])
    error = project.run_error("--select", "facts", "--vars", "{pre_hook: 'select * from no_such_table_here'}")
    assert "no_such_table_here" in error, error
    with dbt_log.open() as f:
        f.seek(logged)
        assert "stored as textfile" in f.read(), "the refresh failed before taking its lease"
    freed = next_taken(before) + 1
    assert lease(project) == (freed, None), "taken, then freed by on-run-end (even)"
    prefix = f"__ivm_lease__{project.schema}__facts__g"
    kept = project.spark.sql(f"show tables in {project.schema} like '{prefix}*'").collect()
    generations = sorted(int(r["tableName"][len(prefix) :]) for r in kept)
    assert generations[-1] == freed and generations[0] > freed - 4, generations  # older ones dropped
    project.run()
    project.assert_consistent(["facts"], "after the failed refresh")


def test_with_the_hooks_off_the_refresh_creates_the_refresh_log(shop) -> None:
    """dbt_ivm_hooks: false on a state schema that does not exist yet: no hook touches it,
    the refresh itself creates the schema and the refresh log, and a failed refresh's lease
    stays held (no on-run-end) until ivm_release_lease frees it."""
    project, orders = shop
    state = f"{project.schema}_hooks_off"
    project.spark.sql(f"drop database if exists {state} cascade")
    off = f"dbt_ivm_hooks: false, dbt_ivm_state_schema: {state}"
    facts = "model.ivm_test_lease.facts"
    by_node: dict[str, list[str]] = {}

    def listen(msg: Any) -> None:
        if msg.info.name == "SQLQuery" and f"{state}." in msg.data.sql:
            by_node.setdefault(msg.data.node_info.unique_id, []).append(" ".join(msg.data.sql.split()))

    def last_path() -> str:
        log = f"{state}.__ivm_refresh_log"
        query = f"select max_by(path, logged_at) from {log} where status = 'success'"
        return project.spark.sql(query).first()[0]

    project.dbt.invoke("run", "--select", "facts", "--vars", f"{{{off}}}", callbacks=[listen])
    assert list(by_node) == [facts], by_node
    assert any(f"create table if not exists {state}.__ivm_refresh_log " in q for q in by_node[facts])
    assert last_path() == "full"

    orders.apply([Op("insert", {"order_id": 5, "amount": 5.0})])
    failing = f"{{{off}, pre_hook: 'select * from no_such_table_here'}}"
    project.run_error("--select", "facts", "--vars", failing)
    generation, holder = lease(project, state)
    assert generation % 2 == 1 and holder and holder.endswith(f":{facts}"), (generation, holder)
    release = ("run-operation", "dbt_ivm.ivm_release_lease", "--args", "{model: facts}")
    project.dbt.invoke(*release, "--vars", f"{{{off}}}")
    assert lease(project, state) == (generation + 1, None)
    project.run("--select", "facts", "--vars", f"{{{off}}}")
    assert last_path() == "incremental"
    project.assert_consistent(["facts"], "after refreshes with the hooks off")
