"""Bad input a producer or an operator can make: each gives a named error and changes
nothing, or a rebuild whose reason is logged, never a success with wrong rows."""

from __future__ import annotations

from typing import Any

import pytest

from dbt_ivm.changelog import Op
from tests.support import IvmProject, sources_yaml

COLUMNS = "id bigint, v int"

# upstream (one per case, with its own change log and model m_<case>) -> fragments of the error
FAILING: dict[str, list[str]] = {
    "unknown_type": ["IVM060", "_change_type 'upsert'", '{"id":3}', "Nothing was applied"],
    "null_version": ["IVM061", "1 row(s)", "_commit_version NULL", "Nothing was applied"],
    "null_key": ["IVM062", '{"id":null}', "never NULL"],
    "lone_postimage": ["IVM063", '{"id":1}', "1 postimage(s), 0 preimage(s)", "update_preimage"],
    "duplicate_key": ["IVM064", '{"id":3}', "2 new row(s) and 0 old row(s)", "unique_key that is unique"],
    "recreated_log": ["IVM065", "read up to version 1", "now ends at 0", "--full-refresh -s m_recreated_log"],
    "dropped_column": ["IVM066", "Column(s) v of shop.dropped_column", "the model SQL names them"],
}
REBUILT = ("retyped_column", "added_column")
CASES = (*FAILING, *REBUILT, "resumed_full", "dropped_table")


def model_sql(case: str) -> str:
    if case == "added_column":
        # select *: a new upstream column is a new column of the model
        return f"select * from {{{{ source('shop', '{case}') }}}}"
    return f"select u.id, u.v from {{{{ source('shop', '{case}') }}}} u"


def log_rows(project: IvmProject, case: str, rows: list[tuple[Any, ...]]) -> None:
    """Append raw rows (id, v, _change_type, _commit_version) to a case's change log."""
    values = ", ".join(
        "({}, {}, {}, {}, current_timestamp())".format(
            *("null" if x is None else repr(x) if isinstance(x, str) else x for x in row)
        )
        for row in rows
    )
    project.spark.sql(f"insert into {project.raw}.{case}_changes values {values}")


def table_rows(project: IvmProject, model: str) -> list[tuple[Any, ...]]:
    return sorted(
        tuple(r) for r in project.spark.sql(f"select id, v from {project.schema}.{model}").collect()
    )


@pytest.fixture(scope="module")
def project(project_factory) -> IvmProject:
    project: IvmProject = project_factory("bad_change_data")
    project.write(
        "models/sources.yml",
        sources_yaml(project.raw, {c: f"unique_key: [id], change_log: {c}_changes" for c in CASES}),
    )
    for case in CASES:
        project.create_table(case, COLUMNS)
        table = project.logged_table(case, ["id"])
        table.apply([Op("insert", {"id": 1, "v": 10}), Op("insert", {"id": 2, "v": 20})])
        project.write(f"models/m_{case}.sql", "{{ config(materialized='ivm') }}\n" + model_sql(case) + "\n")
    project.run()
    return project


