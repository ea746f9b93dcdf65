"""A small change set is read once (macros/change_capture/change_sets.sql): for a Delta change
feed whose commits tell its change is small, or a change log whose window the change count
counts to be small, the change count fetches the netted rows as text and the refresh reads
them as literal rows from then on. Values of every listed type, NULLs and awkward text come
back exactly (the tables equal their definitions); an upstream with a column that has no
exact text form (a double) and a change above the limit are read from their change data as
before."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest

from dbt_ivm.changelog import Op, sql_literal
from tests.manifests import package_runtime
from tests.support import IvmProject, format_project, sources_yaml

EVENTS = "id bigint, grp int, at timestamp, day date, ok boolean, amount decimal(12,3), note string"
EVENTS_NAMES = ("id", "grp", "at", "day", "ok", "amount", "note")
TAGS = "tag_id bigint, event_id bigint, weight double"

MODELS = {
    "events_copy": "select id, at, day, ok, amount, note from {{ source('shop', 'events') }} where id < 1000",
    "events_tagged": """\
        select e.id, e.at, e.note, t.tag_id, t.weight
        from {{ source('shop', 'events') }} e join {{ source('shop', 'tags') }} t on t.event_id = e.id""",
    # min/max: the affected groups are recomputed after deletes; the old images are read too
    "by_day": """\
        select day, ok, count(*) as n, sum(amount) as total, min(at) as first_at, max(note) as last_note
        from {{ source('shop', 'events') }} group by day, ok""",
    # joined on a column that is not the row key: the tags are cut to the changed events'
    # groups, listed from the collected rows (new images, and old ones for the aggregate)
    "events_by_group": """\
        select e.id, e.grp, t.tag_id, t.weight
        from {{ source('shop', 'events') }} e join {{ source('shop', 'tags') }} t on t.tag_id = e.grp""",
    "tags_per_group": """\
        select t.tag_id, count(*) as n, sum(e.amount) as total
        from {{ source('shop', 'events') }} e join {{ source('shop', 'tags') }} t on t.tag_id = e.grp
        group by t.tag_id""",
}

# awkward values of each listed type: NULLs, quotes, backslashes, non-ASCII text, a line
# break, what Spark would take for variables, instants before 1970 and with microseconds,
# the first and last dates, negatives
ODD = [
    {
        "id": 1,
        "grp": 7,
        "at": datetime(1969, 12, 31, 23, 59, 59, 999999),
        "day": date(1, 1, 1),
        "ok": True,
        "amount": Decimal("-123456789.125"),
        "note": "it's a \\ back'slash",
    },
    {"id": 2, "grp": None, "at": None, "day": None, "ok": None, "amount": None, "note": None},
    {
        "id": 3,
        "grp": 11,
        "at": datetime(2024, 3, 10, 2, 30, 0, 123456),
        "day": date(9999, 12, 31),
        "ok": False,
        "amount": Decimal("0.001"),
        "note": "naïve ✓ line\nbreak ${env:HOME} ${spark.app.name}",
    },
]


def row(i: int, **values: Any) -> dict[str, Any]:
    base = {
        "id": i,
        "grp": i % 5,
        "at": datetime(2024, 1, 1, 12, 0, i % 60),
        "day": date(2024, 1, 1 + i % 3),
        "ok": i % 2 == 0,
        "amount": Decimal(i) / 8,
        "note": f"n{i}",
    }
    return {**base, **values}


@pytest.fixture(scope="module", params=["parquet", "delta"])
def shop(request: pytest.FixtureRequest, project_factory) -> Iterator[tuple[IvmProject, Any, Any, str]]:
    project, fmt = format_project(request, project_factory, "listed")
    events_rows = [row(i) for i in range(10, 20)]
    tags_rows = [{"tag_id": i, "event_id": 10 + i % 10, "weight": i / 3} for i in range(15)]
    events, events_declared = project.tracked_table(fmt, "events", EVENTS, events_rows, ["id"])
    tags, tags_declared = project.tracked_table(fmt, "tags", TAGS, tags_rows, ["tag_id"])
    declared = {"events": events_declared, "tags": tags_declared}
    project.write("models/sources.yml", sources_yaml(project.raw, declared))
    for name, sql in MODELS.items():
        project.write(
            f"models/{name}.sql", f"{{{{ config(materialized='ivm', file_format='{fmt}') }}}}\n{sql}\n"
        )
    project.run()
    yield project, events, tags, fmt


def change_reads(project: IvmProject, fmt: str, table: str) -> str:
    """How a statement reads `table`'s change data."""
    return f"table_changes('{project.raw}.{table}'" if fmt == "delta" else f"{project.raw}.{table}_changes"


