"""dbt's table configs on ivm tables (README "Model config"): tblproperties, location_root
and persist_docs are honoured at the full build, kept by incremental refreshes and a change
of them rebuilds; the configs an ivm table cannot honour are rejected (tests/test_errors.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dbt_ivm.changelog import Op
from tests.support import IvmProject, sources_yaml

SOURCES = {"orders": "unique_key: [order_id], change_log: orders_changes"}
DOCS = """\
version: 2
models:
  - name: {name}
    description: "Orders by customer: it's the finance view"
    columns:
      - name: order_id
        description: the order's id
"""


def model_sql(file_format: str, root: Path, team: str) -> str:
    return (
        f"{{{{ config(materialized='ivm', file_format='{file_format}', location_root='{root}',\n"
        f"    tblproperties={{'team': '{team}'}}, persist_docs={{'relation': true, 'columns': true}}) }}}}\n"
        "select order_id, customer_id, amount from {{ source('shop', 'orders') }}\n"
    )


def describe(project: IvmProject, name: str) -> dict[str, str]:
    rows = project.spark.sql(f"describe table extended {project.schema}.{name}").collect()
    return {r[0]: r[1] for r in rows}


def properties(project: IvmProject, name: str) -> dict[str, str]:
    return {r[0]: r[1] for r in project.spark.sql(f"show tblproperties {project.schema}.{name}").collect()}


@pytest.mark.parametrize("file_format", ["parquet", "delta"])
def test_table_configs_honoured(file_format: str, project_factory, request, tmp_path: Path) -> None:
    if file_format == "delta":
        request.getfixturevalue("delta")
    project: IvmProject = project_factory(f"configs_{file_format}")
    name = f"orders_{file_format}"
    project.write("models/sources.yml", sources_yaml(project.raw, SOURCES))
    project.write("models/docs.yml", DOCS.format(name=name))
    project.create_table(
        "orders",
        "order_id bigint, customer_id bigint, amount double",
        [{"order_id": i, "customer_id": i % 3, "amount": float(i)} for i in range(5)],
    )
    orders = project.logged_table("orders", ["order_id"])
    project.write(f"models/{name}.sql", model_sql(file_format, tmp_path / "root", "finance"))
    project.run("-s", name)

    def check(team: str) -> None:
        info = describe(project, name)
        assert info["Location"].removeprefix("file:").startswith(f"{tmp_path}/root/{name}"), info["Location"]
        assert info["Comment"] == "Orders by customer: it's the finance view"
        assert properties(project, name)["team"] == team
        if file_format == "delta":  # dbt-spark writes column comments on Delta tables only
            columns = project.spark.sql(f"describe {project.schema}.{name}").collect()
            assert {r[0]: r[2] for r in columns}["order_id"] == "the order's id"
        project.assert_consistent([name], f"with team {team}")

    check("finance")
    # an incremental refresh (a rewrite: an update) keeps them
    orders.apply(
        [
            Op("insert", {"order_id": 10, "customer_id": 1, "amount": 2.5}),
            Op("update", {"order_id": 1, "customer_id": 1, "amount": 7.0}),
        ]
    )
    progress: list[str] = []

    def listen(msg: Any) -> None:
        if msg.info.name == "JinjaLogInfo" and msg.info.msg.startswith(f"dbt_ivm: {name}: "):
            progress.append(msg.info.msg)

    project.dbt.invoke("run", "-s", name, callbacks=[listen])
    assert project.last_refresh(name)["path"] == "incremental"
    # a progress line per phase, with its rows and seconds (a parquet rewrite's rows are
    # counted by the refresh log row, after the switch)
    applied = "applied -1 +2 rows" if file_format == "delta" else "applied (rows counted in the refresh log)"
    phases = [
        f"dbt_ivm: {name}: read 2 changed rows of 1 upstream(s) in ",
        f"dbt_ivm: {name}: planned the change (",
        f"dbt_ivm: {name}: {applied} in ",
    ]
    for phase in phases:
        assert [line for line in progress if line.startswith(phase) and line.endswith(" s")], (
            phase,
            progress,
        )
    last = project.last_refresh(name)
    assert (last["rows_deleted"], last["rows_inserted"]) == (1, 2), last
    check("finance")
    # a changed property rebuilds the table with it
    project.write(f"models/{name}.sql", model_sql(file_format, tmp_path / "root", "sales"))
    project.run("-s", name)
    assert project.last_refresh(name)["reason"] == "model SQL, upstream declarations or table configs changed"
    check("sales")


def test_refresh_log_view_can_be_left_out(project_factory) -> None:
    project: IvmProject = project_factory("no_log_view")
    project.run("--vars", "{dbt_ivm_refresh_log_view: false}")
    tables = {r.tableName for r in project.spark.sql(f"show tables in {project.schema}").collect()}
    assert "ivm_refresh_log" not in tables and "__ivm_refresh_log" not in tables, tables
    project.run()
    tables = {r.tableName for r in project.spark.sql(f"show tables in {project.schema}").collect()}
    assert {"ivm_refresh_log", "__ivm_refresh_log"} <= tables, tables