@pytest.fixture(scope="module")
def second_run(project: IvmProject) -> dict[str, Any]:
    """Break every upstream in its own way, then run all models once."""
    spark, raw = project.spark, project.raw
    before = {case: table_rows(project, f"m_{case}") for case in FAILING}
    builds = {case: project.last_refresh(f"m_{case}") for case in CASES}
    log_rows(project, "unknown_type", [(3, 30, "upsert", 2)])
    log_rows(project, "null_version", [(3, 30, "insert", None)])
    log_rows(project, "null_key", [(None, 30, "insert", 2)])
    log_rows(project, "lone_postimage", [(1, 11, "update_postimage", 2)])
    log_rows(project, "duplicate_key", [(3, 30, "insert", 2), (3, 31, "insert", 3)])
    spark.sql(f"drop table {raw}.recreated_log_changes")
    project.logged_table("recreated_log", ["id"])
    log_rows(project, "recreated_log", [(1, 10, "insert", 0)])
    for case, columns in (("dropped_column", "id bigint"), ("retyped_column", "id bigint, v string")):
        project.create_table(
            case, columns, [{"id": 1, "v": "10"}, {"id": 2, "v": "20"}] if "v" in columns else [{"id": 1}]
        )
        table = project.logged_table(case, ["id"])
        # the log is recreated too and continues above the stored version 1
        table.apply([Op("insert", {"id": k, **({"v": str(k)} if "v" in columns else {})}) for k in (5, 6, 7)])
    spark.sql(f"alter table {raw}.added_column add columns (w string)")
    spark.sql(f"alter table {raw}.added_column_changes add columns (w string)")
    log_rows_w = (
        f"insert into {raw}.added_column_changes (id, v, w, _change_type, _commit_version, _commit_timestamp)"
    )
    spark.sql(f"{log_rows_w} values (3, 30, 'x', 'insert', 2, current_timestamp())")
    spark.sql(f"insert into {raw}.added_column (id, v, w) values (3, 30, 'x')")
    # a kill inside a full build leaves its 'started' row last
    project.relog(builds["resumed_full"]["refresh_id"], "started")
    spark.sql(f"drop table {project.schema}.m_dropped_table")
    return {"failures": project.run_failures(), "before": before, "builds": builds}


@pytest.mark.parametrize("case", sorted(FAILING))
def test_bad_change_data_is_a_named_error_and_nothing_is_applied(
    project: IvmProject, second_run: dict[str, Any], case: str
) -> None:
    message = second_run["failures"][f"m_{case}"]
    assert f"Model 'm_{case}', upstream shop.{case}: " in message
    for fragment in FAILING[case]:
        assert fragment in message, f"{fragment!r} missing from:\n{message}"
    assert "Traceback" not in message and "org.apache" not in message
    assert table_rows(project, f"m_{case}") == second_run["before"][case]
    log = project.refresh_log(f"m_{case}")
    assert log[-1]["status"] == "success"
    assert log[-1]["refresh_id"] == second_run["builds"][case]["refresh_id"], (
        "the failed run must log nothing"
    )


def test_retyped_upstream_column_rebuilds_on_the_new_type(
    project: IvmProject, second_run: dict[str, Any]
) -> None:
    refresh = project.last_refresh("m_retyped_column")
    assert refresh["path"] == "full"
    assert refresh["reason"] == (
        "upstream shop.retyped_column changed its columns since the last refresh (v int -> string): "
        "rebuilding on the new schema"
    )
    assert dict(project.spark.table(f"{project.schema}.m_retyped_column").dtypes)["v"] == "string"
    assert not project.differences("m_retyped_column")


def test_added_upstream_column_rebuilds_a_select_star_model(
    project: IvmProject, second_run: dict[str, Any]
) -> None:
    refresh = project.last_refresh("m_added_column")
    assert refresh["reason"].startswith(
        "upstream shop.added_column changed its columns since the last refresh (w added)"
    )
    assert "w" in project.spark.table(f"{project.schema}.m_added_column").columns
    assert not project.differences("m_added_column")


def test_killed_full_build_is_done_again(project: IvmProject, second_run: dict[str, Any]) -> None:
    refresh = project.last_refresh("m_resumed_full")
    build = second_run["builds"]["resumed_full"]
    assert refresh["path"] == "full"
    assert (
        refresh["reason"]
        == f"the full build of refresh {build['refresh_id']} was interrupted: doing it again"
    )


def test_ivm_table_dropped_outside_is_rebuilt(project: IvmProject, second_run: dict[str, Any]) -> None:
    refresh = project.last_refresh("m_dropped_table")
    assert (refresh["path"], refresh["reason"]) == (
        "full",
        "the table was dropped outside dbt_ivm after its last refresh",
    )
    assert not project.differences("m_dropped_table")


def test_refresh_log_dropped_outside_rebuilds_from_scratch(
    project: IvmProject, second_run: dict[str, Any]
) -> None:
    project.spark.sql(f"drop table {project.schema}.__ivm_refresh_log")
    project.run("--select", "m_resumed_full")
    refresh = project.last_refresh("m_resumed_full")
    assert (refresh["path"], refresh["reason"]) == ("full", "no refresh recorded for this table")
    assert not project.differences("m_resumed_full")