def writes(sent: list[str]) -> list[str]:
    """The statements that write the model's table or scratch (not its refresh log rows,
    which on parquet read the change logs' latest versions)."""
    return [
        s
        for s in sent
        if s.split(" ", 1)[0] in ("merge", "insert", "create") and "__ivm_refresh_log " not in s[:200]
    ]


def scratch_writes(sent: list[str]) -> list[str]:
    """The statements that create the model's scratch table."""
    return [s for s in sent if s.startswith("create") and "__ivm_keys__" in s[:200]]


def test_listed_values_come_back_exactly(shop) -> None:
    """Odd values inserted, updated to and deleted from: every model equals its definition.
    Only the change count reads the change data of events (listable), while the writes
    after it still read that of tags (a double column), on both formats."""
    project, events, tags, fmt = shop
    events.apply([Op("insert", r) for r in ODD])
    events.apply(
        [
            Op("update", row(10, **{k: v for k, v in ODD[0].items() if k != "id"})),
            Op("update", row(11, **{k: v for k, v in ODD[1].items() if k != "id"})),
            Op("delete", {"id": 12}),
        ]
    )
    tags.apply(
        [
            Op("update", {"tag_id": 1, "event_id": 3, "weight": 0.1}),
            Op("insert", {"tag_id": 99, "event_id": 1, "weight": -0.0}),
        ]
    )
    sent = project.statements()
    for model in MODELS:
        assert project.last_path(model) == "incremental", project.last_refresh(model)
        assert writes(sent[model]), model
        rereads = [s for s in writes(sent[model]) if change_reads(project, fmt, "events") in s]
        assert not rereads, model
    assert [s for s in writes(sent["events_tagged"]) if change_reads(project, fmt, "tags") in s]
    # on parquet the aggregate's few merged groups (decimal sums, counts) are listed, not
    # written to its scratch table
    assert not scratch_writes(sent["tags_per_group"])
    project.assert_consistent(list(MODELS), "after odd values were inserted, updated to and deleted")
    copied = project.spark.sql(f"select note from {project.schema}.events_copy where id = 3").collect()
    assert [r.note for r in copied] == [ODD[2]["note"]]

    # the odd rows updated again and deleted: their old images are read back from the literals
    events.apply(
        [Op("update", {**ODD[2], "id": 1}), Op("update", row(3, note=None, at=None)), Op("delete", {"id": 2})]
    )
    project.run()
    for model in MODELS:
        assert project.last_path(model) == "incremental", project.last_refresh(model)
    project.assert_consistent(list(MODELS), "after the odd rows changed again")


