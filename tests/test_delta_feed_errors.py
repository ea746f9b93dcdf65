"""The Delta change-feed error classes provoked for real on Delta Lake 4.4.

Each case: a Delta upstream with change data feed (declared by its key), two models over
it built at the same version, one with ivm_on_change_feed_error='fail' (the default) and
one with 'rebuild'. Then the case's provocation, a direct read of table_changes over the
range the next refresh would read (it really fails on this Delta version, or, where Delta
silently returns something wrong, the read is shown to succeed: that is why the check
before the read exists), and one `dbt run` of both models:
* fail: the run fails with a message naming the code, what happened and the fix, and
  nothing changes (table content, table version, refresh log);
* rebuild: the model is rebuilt in full, the refresh log's reason names the code, and the
  table equals its definition.
A raw Spark error reaching the user for any of these cases would fail the test (the fail
message must be the package's explanation).

One small dbt project for the module; each case has its own upstream and models, and all
cases share two dbt runs (build everything, provoke every case, run everything again)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from pyspark.sql import SparkSession

from tests.support import IvmProject

pytestmark = pytest.mark.usefixtures("delta")

CDF = "'delta.enableChangeDataFeed' = 'true'"


@dataclass
class Case:
    name: str
    code: str
    what: str  # a part of the explanation of the code
    properties: str = ""  # extra table properties of the upstream


CASES = [
    Case(
        "retention",
        "DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION",
        "older than the retention",
        ", 'delta.deletedFileRetentionDuration' = 'interval 1 seconds'",
    ),
    Case("feed_off", "DELTA_MISSING_CHANGE_DATA", "change data was not recorded"),
    Case("feed_unset", "DELTA_MISSING_CHANGE_DATA", "change data was not recorded"),
    Case("recreated_shorter", "DELTA_CDC_START_VERSION_AFTER_LATEST", "recreated or restored"),
    Case("recreated_longer", "DELTA_CDC_START_VERSION_AFTER_LATEST", "recreated or restored"),
    Case("restored", "DELTA_CDC_START_VERSION_AFTER_LATEST", "recreated or restored"),
    Case(
        "column_dropped",
        "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA",
        "schema of the table changed",
        ", 'delta.columnMapping.mode' = 'name'",
    ),
    Case("replaced_schema", "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA", "schema of the table changed"),
]
BY_NAME = {c.name: c for c in CASES}
# upstreams that declare only unique_key: one without its feed from the start, one whose
# feed is turned off after the first build
KEY_ONLY = ("key_only_off", "key_only_later")


@pytest.fixture(scope="module")
def project(project_factory) -> IvmProject:
    project = project_factory("delta_feed_errors")
    tables = "\n".join(
        f"      - {{name: t_{name}, config: {{meta: {{ivm: {{change_feed: delta, unique_key: [id]}}}}}}}}"
        for name in [*(c.name for c in CASES), "same_schema"]
    )
    # declared by their key alone: found to be change feeds (IVM031 when the feed is off)
    for name in KEY_ONLY:
        tables += f"\n      - {{name: t_{name}, config: {{meta: {{ivm: {{unique_key: [id]}}}}}}}}"
    project.write(
        "models/sources.yml",
        f"version: 2\nsources:\n  - name: shop\n    schema: {project.raw}\n    tables:\n{tables}\n",
    )
    for name in KEY_ONLY:
        source = f"{{{{ source('shop', 't_{name}') }}}}"
        sql = f"{{{{ config(materialized='ivm') }}}}\nselect id, v from {source}\n"
        project.write(f"models/{name}.sql", sql)
    project.write(
        "models/same_schema.sql",
        "{{ config(materialized='ivm', ivm_on_change_feed_error='rebuild') }}\n"
        "select v, count(*) as n, max(id) as top from {{ source('shop', 't_same_schema') }} group by v\n",
    )
    for c in CASES:
        source = f"{{{{ source('shop', 't_{c.name}') }}}}"
        project.write(
            f"models/{c.name}_fail.sql", f"{{{{ config(materialized='ivm') }}}}\nselect id, v from {source}\n"
        )
        project.write(
            f"models/{c.name}_rebuild.sql",
            "{{ config(materialized='ivm', ivm_on_change_feed_error='rebuild') }}\n"
            f"select v, count(*) as n, max(id) as top from {source} group by v\n",
        )
    return project


def key_only_state(project: IvmProject) -> tuple[list, int]:
    """The rows of key_only_later and the number of its refresh log rows."""
    rows = sorted(project.spark.table(f"{project.schema}.key_only_later").collect())
    return rows, len(project.refresh_log("key_only_later"))


def latest(spark: SparkSession, table: str) -> int:
    return spark.sql(f"describe history {table} limit 1").collect()[0]["version"]


def read_error(spark: SparkSession, table: str, start: int, end: int) -> str | None:
    """The error of reading table_changes over [start, end] on this Delta, or None."""
    try:
        spark.sql(f"select * from table_changes('{table}', {start}, {end})").collect()
    except Exception as e:  # any failure of the read is what the test looks at
        return str(e)
    return None


DATA_SCHEMA = "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA"


def assert_read_fails(spark: SparkSession, table: str, start: int, end: int, code: str) -> None:
    """Reading table_changes over [start, end] really fails on this Delta, with `code`."""
    error = read_error(spark, table, start, end)
    assert error and code in error, error


def create(spark: SparkSession, table: str, columns: str = "id bigint, v int", properties: str = "") -> None:
    spark.sql(f"create table {table} ({columns}) using delta tblproperties ({CDF}{properties})")


# The provocations: each changes the upstream after the models were built at version
# `after` and checks what reading the range (after, latest] does on this Delta.


def retention(spark: SparkSession, t: str, after: int) -> None:
    spark.sql(f"insert into {t} values (10, 1)")
    spark.sql(f"insert into {t} values (11, 2)")
    time.sleep(3)  # past the 1 second delta.deletedFileRetentionDuration of the upstream
    # Delta >= 4.1 refuses the read without any VACUUM when the start version is older than
    # the retention and is not the latest version (the latest one stays readable)
    assert_read_fails(spark, t, after + 1, latest(spark, t), BY_NAME["retention"].code)
    assert read_error(spark, t, latest(spark, t), latest(spark, t)) is None


def feed_off(spark: SparkSession, t: str, after: int) -> None:
    spark.sql(f"alter table {t} set tblproperties ('delta.enableChangeDataFeed' = 'false')")
    off = latest(spark, t)
    spark.sql(f"insert into {t} values (10, 1)")
    spark.sql(f"alter table {t} set tblproperties ({CDF})")
    on = latest(spark, t)
    spark.sql(f"insert into {t} values (11, 2)")
    assert_read_fails(spark, t, after + 1, latest(spark, t), "DELTA_MISSING_CHANGE_DATA")
    # the version that turns it off is already missing; the one that turns it on is not
    assert "DELTA_MISSING_CHANGE_DATA" in (read_error(spark, t, off, off) or "")
    assert read_error(spark, t, on, latest(spark, t)) is None


def feed_unset(spark: SparkSession, t: str, after: int) -> None:
    spark.sql(f"alter table {t} unset tblproperties ('delta.enableChangeDataFeed')")
    spark.sql(f"insert into {t} values (10, 1)")
    spark.sql(f"alter table {t} set tblproperties ({CDF})")
    spark.sql(f"insert into {t} values (11, 2)")
    assert_read_fails(spark, t, after + 1, latest(spark, t), "DELTA_MISSING_CHANGE_DATA")


def recreated_shorter(spark: SparkSession, t: str, after: int) -> None:
    spark.sql(f"drop table {t}")
    create(spark, t)
    spark.sql(f"insert into {t} values (20, 1)")
    assert latest(spark, t) < after
    assert_read_fails(spark, t, after + 1, after + 1, "DELTA_CDC_START_VERSION_AFTER_LATEST")


def recreated_longer(spark: SparkSession, t: str, after: int) -> None:
    spark.sql(f"drop table {t}")
    create(spark, t)
    for i in range(after + 2):
        spark.sql(f"insert into {t} values ({20 + i}, {i % 2})")
    assert latest(spark, t) > after
    # Delta reads the new table's versions as if they continued the old one: no error,
    # and the rows the old table had are never deleted. Only the check before the read
    # (version `after` committed after the last refresh) stops this.
    assert read_error(spark, t, after + 1, latest(spark, t)) is None


def restored(spark: SparkSession, t: str, after: int) -> None:
    spark.sql(f"insert into {t} values (10, 1)")
    spark.sql(f"update {t} set v = v + 5 where id = 1")
    spark.sql(f"restore table {t} to version as of 1")
    # Delta reads a RESTORE as file-level deletes and inserts, without an error; the
    # package never reads it as a normal change window
    assert read_error(spark, t, after + 1, latest(spark, t)) is None


def column_dropped(spark: SparkSession, t: str, after: int) -> None:
    spark.sql(f"insert into {t} values (10, 1, 'x')")
    spark.sql(f"alter table {t} drop column w")
    spark.sql(f"insert into {t} values (11, 2)")
    assert_read_fails(spark, t, after + 1, latest(spark, t), DATA_SCHEMA)


def replaced_schema(spark: SparkSession, t: str, after: int) -> None:
    spark.sql(f"insert into {t} values (10, 1)")
    spark.sql(f"create or replace table {t} (id bigint, v string) using delta tblproperties ({CDF})")
    replaced = latest(spark, t)
    spark.sql(f"insert into {t} values (12, 'b')")
    assert_read_fails(spark, t, after + 1, latest(spark, t), DATA_SCHEMA)
    # a range that starts at the replacement raises no change-feed error: Delta reads the old
    # rows' files in the new schema, which returns them with NULLs for renamed columns, or
    # (here, int read as string) fails with a raw FAILED_READ_FILE error. The check before
    # the read compares the schema at version `after` with the current one instead.
    error = read_error(spark, t, replaced, latest(spark, t))
    assert error is None or "DELTA_CHANGE_DATA_FEED" not in error, error


PROVOKE: dict[str, Callable[[SparkSession, str, int], None]] = {
    "retention": retention,
    "feed_off": feed_off,
    "feed_unset": feed_unset,
    "recreated_shorter": recreated_shorter,
    "recreated_longer": recreated_longer,
    "restored": restored,
    "column_dropped": column_dropped,
    "replaced_schema": replaced_schema,
}


@dataclass
class Outcome:
    after: int  # the upstream version both models were built at
    provoked: str | None  # an assertion about the direct read that failed, or None
    failures: dict[str, str]  # model -> error message of the run after the provocation
    content: tuple[list, list]  # the fail model's rows before and after
    log_rows: tuple[int, int]  # the fail model's refresh log rows before and after


@pytest.fixture(scope="module")
def outcomes(project: IvmProject) -> dict[str, Outcome]:
    """All cases at once, so the module needs two dbt runs: build every model, provoke
    every case, run every model again."""
    spark = project.spark
    for c in CASES:
        t = f"{project.raw}.t_{c.name}"
        spark.sql(f"drop table if exists {t}")
        if c.name == "column_dropped":
            create(spark, t, "id bigint, v int, w string", c.properties)
            spark.sql(f"insert into {t} values (1, 1, 'a'), (2, 2, 'b')")
            spark.sql(f"insert into {t} values (3, 1, 'c')")
        else:
            create(spark, t, properties=c.properties)
            spark.sql(f"insert into {t} values (1, 1), (2, 2)")
            spark.sql(f"insert into {t} values (3, 1)")
    same = f"{project.raw}.t_same_schema"
    spark.sql(f"drop table if exists {same}")
    create(spark, same)
    spark.sql(f"insert into {same} values (1, 1), (2, 2), (3, 1)")
    for name in KEY_ONLY:
        t = f"{project.raw}.t_{name}"
        spark.sql(f"drop table if exists {t}")
        feed = f" tblproperties ({CDF})" if name == "key_only_later" else ""
        spark.sql(f"create table {t} (id bigint, v int) using delta{feed}")
        spark.sql(f"insert into {t} values (1, 1), (2, 2)")
    project.run("--exclude", "key_only_off")
    later = f"{project.raw}.t_key_only_later"
    later_before = key_only_state(project)

    before = {}
    for c in CASES:
        fail = f"{c.name}_fail"
        rows = sorted(spark.table(f"{project.schema}.{fail}").collect())
        before[c.name] = (latest(spark, f"{project.raw}.t_{c.name}"), rows, len(project.refresh_log(fail)))
    provoked: dict[str, str | None] = {}
    for c in CASES:  # the retention case first: its wait then covers less of the others
        try:
            PROVOKE[c.name](spark, f"{project.raw}.t_{c.name}", before[c.name][0])
            provoked[c.name] = None
        except AssertionError as e:
            provoked[c.name] = f"{c.name}: {e}"
    # replaced with the same schema, as an upstream ivm model's full build does
    spark.sql(
        f"create or replace table {same} using delta tblproperties ({CDF}) "
        "as select * from values (1L, 1), (4L, 2), (5L, 3) as s(id, v)"
    )
    spark.sql(f"alter table {later} set tblproperties ('delta.enableChangeDataFeed' = 'false')")
    spark.sql(f"insert into {later} values (3, 1)")
    failures = project.run_failures()
    result = {
        c.name: Outcome(
            after=before[c.name][0],
            provoked=provoked[c.name],
            failures={m: e for m, e in failures.items() if m.startswith(c.name + "_")},
            content=(before[c.name][1], sorted(spark.table(f"{project.schema}.{c.name}_fail").collect())),
            log_rows=(before[c.name][2], len(project.refresh_log(f"{c.name}_fail"))),
        )
        for c in CASES
    }
    same_failures = {m: e for m, e in failures.items() if m == "same_schema"}
    result["same_schema"] = Outcome(0, None, same_failures, ([], []), (0, 0))
    later_after = key_only_state(project)
    result["key_only"] = Outcome(
        0,
        None,
        {m: e for m, e in failures.items() if m in KEY_ONLY},
        (later_before[0], later_after[0]),
        (later_before[1], later_after[1]),
    )
    return result


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_change_feed_error_fails_or_rebuilds(
    project: IvmProject, outcomes: dict[str, Outcome], name: str
) -> None:
    case, outcome = BY_NAME[name], outcomes[name]
    fail, rebuild = f"{name}_fail", f"{name}_rebuild"
    assert outcome.provoked is None, outcome.provoked
    assert set(outcome.failures) == {fail}, outcome.failures
    message = outcome.failures[fail]
    assert case.code in message and case.what in message, message
    assert "fix: " in message and f"--full-refresh -s {fail}" in message, message
    assert f"upstream shop.t_{name}" in message, message
    # nothing changed: the table's rows, the refresh log (the state the next run starts from)
    assert outcome.content[1] == outcome.content[0]
    assert outcome.log_rows[1] == outcome.log_rows[0]
    assert project.last_refresh(fail)["versions_to"] == {f"shop.t_{name}": str(outcome.after)}

    last = project.last_refresh(rebuild)
    assert last["path"] == "full", last
    assert case.code in last["reason"] and "ivm_on_change_feed_error=rebuild" in last["reason"], last
    project.assert_consistent([rebuild], f"after the rebuild for {case.code}")


def test_replaced_with_the_same_schema_is_read_incrementally(
    project: IvmProject, outcomes: dict[str, Outcome]
) -> None:
    """An upstream replaced with the same schema (e.g. an upstream ivm model rebuilt in full
    by CREATE OR REPLACE TABLE AS SELECT) is read correctly by Delta as deletes and inserts:
    no error, and no rebuild."""
    assert outcomes["same_schema"].failures == {}
    last = project.last_refresh("same_schema")
    assert last["path"] == "incremental", last
    project.assert_consistent(["same_schema"], "after the upstream was replaced with the same schema")


def test_a_key_alone_fails_on_a_delta_table_without_its_feed(
    project: IvmProject, outcomes: dict[str, Outcome]
) -> None:
    """An upstream declared by its key alone that the listing shows to be a Delta table is
    described only when a refresh needs it (never by a no-op), and then fails with IVM031 at
    its first read when its change feed is off: at the first build, or after the feed was
    turned off (nothing changed then)."""
    outcome = outcomes["key_only"]
    assert set(outcome.failures) == set(KEY_ONLY), outcome.failures
    for name in KEY_ONLY:
        message = outcome.failures[name]
        for fragment in (
            "IVM031",
            f"upstream shop.t_{name} at line 2, column",
            "declares only unique_key, which is enough for a Delta table with change data feed, but it is "
            "a Delta table without delta.enableChangeDataFeed=true",
            "SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')",
        ):
            assert fragment in message, message
    assert not project.spark.catalog.tableExists(f"{project.schema}.key_only_off")
    assert outcome.content[1] == outcome.content[0]
    assert outcome.log_rows[1] == outcome.log_rows[0]
