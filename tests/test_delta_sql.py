"""The Delta Lake path at the SQL level (no Delta jars needed): the statements the package
generates for a Delta table and Delta upstreams, rendered by the real macros in the
package's jinja runtime (python/dbt_ivm/macro_runtime.py: no dbt, no Spark; anything that
would reach the warehouse raises) from hand-made refresh inputs, are snapshotted under
tests/golden/delta/ (UPDATE_SNAPSHOTS=1 rewrites them), parse with sqlglot's Spark
dialect, never delete with `DELETE ... IN (subquery)`, and match keys null-safely (<=>).
Also: the Delta change-feed errors are classified, and each leads to the configured
behaviour (fail with an explanation, or rebuild with the reason)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from dbt_ivm.macro_runtime import Column, Runtime
from tests.manifests import MACROS, package_runtime

GOLDEN = Path(__file__).parent / "golden" / "delta"

# One macro renders every case: analyze the model SQL, build the refresh plan from the
# case's hand-made change description, and return the statements of the Delta path.
RENDER_MACRO = Path(__file__).parent / "golden" / "render_delta_cases.sql"

ORDERS = {
    "name": "raw.orders",
    "short": "orders",
    "key": ["order_id"],
    "columns": [
        ["order_id", "bigint"],
        ["customer_id", "bigint"],
        ["amount", "decimal(10,2)"],
        ["status", "string"],
    ],
}
CUSTOMERS = {
    "name": "raw.customers",
    "short": "customers",
    "key": ["customer_id"],
    "columns": [["customer_id", "bigint"], ["region", "string"]],
}
JOIN_SQL = (
    "select o.order_id, o.amount, c.region from raw.orders o "
    "join raw.customers c on o.customer_id = c.customer_id where o.status <> 'cancelled'"
)
JOIN_VISIBLE = [["order_id", "bigint"], ["amount", "decimal(10,2)"], ["region", "string"]]
AGG_SQL = (
    "select c.region, count(*) as n, sum(o.amount) as revenue from raw.orders o "
    "join raw.customers c on o.customer_id = c.customer_id group by c.region"
)
AGG_VISIBLE = [["region", "string"], ["n", "bigint"], ["revenue", "decimal(20,2)"]]
AGG_TYPES = {"__ivm_g_0": "string", "__ivm_s1": "decimal(20,2)"}
MINMAX_SQL = "select customer_id, max(amount) as top, count(*) as n from raw.orders group by customer_id"
MINMAX_VISIBLE = [["customer_id", "bigint"], ["top", "decimal(10,2)"], ["n", "bigint"]]
MINMAX_TYPES = {"__ivm_g_0": "bigint", "__ivm_s0": "decimal(10,2)"}


def with_change(
    up: dict[str, Any], old: int = 0, new: bool = False, feed: str | None = None, **counted: Any
) -> dict[str, Any]:
    """counted: what the change counts read besides old/new (bounds, sets, ids)."""
    changed = dict(up, change={"old": old, "new": new, **counted})
    if feed:
        changed["feed"] = feed
    return changed


CASES: list[dict[str, Any]] = [
    # join-only: DEL/INS of orders (updates), INS only of customers (inserts)
    {
        "name": "join_del_ins",
        "sql": JOIN_SQL,
        "visible": JOIN_VISIBLE,
        "upstreams": [with_change(ORDERS, old=2, new=True), with_change(CUSTOMERS, new=True)],
    },
    # join-only with the changed keys listed by the change counts: the slices are IN lists of
    # the changed keys (an INSERT ... REPLACE WHERE on them), the partners cut by the join keys.
    # What the counts read from tests/test_delta_golden_exec.py's mixed histories: the netted
    # keys (orders: order 5's update is a no-op; customers: 2 comes back as it was, 11 comes
    # and goes) and the customer keys of the new images
    {
        "name": "join_listed_keys",
        "sql": JOIN_SQL,
        "visible": JOIN_VISIBLE,
        "upstreams": [
            with_change(
                ORDERS,
                old=2,
                new=True,
                feed="delta",
                bounds={"min:customer_id": "1", "max:customer_id": "4"},
                sets={"customer_id": '["4", "1", "2"]'},
                ids=[["10"], ["1"], ["2"], ["4"], ["6"], ["7"], ["8"], ["9"]],
            ),
            with_change(
                CUSTOMERS,
                old=1,
                new=True,
                bounds={"min:customer_id": "1", "max:customer_id": "3"},
                sets={"customer_id": '["3", "1"]'},
                ids=[["3"], ["1"]],
            ),
        ],
    },
    # the same deletes with their keys listed: REPLACE WHERE on them, no MERGE
    {
        "name": "join_listed_del_only",
        "sql": JOIN_SQL,
        "visible": JOIN_VISIBLE,
        "upstreams": [
            dict(ORDERS, feed="delta"),
            with_change(CUSTOMERS, old=1, ids=[["5"], ["2"], ["3"], ["4"]]),
        ],
    },
    # join-only: DEL only (deletes of customers), the orders feed is a Delta change feed
    {
        "name": "join_del_only",
        "sql": JOIN_SQL,
        "visible": JOIN_VISIBLE,
        "upstreams": [dict(ORDERS, feed="delta"), with_change(CUSTOMERS, old=1)],
    },
    # join-only, insert-only change: one INSERT
    {
        "name": "join_ins_only",
        "sql": JOIN_SQL,
        "visible": JOIN_VISIBLE,
        "upstreams": [with_change(ORDERS, new=True, feed="delta"), CUSTOMERS],
    },
    {
        "name": "agg_insert_only",
        "sql": AGG_SQL,
        "visible": AGG_VISIBLE,
        "hidden_types": AGG_TYPES,
        "upstreams": [with_change(ORDERS, new=True, feed="delta"), CUSTOMERS],
    },
    {
        "name": "agg_delete_only",
        "sql": AGG_SQL,
        "visible": AGG_VISIBLE,
        "hidden_types": AGG_TYPES,
        "upstreams": [with_change(ORDERS, old=3), CUSTOMERS],
    },
    {
        "name": "agg_mixed",
        "sql": AGG_SQL,
        "visible": AGG_VISIBLE,
        "hidden_types": AGG_TYPES,
        "upstreams": [
            with_change(ORDERS, old=3, new=True, feed="delta"),
            with_change(CUSTOMERS, old=1, new=True),
        ],
    },
    {
        "name": "agg_no_group_by",
        "sql": "select count(*) as n, sum(amount) as revenue from raw.orders",
        "visible": [["n", "bigint"], ["revenue", "decimal(20,2)"]],
        "hidden_types": {"__ivm_s1": "decimal(20,2)"},
        "upstreams": [with_change(ORDERS, old=1, new=True)],
    },
    {
        "name": "distinct_mixed",
        "sql": "select distinct customer_id, status from raw.orders",
        "visible": [["customer_id", "bigint"], ["status", "string"]],
        "upstreams": [with_change(ORDERS, old=1, new=True, feed="delta")],
    },
    # min/max after deletes: the affected groups are recomputed
    {
        "name": "minmax_recompute",
        "sql": MINMAX_SQL,
        "visible": MINMAX_VISIBLE,
        "hidden_types": MINMAX_TYPES,
        "upstreams": [with_change(ORDERS, old=2, new=True, feed="delta")],
    },
    {
        "name": "full_rebuild",
        "full": True,
        "sql": JOIN_SQL,
        "visible": JOIN_VISIBLE,
        "partition_by": ["region"],
        "upstreams": [dict(ORDERS, feed="delta"), CUSTOMERS],
    },
    {
        "name": "full_rebuild_aggregate",
        "full": True,
        "sql": AGG_SQL,
        "visible": AGG_VISIBLE,
        "hidden_types": AGG_TYPES,
        "upstreams": [dict(ORDERS, feed="delta"), dict(CUSTOMERS, feed="delta")],
    },
]

# What Delta says (shortened from its messages) for each change-feed error it raises.
DELTA_MESSAGES = {
    "DELTA_CDC_START_VERSION_AFTER_LATEST": "Provided start version(8) for reading change data is after the "
    "latest version available(5).",
    "DELTA_MISSING_CHANGE_DATA": "Error getting change data for range [4 , 7] as change data was not "
    "recorded for version [5].",
    "DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION": "Cannot time travel beyond "
    "delta.deletedFileRetentionDuration (168 HOURS).",
    "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE": "Retrieving table changes between version 4 and 7 "
    "failed because of an incompatible schema change.",
    # what Delta 4.4 raises for a batch read (tests/test_delta_feed_errors.py provokes it)
    "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA": "Retrieving table changes between version 1 and 3 "
    "failed because of an incompatible data schema.",
}
ERROR_TEXTS = {code: f"[{code}] {message}" for code, message in DELTA_MESSAGES.items()}


FEED_ON = "[delta.enableChangeDataFeed=true, delta.minReaderVersion=1, delta.minWriterVersion=4]"


def described(provider: str, properties: str) -> list[list[str]]:
    """Rows of DESCRIBE TABLE EXTENDED as Spark prints them: columns, then the details."""
    return [
        ["order_id", "bigint", ""],
        ["", "", ""],
        ["# Detailed Table Information", "", ""],
        ["Name", "spark_catalog.raw.orders", ""],
        ["Provider", provider, ""],
        ["Table Properties", properties, ""],
    ]


# upstreams that declare only unique_key: DESCRIBE rows -> (read as a Delta change feed?, what)
DESCRIBED: dict[str, tuple[list[list[str]], dict[str, Any]]] = {
    "delta_with_feed": (
        described("delta", FEED_ON),
        {"ok": True, "what": "a Delta table with change data feed"},
    ),
    "delta_feed_off": (
        described("delta", "[delta.enableChangeDataFeed=false, delta.minReaderVersion=1]"),
        {"ok": False, "what": "a Delta table without delta.enableChangeDataFeed=true"},
    ),
    "delta_no_properties": (
        described("delta", "[delta.minReaderVersion=1, delta.minWriterVersion=2]"),
        {"ok": False, "what": "a Delta table without delta.enableChangeDataFeed=true"},
    ),
    "parquet_with_the_property": (
        described("parquet", "[delta.enableChangeDataFeed=true]"),
        {"ok": False, "what": "a parquet table, not a Delta table"},
    ),
}


@pytest.fixture(scope="module")
def rendered() -> dict[str, Any]:
    """The render macro's returned statements, called with the package's macros in the
    jinja runtime (the macro is a sibling of theirs, as in a project's macros/)."""
    sources = [path.read_text(encoding="utf-8") for path in sorted(MACROS.rglob("*.sql"))]
    runtime = Runtime([*sources, RENDER_MACRO.read_text(encoding="utf-8")])
    result: dict[str, Any] = runtime.macro("render_delta_cases")(
        CASES,
        [*ERROR_TEXTS.values(), "some other failure"],
        {name: rows for name, (rows, _) in DESCRIBED.items()},
    )
    return result


def golden_text(statements: list[list[str]]) -> str:
    parts = [f"-- {i + 1}: {label}\n{sql.strip()}\n" for i, (label, sql) in enumerate(statements)]
    return "\n".join(parts)


def parse(sql: str) -> exp.Expression:
    return sqlglot.parse_one(sql, read="spark")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_delta_statements(rendered: dict[str, Any], case: dict[str, Any]) -> None:
    result = rendered["cases"][case["name"]]
    assert result["issues"] == [], result["issues"]
    statements = result["statements"]
    text = golden_text(statements)
    path = GOLDEN / f"{case['name']}.sql"
    if os.environ.get("UPDATE_SNAPSHOTS") or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs (UPDATE_SNAPSHOTS=1 rewrites it)"

    applies = [sql for label, sql in statements if label == "apply"]
    assert len(applies) == 1, "one write statement per refresh"
    for label, sql in statements:
        tree = parse(sql)
        assert not re.search(r"\bdelete\s+from\b[^;]*\bin\s*\(\s*select", sql, re.I | re.S), label
        for delete in tree.find_all(exp.Delete):
            assert not any(i.args.get("query") for i in delete.find_all(exp.In)), (
                f"{label}: DELETE ... IN (subquery)"
            )
        for merge in tree.find_all(exp.Merge):
            on = merge.args["on"]
            assert not list(on.find_all(exp.EQ)), f"{label}: keys must match with <=>: {on.sql('spark')}"
            if not isinstance(on, exp.Boolean):
                assert list(on.find_all(exp.NullSafeEQ)), (
                    f"{label}: no null-safe key match in {on.sql('spark')}"
                )

    apply = applies[0].lower()
    assert not [label for label, _ in statements if "setting" in label], (
        "no session settings around a write: dbt's threads share the embedded session"
    )
    if case.get("full"):
        assert apply.startswith("create or replace table analytics.")
        assert "using delta" in apply
    elif case["name"] == "join_ins_only":
        assert apply.startswith("insert into analytics.") and "replace where" not in apply
    elif case["name"].startswith("join_listed"):
        # every changed upstream's keys listed: one REPLACE WHERE on literals (Delta allows no subquery there)
        predicate = apply.split("\nselect ", 1)[0]
        assert predicate.startswith(f"insert into analytics.{case['name']} replace where (")
        assert "select" not in predicate and "__ivm_" in predicate
    else:
        assert apply.startswith("merge into analytics.")
    for up in case["upstreams"]:
        changes = [sql for label, sql in statements if label == f"change set of {up['name']}"]
        if up.get("feed") == "delta" and changes:
            # versions (3, 7]: table_changes bounds are inclusive
            assert f"table_changes('{up['name']}', 4, 7)" in changes[0]
        if up.get("feed") == "delta" and case.get("full"):
            # a rebuild reads a Delta upstream exactly at the fixed version
            assert f"from {up['name']} version as of 3)" in apply


@pytest.mark.parametrize("code", sorted(ERROR_TEXTS))
def test_change_feed_errors(rendered: dict[str, Any], code: str) -> None:
    decisions = rendered["errors"][ERROR_TEXTS[code]]
    fail, rebuild = decisions["fail"], decisions["rebuild"]
    assert fail["action"] == "fail"
    assert code in fail["text"] and "fix:" in fail["text"] and "shop.orders" in fail["text"]
    assert "Delta said: " + ERROR_TEXTS[code] in fail["text"]
    assert rebuild["action"] == "rebuild"
    assert rebuild["text"].startswith("change feed of shop.orders unreadable (" + code)
    assert rebuild["text"].endswith("ivm_on_change_feed_error=rebuild")


def test_other_errors_are_not_change_feed_errors(rendered: dict[str, Any]) -> None:
    assert rendered["errors"]["some other failure"]["fail"]["action"] == "unknown"


@pytest.mark.parametrize("name", sorted(DESCRIBED))
def test_a_key_alone_reads_the_delta_change_feed_only_when_it_is_on(
    rendered: dict[str, Any], name: str
) -> None:
    """ivm_detect_change_feeds decides from DESCRIBE TABLE EXTENDED; the parquet case also
    runs for real in tests/test_errors.py (IVM031 with what the table is)."""
    assert rendered["feeds"][name] == DESCRIBED[name][1]


def _commit(op: str) -> dict[str, Any]:
    return {"ts": "2026-01-01 00:00:00", "op": op, "params": {}}


@pytest.mark.parametrize(
    ("ops", "suffices"),
    [
        # versions 3..7 of plain writes: the properties read at the start hold throughout
        ({3: "WRITE", 4: "MERGE", 5: "DELETE", 6: "UPDATE", 7: "OPTIMIZE"}, True),
        # the stored version itself may be the table's creation
        ({3: "CREATE TABLE", 4: "WRITE"}, True),
        # a later commit that sets properties or replaces the table: the whole history
        ({3: "WRITE", 4: "SET TBLPROPERTIES", 5: "WRITE"}, False),
        ({3: "WRITE", 4: "UNSET TBLPROPERTIES"}, False),
        ({3: "WRITE", 4: "CREATE OR REPLACE TABLE AS SELECT"}, False),
        ({3: "WRITE", 4: "REPLACE TABLE"}, False),
        # commits since the versions were fixed pushed the stored version out of the limit
        ({4: "WRITE", 5: "WRITE", 6: "WRITE", 7: "WRITE", 8: "WRITE"}, False),
    ],
)
def test_a_limited_history_suffices_for_the_feed_check(ops: dict[int, str], suffices: bool) -> None:
    """The change feed check reads the history from the stored version (3) on, and all of it
    only when that window cannot tell whether the feed was on throughout."""
    commits = {v: _commit(op) for v, op in ops.items()}
    assert package_runtime().macro("_ivm_delta_window_suffices")(commits, 3) is suffices


@pytest.mark.parametrize(
    ("upstream", "ids", "guarded"),
    [
        ("source", None, False),  # a declared row key: a NULL is IVM062 before the apply
        ("source", [["cast('2' as bigint)"]], False),  # listed keys are literals, never NULL
        ("ivm model", None, True),  # an ivm model's row key may be a group key of NULL
    ],
)
def test_the_null_key_guard_stays_where_a_deleted_key_can_be_null(
    upstream: str, ids: list[list[str]] | None, guarded: bool
) -> None:
    runtime = Runtime.from_directory(MACROS)
    hidden = [{"column": "customer_id", "name": "__ivm_customers__customer_id"}]
    up = {"kind": "change_log", "unique_key": ["customer_id"], "hidden": hidden}
    if upstream == "ivm model":
        up = {"name": "customers", "short": "customers", "kind": "change_log"}
        up["relation"] = "analytics.customers"
        described = [("Provider", "delta"), ("Table Properties", "[dbt_ivm.row_key=customer_id]")]
        up = runtime.macro("ivm_resolve_ivm_upstream")(up, described)
        assert up["hidden"] == hidden
    plan = [{"index": 0, "up": up, "changed": True, "old": 1, "ids": ids, "change_view": "__ivm_chg"}]
    deletes = runtime.macro("_ivm_delta_join_deletes")(plan, False)
    assert deletes["not_null"] is not guarded
    columns = [Column("region", "string"), Column("__ivm_customers__customer_id", "bigint")]
    merge = runtime.macro("ivm_delta_join_merge_sql")(
        "analytics.m",
        columns,
        "(select * from analytics.m where false)",
        deletes["identity"],
        deletes["keys"],
        None,
        None,
        deletes["not_null"],
    )
    parse(merge)
    # the guard reads the MERGE's own table in its source (Delta then copies the source)
    assert ("from analytics.m where `__ivm_customers__customer_id` is null" in merge) is guarded