def test_a_change_set_above_the_listing_limit_is_read_from_the_change_data(shop) -> None:
    project, events, _, fmt = shop
    # one more row than the most the count lists (1,000)
    added = [row(i) for i in range(2000, 3001)]
    if fmt == "delta":  # one commit
        values = ", ".join("(" + ", ".join(sql_literal(r[n]) for n in EVENTS_NAMES) + ")" for r in added)
        project.spark.sql(f"insert into {project.raw}.events values {values}")
    else:
        events.apply([Op("insert", r) for r in added])
    sent = project.statements()
    assert [s for s in writes(sent["by_day"]) if change_reads(project, fmt, "events") in s]
    # too many changed rows to list the merged groups: parquet writes them to the scratch table
    assert bool(scratch_writes(sent["tags_per_group"])) == (fmt == "parquet")
    project.assert_consistent(list(MODELS), "after 1,001 inserted rows")
    # above the listing limit, the key lists of a change whose commits bound it (Delta) or
    # whose window is counted (parquet) are collected in the counting pass (collect_set)
    # instead of subqueries that net it again
    assert_lists_in_counting_pass(sent["events_by_group"], fmt)

    # updated (new and old images, a join column moved) and deleted above the limit
    if fmt == "delta":
        project.spark.sql(f"update {project.raw}.events set grp = grp + 1, note = 'moved' where id >= 2000")
        project.spark.sql(f"delete from {project.raw}.events where id between 2000 and 2010 or id = 13")
    else:
        moved = [Op("update", row(i, grp=i % 5 + 1, note="moved")) for i in range(2011, 3001)]
        events.apply([*moved, *[Op("delete", {"id": i}) for i in [*range(2000, 2011), 13]]])
    sent = project.statements()
    assert_lists_in_counting_pass(sent["events_by_group"], fmt)
    for model in MODELS:
        assert project.last_path(model) == "incremental", project.last_refresh(model)
    project.assert_consistent(list(MODELS), "after about 1,000 rows were updated and 12 deleted")


def assert_lists_in_counting_pass(sent: list[str], fmt: str) -> None:
    """The one change count of a refresh collects its key lists in its own pass, never in
    subqueries: on Delta the commits bound the change, on parquet the pass counts the
    change log's window and collects under that gate."""
    counts = [t for t in sent if t.startswith("select to_json(array(")]
    assert len(counts) == 1
    assert "collect_set(" in counts[0]
    assert "select distinct" not in counts[0]
    assert ("max(__ivm_size) <= 100000" in counts[0]) == (fmt == "parquet")


def test_the_bound_on_a_delta_change_comes_from_the_commits_metrics() -> None:
    """In the macro runtime, no Spark: which commits tell how many change rows they add, and
    the bound over a change window, none as soon as one commit is missing or silent."""
    runtime = package_runtime()
    rows = runtime.macro("_ivm_delta_commit_rows")
    assert rows("WRITE", {"mode": "Append"}, {"numOutputRows": "7"}) == 7
    assert rows("WRITE", {"mode": "Overwrite"}, {"numOutputRows": "7"}) is None
    merged = {"numTargetRowsInserted": "2", "numTargetRowsUpdated": "3", "numTargetRowsDeleted": "1"}
    assert rows("MERGE", {}, merged) == 6
    assert rows("UPDATE", {}, {"numUpdatedRows": "4"}) == 4
    assert rows("DELETE", {}, {"numRemovedFiles": "1"}) is None
    assert rows("OPTIMIZE", {}, {}) == 0
    assert rows("RESTORE", {}, {"numRestoredFiles": "3"}) is None
    # dbt's result tables hold map columns as JSON text
    assert rows("WRITE", '{"mode": "Append"}', '{"numOutputRows": "7"}') == 7
    assert rows("UPDATE", {}, "{numUpdatedRows=4}") is None

    bound = runtime.macro("_ivm_change_rows_bound")
    commits = {4: {"rows": 10}, 5: {"rows": 0}, 6: {"rows": 90}, 7: {"rows": None}}
    feed = {"feed": "delta", "recent_commits": commits}
    assert bound({"up": feed, "from": "3", "to": "6"}) == 100
    assert bound({"up": feed, "from": "2", "to": "6"}) is None
    assert bound({"up": feed, "from": "5", "to": "7"}) is None
    assert bound({"up": {**feed, "feed": "ivm"}, "from": "3", "to": "4"}) is None
