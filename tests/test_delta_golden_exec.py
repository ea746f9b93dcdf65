"""Every golden Delta statement (tests/golden/delta/*.sql, rendered by the real macros in
tests/test_delta_sql.py) executed for real on Delta Lake.

For each case the relations its statements reference are created in the Spark session:
`raw.orders` / `raw.customers` are Delta tables with change data feed whose history has
versions 0-3 (the state the target was built from) and, for an upstream the case changes,
versions 4-7 of changes of the kind the case declares (inserts only, deletes only, or
mixed inserts / updates / deletes, including a no-op update and a row inserted and deleted
within the window). A plain change-log upstream also gets `raw.<t>_changes`, the same
history as a change log. The target `analytics.<case>` is a Delta table holding the
definition (with its hidden columns) over the upstreams at version 3.

Then the case's statements run: its change sets as temporary views (the names its apply
statement reads them by), then the one apply statement.
Afterwards the target must equal the definition over the upstreams' latest versions,
with exactly one new commit (what an interrupted refresh is resolved by).

The upstream histories are built once (one table per kind of change) and each case
registers them as `raw.*` external tables, so the module stays fast."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.test_delta_sql import CASES, GOLDEN

pytestmark = pytest.mark.usefixtures("delta")

CDF = "tblproperties ('delta.enableChangeDataFeed' = 'true')"
COLUMNS = {
    "orders": "order_id bigint, customer_id bigint, amount decimal(10,2), status string",
    "customers": "customer_id bigint, region string",
}
# versions 1-3: the state the target was built from
BASE = {
    "orders": [
        "insert into {t} values (1, 1, 10.00, 'open'), (2, 1, 20.00, 'open'), (3, 2, 5.00, 'cancelled')",
        "insert into {t} values (4, 2, 7.50, 'open'), (5, 3, null, 'open'), (6, null, 1.00, 'open')",
        "insert into {t} values (7, 3, 3.00, 'shipped'), (8, 1, 4.00, 'open')",
    ],
    "customers": [
        "insert into {t} values (1, 'eu'), (2, 'us')",
        "insert into {t} values (3, null), (5, 'eu')",
        "insert into {t} values (4, 'apac')",
    ],
}
# versions 4-7, by the kind of change a case declares: (old, new) -> commits
CHANGES = {
    "orders": {
        "inserts": [
            "insert into {t} values (9, 2, 11.00, 'open')",
            "insert into {t} values (10, 4, 2.00, 'open')",
            "insert into {t} values (11, 1, 6.00, 'cancelled')",
            "insert into {t} values (12, 3, 9.99, 'open'), (13, 1, 8.00, 'open')",
        ],
        "deletes": [
            "delete from {t} where order_id = 1",
            "delete from {t} where order_id = 3",
            "delete from {t} where order_id in (5, 6)",
            "delete from {t} where order_id = 7",
        ],
        "mixed": [
            # the max of customer 1 (order 2) goes away; order 5 gets a no-op update
            "update {t} set amount = amount + 1 where order_id in (1, 4)",
            "delete from {t} where order_id = 2",
            "merge into {t} t using (select 9L as order_id, 2L as customer_id, 11.00 as amount, "
            "'open' as status union all select 5, 3, null, 'open' "
            "union all select 8, 1, 4.00, 'cancelled') s "
            "on t.order_id = s.order_id when matched then update set * when not matched then insert *",
            "merge into {t} t using (select 7L as order_id, 4L as customer_id, 3.00 as amount, "
            "'shipped' as status union all select 10, null, 3.00, 'open' "
            "union all select 6, null, null, null) s "
            "on t.order_id = s.order_id when matched and s.status is null then delete "
            "when matched then update set * when not matched then insert *",
        ],
    },
    "customers": {
        "inserts": [
            "insert into {t} values (6, 'eu')",
            "insert into {t} values (7, 'latam')",
            "insert into {t} values (8, null)",
            "insert into {t} values (9, 'us'), (10, 'eu')",
        ],
        "deletes": [
            "delete from {t} where customer_id = 2",
            "delete from {t} where customer_id = 3",
            "delete from {t} where customer_id = 5",
            "delete from {t} where customer_id = 4",
        ],
        "mixed": [
            "update {t} set region = 'apac' where customer_id = 1",
            "delete from {t} where customer_id = 2",
            "insert into {t} values (2, 'us'), (11, 'latam')",
            "merge into {t} t using (select 3L as customer_id, 'eu' as region union all select 11, null) s "
            "on t.customer_id = s.customer_id when matched and s.region is null then delete "
            "when matched then update set *",
        ],
    },
}

# The definition of each case's model with its hidden columns, over {orders} / {customers}.
JOIN_FULL = (
    "select o.order_id, o.amount, c.region, o.order_id as __ivm_orders__order_id, "
    "c.customer_id as __ivm_customers__customer_id "
    "from {orders} o join {customers} c on o.customer_id = c.customer_id where o.status <> 'cancelled'"
)
AGG_FULL = (
    "select c.region, count(*) as n, sum(o.amount) as revenue, c.region as __ivm_g_0, "
    "count(*) as __ivm_count, count(*) as __ivm_s0, sum(o.amount) as __ivm_s1, count(o.amount) as __ivm_n1 "
    "from {orders} o join {customers} c on o.customer_id = c.customer_id group by c.region"
)
FULL = {
    "join": JOIN_FULL,
    "agg": AGG_FULL,
    "agg_no_group_by": "select count(*) as n, sum(amount) as revenue, count(*) as __ivm_count, "
    "count(*) as __ivm_s0, sum(amount) as __ivm_s1, count(amount) as __ivm_n1 from {orders}",
    "distinct_mixed": "select customer_id, status, count(*) as __ivm_count from {orders} "
    "group by customer_id, status",
    "minmax_recompute": "select customer_id, max(amount) as top, count(*) as n, customer_id as __ivm_g_0, "
    "count(*) as __ivm_count, max(amount) as __ivm_s0, count(*) as __ivm_s1 from {orders} "
    "group by customer_id",
}
BY_NAME = {c["name"]: c for c in CASES}


def definition(case: dict[str, Any]) -> str:
    name = case["name"]
    if name in FULL:
        return FULL[name]
    return JOIN_FULL if name.startswith("join") or name == "full_rebuild" else AGG_FULL


def change_kind(up: dict[str, Any]) -> str:
    """Which history an upstream of a case gets: unchanged, or the kind of its changes."""
    change = up.get("change")
    if not change:
        return "unchanged"
    if change["old"] and change["new"]:
        return "mixed"
    return "deletes" if change["old"] else "inserts"


def golden_statements(name: str) -> list[tuple[str, str]]:
    """The statements of a golden file: [(label, sql)] in order."""
    parts = re.split(r"^-- \d+: (.*)$", (GOLDEN / f"{name}.sql").read_text(), flags=re.M)
    return [(parts[i].strip(), parts[i + 1].strip()) for i in range(1, len(parts), 2)]


def staged_view(case: str, label: str) -> str | None:
    """The temporary view that holds a change set under the name the golden statements give
    it (the materialization reads the same SQL inline)."""
    if label.startswith("change set of "):
        return f"__ivm_{case}_chg_" + label.removeprefix("change set of ").split(".")[1]
    return None


@pytest.fixture(scope="module")
def histories(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    """One Delta table with change data feed per (upstream, kind of change): `golden_src.<t>_<kind>`.
    Versions 0-3 are built once per upstream and copied (a Delta table's directory holds
    its whole history), then each copy gets its versions 4-7."""
    # tiny tables: Delta's state reconstruction need not spread over 50 tasks
    spark.conf.set("spark.databricks.delta.snapshotPartitions", "1")
    spark.sql("drop database if exists golden_src cascade")
    spark.sql("create database golden_src")
    root = tmp_path_factory.mktemp("golden_delta")
    locations = {}
    for table in ("orders", "customers"):
        base = root / f"{table}_unchanged"
        spark.sql(f"create table delta.`{base}` ({COLUMNS[table]}) using delta {CDF}")
        for statement in BASE[table]:
            spark.sql(statement.format(t=f"delta.`{base}`"))
        for kind in ("unchanged", "inserts", "deletes", "mixed"):
            location = root / f"{table}_{kind}"
            if kind != "unchanged":
                shutil.copytree(base, location)
            t = f"golden_src.{table}_{kind}"
            spark.sql(f"create table {t} using delta location '{location}'")
            for statement in [] if kind == "unchanged" else CHANGES[table][kind]:
                spark.sql(statement.format(t=t))
            assert latest_version(spark, t) == (3 if kind == "unchanged" else 7), t
            locations[(table, kind)] = str(location)
    return locations


def latest_version(spark: SparkSession, table: str) -> int:
    return spark.sql(f"describe history {table} limit 1").collect()[0]["version"]


def rows(spark: SparkSession, sql: str) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in spark.sql(sql).collect()), key=repr)


@pytest.fixture
def case_relations(
    request: pytest.FixtureRequest, spark: SparkSession, histories: dict[tuple[str, str], str]
) -> Iterator[dict[str, Any]]:
    """raw.orders / raw.customers (and change logs) of the case, and its target built at v3."""
    case = BY_NAME[request.param]
    for db in ("raw", "analytics"):
        spark.sql(f"drop database if exists {db} cascade")
        spark.sql(f"create database {db}")
    for up in case["upstreams"]:
        table = up["short"]
        kind = change_kind(up)
        spark.sql(f"create table {up['name']} using delta location '{histories[(table, kind)]}'")
        if up.get("feed") != "delta":
            # the same history as a plain change log
            history = f"table_changes('golden_src.{table}_{kind}', 0)"
            spark.sql(f"create view {up['name']}_changes as select * from {history}")
    full = definition(case)
    at_v3 = full.format(
        orders="(select * from raw.orders version as of 3)",
        customers="(select * from raw.customers version as of 3)",
    )
    target = f"analytics.{case['name']}"
    if case.get("full"):
        # a stale table of another shape: the golden CREATE OR REPLACE rebuilds it
        spark.sql(f"create table {target} using delta as select 1 as stale")
    else:
        apply = next(sql for label, sql in golden_statements(case["name"]) if label == "apply")
        # the column list of an INSERT or MERGE, or the select list of a REPLACE WHERE
        listed = re.search(r"\binsert (?:into \S+ )?\(([^)]*)\)", apply)
        names = listed or re.search(r"\nselect (.*?) from ", apply)
        assert names, apply
        columns = [c.strip().strip("`") for c in names.group(1).split(",")]
        types = dict(case["visible"]) | case.get("hidden_types", {})
        typed = ", ".join(f"`{c}` {types.get(c, 'bigint')}" for c in columns)
        spark.sql(f"create table {target} ({typed}) using delta {CDF}")
        quoted = ", ".join(f"`{c}`" for c in columns)
        spark.sql(f"insert into {target} select {quoted} from ({at_v3})")
    yield {"case": case, "target": target, "full": full, "at_v3": at_v3}
    for label, _ in golden_statements(case["name"]):
        view = staged_view(case["name"], label)
        if view:
            spark.sql(f"drop view if exists {view}")


def differences(spark: SparkSession, table: str, query: str, columns: list[str]) -> list[tuple[Any, ...]]:
    """Rows on one side only (multiset). An aggregate's sum state over only NULLs is 0 after a
    MERGE and NULL after a build; the visible column reads NULL either way (it is guarded
    by the state's non-null count), so states compare with NULL as 0."""
    cols = ", ".join(
        f"coalesce(`{c}`, 0) as `{c}`" if re.fullmatch(r"__ivm_[sn]\d+", c) else f"`{c}`" for c in columns
    )
    return rows(
        spark,
        f"select 'table', * from (select {cols} from {table} except all select {cols} from ({query})) "
        f"union all select 'definition', * "
        f"from (select {cols} from ({query}) except all select {cols} from {table})",
    )


@pytest.mark.parametrize("case_relations", [c["name"] for c in CASES], indirect=True)
def test_golden_statements_run_on_delta(spark: SparkSession, case_relations: dict[str, Any]) -> None:
    case, target = case_relations["case"], case_relations["target"]
    statements = golden_statements(case["name"])
    assert [label for label, _ in statements].count("apply") == 1
    before = latest_version(spark, target)
    for label, sql in statements:
        view = staged_view(case["name"], label)
        if view:
            spark.sql(f"drop view if exists {view}")
            spark.sql(f"create temporary view {view} as {sql}")
            continue
        assert label == "apply", label
        spark.sql(sql)

    # the target now holds the definition over the upstreams' latest versions
    latest = case_relations["full"].format(orders="raw.orders", customers="raw.customers")
    columns = spark.table(target).columns
    assert not differences(spark, target, latest, columns), f"{target} differs from its definition"
    assert rows(spark, f"select * from {target}"), "the check compares something"

    # one commit
    history = spark.sql(f"describe history {target}").collect()
    assert history[0]["version"] == before + 1, "one commit per refresh"
    if case.get("full"):
        assert history[0]["operation"] == "CREATE OR REPLACE TABLE AS SELECT"
        detail = spark.sql(f"describe detail {target}").collect()[0]
        assert list(detail["partitionColumns"]) == case.get("partition_by", [])
        assert detail["properties"].get("delta.enableChangeDataFeed") == "true"
        return
    writes = case["name"] == "join_ins_only" or case["name"].startswith("join_listed")
    assert history[0]["operation"] == ("WRITE" if writes else "MERGE")


def test_histories_match_the_declared_changes(
    spark: SparkSession, histories: dict[tuple[str, str], str]
) -> None:
    """The kinds of change the cases declare are what the histories hold in versions 4-7."""
    for (table, kind), _ in histories.items():
        if kind == "unchanged":
            continue
        types = {
            r[0]
            for r in spark.sql(
                f"select distinct _change_type from table_changes('golden_src.{table}_{kind}', 4, 7)"
            ).collect()
        }
        expected = {"inserts": {"insert"}, "deletes": {"delete"}}.get(kind)
        if expected:
            assert types == expected, (table, kind, types)
        else:
            assert {"insert", "delete", "update_preimage", "update_postimage"} <= types, (table, kind, types)
