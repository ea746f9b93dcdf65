"""Key ranges and key lists of a join term (macros/change_sql/join_changes.sql): which columns
of a changed upstream cut its join partners to a range or a list of literals, which changed
row keys are listed as literals to find the deleted slices, and the SQL that gives; in the
macro runtime, no Spark. The differential tests and tests/test_delta_golden_exec.py check
the refreshed tables against their definitions."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlglot

from dbt_ivm.macro_runtime import Column, Runtime
from tests.manifests import package_runtime


@pytest.fixture(scope="module")
def runtime() -> Runtime:
    return package_runtime()


def plan() -> list[dict[str, Any]]:
    """orders (0) joins lineitem (1) by order key and customer (2) by customer key; lineitem
    joins part (3) by part key."""
    return [
        {
            "index": 0,
            "columns": [
                Column("o_orderkey", "bigint"),
                Column("o_custkey", "int"),
                Column("o_total", "double"),
                Column("o_day", "date"),
                Column("o_clerk", "string"),
                Column("o_region", "string"),
            ],
        },
        {
            "index": 1,
            "columns": [
                Column("l_orderkey", "bigint"),
                Column("l_partkey", "bigint"),
                Column("l_total", "double"),
            ],
        },
        {
            "index": 2,
            "columns": [
                Column("c_custkey", "decimal(12,0)"),
                Column("c_since", "timestamp"),
                Column("c_clerk", "string collate UTF8_LCASE"),
                Column("c_region", "int"),
            ],
        },
        {"index": 3, "columns": [Column("p_partkey", "bigint")]},
    ]


EDGES = [
    {"a": 1, "ca": "l_orderkey", "b": 0, "cb": "o_orderkey"},
    {"a": 0, "ca": "o_custkey", "b": 2, "cb": "c_custkey"},
    {"a": 0, "ca": "o_total", "b": 1, "cb": "l_total"},
    {"a": 0, "ca": "o_day", "b": 2, "cb": "c_since"},
    {"a": 0, "ca": "o_clerk", "b": 2, "cb": "c_clerk"},
    {"a": 0, "ca": "o_region", "b": 2, "cb": "c_region"},
    {"a": 1, "ca": "l_partkey", "b": 3, "cb": "p_partkey"},
]


def test_only_columns_whose_text_and_order_serve_are_ranged(runtime: Runtime) -> None:
    steps = plan()
    ranged = runtime.macro("_ivm_range_columns")(steps[0], steps, EDGES)
    # integers against a decimal are one kind; doubles, a date against a timestamp, a
    # collated string and a string against an integer are not ranged
    assert ranged == {
        "o_orderkey": {"name": "o_orderkey", "type": "bigint", "partners": ["1.l_orderkey"]},
        "o_custkey": {"name": "o_custkey", "type": "int", "partners": ["2.c_custkey"]},
    }


def test_ranges_are_read_over_new_and_old_images(runtime: Runtime) -> None:
    ranged = {"k": {"name": "K", "type": "bigint", "partners": ["1.x"]}}
    sql = runtime.macro("_ivm_key_ranges_sql")(ranged, "__ivm_new", True)
    assert sql == (
        "map('min:k', cast(least(min(case when __ivm_new then `K` end), min(__ivm_before.`K`)) as string), "
        "'max:k', cast(greatest(max(case when __ivm_new then `K` end), max(__ivm_before.`K`)) as string))"
    )
    assert runtime.macro("_ivm_key_ranges_sql")({}, "true", False) == "cast(map() as map<string, string>)"
    sqlglot.parse_one(f"select {sql} from t", read="spark")


@pytest.mark.parametrize(
    ("text", "dtype", "literal"),
    [
        ("20", "bigint", "20L"),
        ("-3", "INT", "-3"),
        ("7", "smallint", "7S"),
        ("7", "tinyint", "7Y"),
        ("2026-01-31", "date", "date'2026-01-31'"),
        ("O'Brien", "string", "'O\\'Brien'"),
        # what is not the plain text of its type stays a cast, which checks it
        ("1.50", "decimal(12,2)", "cast('1.50' as decimal(12,2))"),
        ("1e3", "bigint", "cast('1e3' as bigint)"),
        ("+10000-01-01", "date", "cast('+10000-01-01' as date)"),
        ("5) or (true", "int", "cast('5) or (true' as int)"),
        (None, "bigint", "cast(null as bigint)"),
    ],
)
def test_listed_values_are_typed_literals(
    runtime: Runtime,
    text: str | None,
    dtype: str,
    literal: str,
) -> None:
    assert runtime.macro("_ivm_typed_literals")([text], dtype) == [literal]
    sqlglot.parse_one(f"select {literal}", read="spark")


def test_a_list_of_literals_is_typed_value_by_value(runtime: Runtime) -> None:
    literals = runtime.macro("_ivm_typed_literals")
    assert literals(["3", "-20", "7"], "bigint") == ["3L", "-20L", "7L"]
    assert literals(["2026-01-31"], "date") == ["date'2026-01-31'"]
    assert literals([], "int") == []
    # one value that is not plain: the others keep their typed literals
    assert literals(["1", None, "x"], "int") == ["1", "cast(null as int)", "cast('x' as int)"]
    # a line break inside a value never splits it into two literals
    assert literals(["5\n6", "7"], "int") == ["cast('5\n6' as int)", "7"]


def test_bounds_are_literals_of_the_column_type(runtime: Runtime) -> None:
    ranged = {"k": {"name": "k", "type": "string", "partners": ["1.x"]}}
    literals = runtime.macro("_ivm_key_range_literals")({"min:k": "O'Brien", "max:k": None}, ranged, {}, {})
    # a NULL bound (no non-NULL changed key) matches no row, as the equality would
    assert literals == {
        "k": {
            "lo": "'O\\'Brien'",
            "hi": "cast(null as string)",
            "keys": None,
            "partners": ["1.x"],
        }
    }


def test_partners_one_equality_away_are_cut_to_the_range(runtime: Runtime) -> None:
    steps = plan()
    changed = steps[0]
    ranged = runtime.macro("_ivm_range_columns")(changed, steps, EDGES)
    changed.update(
        {
            "broadcast": True,
            "ranges": runtime.macro("_ivm_key_range_literals")(
                {
                    "min:o_orderkey": "100",
                    "max:o_orderkey": "250",
                    "min:o_custkey": "7",
                    "max:o_custkey": "7",
                },
                ranged,
                {},
                changed,
            ),
        }
    )
    relations = {i: f"up{i}" for i in range(4)}
    out = runtime.macro("_ivm_reduced_relations")(EDGES, relations, changed, steps)
    assert "`l_orderkey` between 100L and 250L" in out[1]
    assert "`c_custkey` between 7 and 7" in out[2]
    # the part is cut by the lineitems the range cut, not by a range of its own
    assert "between" not in out[3].replace(out[1], "")
    for relation in out.values():
        sqlglot.parse_one(f"select * from {relation} t", read="spark")


def test_no_range_without_counted_ranges(runtime: Runtime) -> None:
    steps = plan()
    changed = steps[0]
    changed.update({"broadcast": True})
    out = runtime.macro("_ivm_reduced_relations")(EDGES, {i: f"up{i}" for i in range(4)}, changed, steps)
    assert all("between" not in relation for relation in out.values())


def test_key_sets_are_read_with_a_bounded_distinct(runtime: Runtime) -> None:
    ranged = {"k": {"name": "K", "type": "bigint", "partners": ["1.x"]}}
    signed = runtime.macro("_ivm_key_sets_sql")(ranged, "cv __ivm_s", "true", "__ivm_new", True)
    assert "explode(array(case when __ivm_new then `K` end, __ivm_before.`K`))" in signed
    plain = runtime.macro("_ivm_key_sets_sql")(ranged, "t __ivm_s", "`w` <= 3", "true", False)
    assert f"where (`w` <= 3) and (true) and `K` is not null limit {over_max(runtime)}" in plain
    for sql in (signed, plain):
        sqlglot.parse_one(f"select {sql} from t", read="spark")
    assert (
        runtime.macro("_ivm_key_sets_sql")({}, "t", "true", "true", False)
        == "cast(map() as map<string, string>)"
    )


def test_key_lists_are_literals_up_to_the_max(runtime: Runtime) -> None:
    ranged = {
        "k": {"name": "k", "type": "bigint", "partners": ["1.x"]},
        "s": {"name": "s", "type": "string", "partners": ["1.y"]},
        "many": {"name": "many", "type": "int", "partners": ["1.z"]},
    }
    sets = {"k": '["20", "3"]', "s": '["O\'Brien"]', "many": json_list(range(over_max(runtime)))}
    literals = runtime.macro("_ivm_key_range_literals")({}, ranged, sets, {})
    assert literals["k"]["keys"] == ["20L", "3L"]
    assert literals["s"]["keys"] == ["'O\\'Brien'"]
    # more distinct keys than the max: no list, the IN subquery stays
    assert literals["many"]["keys"] is None


def json_list(values: range) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def over_max(runtime: Runtime) -> int:
    """One key more than the key lists hold."""
    return int(runtime.macro("_ivm_key_list_max")()) + 1


# the key equalities alone: orders - lineitem, orders - customer, lineitem - part
KEY_EDGES = [e for e in EDGES if e["ca"] in ("l_orderkey", "o_custkey", "l_partkey")]


def counted(
    runtime: Runtime, changed: dict[str, Any], steps: list[dict[str, Any]], sets: dict[str, str]
) -> None:
    ranged = runtime.macro("_ivm_range_columns")(changed, steps, EDGES)
    bounds = {"min:o_orderkey": "100", "max:o_orderkey": "250", "min:o_custkey": "7", "max:o_custkey": "7"}
    changed.update(
        {"broadcast": True, "ranges": runtime.macro("_ivm_key_range_literals")(bounds, ranged, sets, changed)}
    )


def test_key_lists_replace_the_in_subquery_one_equality_away(runtime: Runtime) -> None:
    steps = plan()
    counted(runtime, steps[0], steps, {"o_orderkey": '["100", "250"]', "o_custkey": "[]"})
    out = runtime.macro("_ivm_reduced_relations")(KEY_EDGES, {i: f"up{i}" for i in range(4)}, steps[0], steps)
    assert "where `l_orderkey` in (100L, 250L) and `l_orderkey` between" in out[1]
    assert "up0" not in out[1]
    # no non-NULL changed key: nothing can join
    assert out[2].startswith("(select * from up2 __ivm_r where false and `c_custkey` between")
    # the part is cut by the listed lineitems, through a subquery
    assert "(`p_partkey`) in (select `l_partkey` from " + out[1] in out[3]
    for relation in out.values():
        sqlglot.parse_one(f"select * from {relation} t", read="spark")


def test_a_column_without_a_list_keeps_the_in_subquery(runtime: Runtime) -> None:
    steps = plan()
    counted(
        runtime, steps[0], steps, {"o_orderkey": json_list(range(over_max(runtime))), "o_custkey": '["7"]'}
    )
    out = runtime.macro("_ivm_reduced_relations")(KEY_EDGES, {i: f"up{i}" for i in range(4)}, steps[0], steps)
    assert "(`l_orderkey`) in (select `o_orderkey` from up0 __ivm_p)" in out[1]
    assert "where `c_custkey` in (7) and" in out[2]
    # joined on several columns, one of them not ranged (a double): the subquery stays
    steps = plan()
    counted(runtime, steps[0], steps, {"o_orderkey": '["100"]', "o_custkey": '["7"]'})
    out = runtime.macro("_ivm_reduced_relations")(EDGES, {i: f"up{i}" for i in range(4)}, steps[0], steps)
    assert "(`l_orderkey`, `l_total`) in (select `o_orderkey`, `o_total` from up0 __ivm_p)" in out[1]


def changed_orders(runtime: Runtime, key: list[str], columns: list[Column]) -> dict[str, Any]:
    hidden = [{"column": k, "name": f"__ivm_orders__{k}"} for k in key]
    p = {
        "index": 0,
        "columns": columns,
        "change_view": "(cv)",
        "up": {"kind": "change_log", "unique_key": key, "hidden": hidden, "relation": "raw.orders"},
    }
    # as the change count sets it
    runtime.macro("_ivm_key_listing")(p)
    return p


def test_changed_row_keys_are_listed_exactly_or_not_at_all(runtime: Runtime) -> None:
    p = changed_orders(runtime, ["o_id", "o_day"], [Column("O_ID", "bigint"), Column("o_day", "date")])
    literals = runtime.macro("_ivm_changed_id_literals")
    assert literals('[["7", "2026-01-02"], ["10", "2026-01-01"]]', p) == [
        ["10L", "date'2026-01-01'"],
        ["7L", "date'2026-01-02'"],
    ]
    # a NULL key column is matched null-safely, which an IN list cannot: not listed
    assert literals('[["7", null]]', p) is None

    def keys(n: int) -> str:
        return "[" + ", ".join(f'["{i}", "2026-01-01"]' for i in range(n)) + "]"

    # as many keys as the lists hold are listed, one more is not
    assert len(literals(keys(over_max(runtime) - 1), p)) == over_max(runtime) - 1
    assert literals(keys(over_max(runtime)), p) is None
    assert literals(None, p) is None
    sql = runtime.macro("_ivm_changed_ids_sql")(p)
    assert sql.endswith(
        f"from (select distinct `o_id`, `o_day` from (cv) __ivm_i limit {over_max(runtime)}) __ivm_d)"
    )
    sqlglot.parse_one(f"select {sql}", read="spark")
    # a key whose text form does not cast back (a timestamp) is never listed
    q = changed_orders(runtime, ["o_at"], [Column("o_at", "timestamp")])
    assert runtime.macro("_ivm_changed_ids_sql")(q) == "cast(null as string)"
    assert literals('[["2026-01-01 00:00:00"]]', q) is None


def test_listed_keys_find_the_slices_without_reading_the_change(runtime: Runtime) -> None:
    p = changed_orders(runtime, ["o_id", "o_day"], [Column("o_id", "bigint"), Column("o_day", "date")])
    p.update({"changed": True, "old": 1, "from": "3", "to": "7", "ids": [["1", "2"], ["3", "4"]]})
    found = runtime.macro("_ivm_join_delete_predicates")([p], "v", False)
    assert found == {
        "joins": [],
        "flag": "((v.__ivm_orders__o_id, v.__ivm_orders__o_day) in ((1, 2), (3, 4)))",
    }
    kept = runtime.macro("_ivm_unchanged_rows_sql")(p)
    assert "where not coalesce((`o_id`, `o_day`) in ((1, 2), (3, 4)), false))" in kept
    assert "(cv)" not in kept
    # no changed key: no row of the view is in a changed slice
    p["ids"] = []
    assert runtime.macro("_ivm_join_delete_predicates")([p], "v", False)["flag"] == "(false)"
    # not listed: the left join with the change set
    p["ids"] = None
    assert runtime.macro("_ivm_join_delete_predicates")([p], "v", False)["joins"]


def test_a_row_key_column_is_listed_from_the_row_keys(runtime: Runtime) -> None:
    # lineitem keyed by (l_orderkey, l_partkey), changed, joined to orders by l_orderkey
    steps = plan()
    lines = steps[1]
    key = ["L_ORDERKEY", "l_partkey"]
    lines.update(
        {
            "up": {
                "kind": "change_log",
                "unique_key": key,
                "hidden": [{"column": k, "name": k} for k in key],
            },
            "ranged": runtime.macro("_ivm_range_columns")(lines, steps, KEY_EDGES),
        }
    )
    runtime.macro("_ivm_key_listing")(lines)
    assert lines["by_ids"] == {"l_orderkey": 0, "l_partkey": 1}
    lines["ids"] = [
        ["cast('7' as bigint)", "cast('1' as bigint)"],
        ["cast('7' as bigint)", "cast('2' as bigint)"],
    ]
    ranges = runtime.macro("_ivm_key_range_literals")({}, lines["ranged"], {}, lines)
    assert ranges["l_orderkey"]["keys"] == ["cast('7' as bigint)"]
    assert ranges["l_partkey"]["keys"] == ["cast('1' as bigint)", "cast('2' as bigint)"]
    # row keys not listed: no list for those columns
    lines["ids"] = None
    assert (
        runtime.macro("_ivm_key_range_literals")({}, lines["ranged"], {}, lines)["l_orderkey"]["keys"] is None
    )


def test_small_changes_list_their_keys_in_the_counting_pass(runtime: Runtime) -> None:
    """A Delta change whose commits tell their rows, up to 10 times the list maximum, is
    listed by aggregates of the counting pass; a larger one by subqueries; an untold one
    (or a change log's) by aggregates under a gate on its counted window; a diff's by
    subqueries."""
    p = changed_orders(runtime, ["o_id"], [Column("o_id", "bigint")])
    listing = runtime.macro("_ivm_key_listing")

    def inline(p: dict) -> bool:
        listing(p)
        return p["inline_lists"]

    p["up"].update({"feed": "delta", "recent_commits": {3: {"rows": 5000}, 4: {"rows": 7}}})
    p.update({"from": 2, "to": 4})
    assert inline(p)
    assert p["change_bound"] == 5007
    p["up"]["recent_commits"][3]["rows"] = 100_000
    assert not inline(p)
    gate = {"row": "__ivm_size <= 100000", "all": "max(__ivm_size) <= 100000"}
    p["up"]["recent_commits"][3]["rows"] = None
    assert inline(p) == gate
    p["up"]["feed"] = None
    assert inline(p) == gate
    p["up"]["feed"] = "diff"
    assert not inline(p)
    p["up"]["feed"] = None
    ids = runtime.macro("_ivm_changed_ids_sql")(p, True)
    assert ids == f"to_json(slice(collect_set(array(cast(`o_id` as string))), 1, {over_max(runtime)}))"
    ranged = {"k": {"name": "K", "type": "bigint", "partners": ["1.x"]}}
    keys = runtime.macro("_ivm_key_sets_sql")(ranged, "cv __ivm_s", "true", "__ivm_new", True, True)
    assert "select" not in keys
    for sql in (ids, keys):
        sqlglot.parse_one(f"select {sql} from t", read="spark")


@pytest.mark.parametrize("many", [False, True])
def test_key_lists_in_the_counting_pass_equal_the_subqueries(runtime: Runtime, spark, many: bool) -> None:
    """Both forms of the row key and key set lists on one change set (new images, old
    images, both, NULLs): the same values, and above the maximum both say 'more'."""
    n = over_max(runtime) if many else 3
    view = (
        "(select id as o_id, case when id % 5 = 0 then null else id % 7 end as K,"
        " named_struct('K', case when id % 4 = 0 then null else id % 3 end) as __ivm_before,"
        f" id % 2 = 0 as __ivm_new from range(1, {n + 1}))"
    )
    p = changed_orders(runtime, ["o_id"], [Column("o_id", "bigint")])
    p["change_view"] = view
    ranged = {"k": {"name": "K", "type": "bigint", "partners": ["1.x"]}}
    key_sets = runtime.macro("_ivm_key_sets_sql")
    ids = runtime.macro("_ivm_changed_ids_sql")
    one_pass = f"{ids(p, True)} as ids, {key_sets(ranged, view, 'true', '__ivm_new', True, True)} as keys"
    inline = spark.sql(f"select {one_pass} from {view} __ivm_c").first()
    subqueries = f"{ids(p)} as ids, {key_sets(ranged, view + ' __ivm_s', 'true', '__ivm_new', True)} as keys"
    apart = spark.sql(f"select {subqueries}").first()
    # under a gate on the window's size: the same lists when it admits the change, NULL when not
    gate = {"row": "__ivm_size <= 5", "all": "max(__ivm_size) <= 5"}
    gated = f"{ids(p, gate)} as ids, {key_sets(ranged, view, 'true', '__ivm_new', True, gate)} as keys"
    sized = [
        spark.sql(f"select {gated} from (select *, {size} as __ivm_size from {view} __ivm_z) __ivm_c").first()
        for size in (n, 6)
    ]
    assert inline is not None and apart is not None and sized[0] is not None and sized[1] is not None
    if n <= 5:
        assert (sized[0].ids, sized[0]["keys"]) == (inline.ids, inline["keys"])
    else:
        assert sized[0].ids is None and sized[0]["keys"]["k"] is None
    assert sized[1].ids is None and sized[1]["keys"]["k"] is None
    listed = [sorted(map(tuple, json.loads(r.ids))) for r in (inline, apart)]
    keys = [sorted(json.loads(r["keys"]["k"])) for r in (inline, apart)]
    # new images' K where __ivm_new, old images' K, never NULL
    assert keys[0] == keys[1] == (["0", "1", "2"] if n == 3 else [str(k) for k in range(7)])
    if many:
        assert [len(keys_listed) for keys_listed in listed] == [n, n]
    else:
        assert listed[0] == listed[1] == [(str(i),) for i in range(1, n + 1)]


def lineitem_changed(runtime: Runtime, orders_key: list[str]) -> list[dict[str, Any]]:
    """lineitem (1) changed, its order keys listed and its part keys too many to list;
    orders (0) keyed by orders_key."""
    steps = plan()
    steps[0]["up"] = {"unique_key": orders_key}
    steps[1]["up"] = {"unique_key": ["l_orderkey", "l_linenumber"]}
    changed = steps[1]
    ranged = runtime.macro("_ivm_range_columns")(changed, steps, KEY_EDGES)
    bounds = {"min:l_orderkey": "100", "max:l_orderkey": "250", "min:l_partkey": "1", "max:l_partkey": "9"}
    sets = {"l_orderkey": '["100", "250"]', "l_partkey": json_list(range(over_max(runtime)))}
    literals = runtime.macro("_ivm_key_range_literals")(bounds, ranged, sets, changed)
    changed.update({"broadcast": True, "ranges": literals})
    return steps


def test_a_leaf_joined_to_a_bounded_partner_is_not_cut_by_a_subquery(runtime: Runtime) -> None:
    steps = lineitem_changed(runtime, ["o_orderkey"])
    cuts: dict[int, str] = {}
    reduce = runtime.macro("_ivm_reduced_relations")
    out = reduce(KEY_EDGES, {i: f"up{i}" for i in range(4)}, steps[1], steps, cuts)
    # orders is cut by literals on its whole row key: at most two rows, broadcast
    assert out[0].startswith(
        "(select /*+ BROADCAST */ * from (select * from up0 __ivm_r where `o_orderkey` in "
        "(100L, 250L) and `o_orderkey` between"
    )
    # customer, joined to orders only, is streamed through that broadcast join: no subquery
    assert out[2] == "up2"
    assert 2 not in cuts
    # part, joined to the changed lineitem only, keeps its range but reads no change again
    assert out[3] == "(select * from up3 __ivm_r where `p_partkey` between 1L and 9L)"
    assert cuts[3] == "`p_partkey` between 1L and 9L"
    for relation in out.values():
        sqlglot.parse_one(f"select * from {relation} t", read="spark")


def test_a_partner_listed_on_part_of_its_row_key_is_not_bounded(runtime: Runtime) -> None:
    steps = lineitem_changed(runtime, ["o_orderkey", "o_day"])
    out = runtime.macro("_ivm_reduced_relations")(KEY_EDGES, {i: f"up{i}" for i in range(4)}, steps[1], steps)
    assert "BROADCAST" not in out[0]
    assert (
        out[2]
        == f"(select * from up2 __ivm_r where (`c_custkey`) in (select `o_custkey` from {out[0]} __ivm_p))"
    )


LOOSE_NAMES = ["a.y", "a.z", "a.p"]


@pytest.mark.parametrize(
    ("sql", "loose"),
    [
        # only equalities of qualified columns: every upstream may be a leaf
        (
            "select y.v from a.y y join a.p p on p.k = y.k and y.d > date '2020-01-01' "
            "join a.z z on z.k = y.k",
            [],
        ),
        # a theta condition relates y to z: neither is a leaf of the equality graph
        ("select y.v from a.y y join a.z z on y.x > z.x and z.a = z.b join a.p p on p.k = y.k", [0, 1]),
        # in the WHERE clause of comma joins; an equality of expressions is no edge either
        ("select y.v from a.y y, a.z z, a.p p where p.k = y.k and y.x > z.x", [0, 1]),
        ("select y.v from a.y y join a.z z on coalesce(y.j, 0) = z.j join a.p p on p.k = y.k", [0, 1]),
        # an unqualified column may belong to any item of the block; alone it filters one
        ("select y.v from a.y y join a.z z on z.j = j join a.p p on p.k = y.k", [0, 1, 2]),
        ("select y.v from a.y y join a.z z on z.j = y.j join a.p p on p.k = y.k where v > 0", []),
        # USING
        ("select y.v from a.y y join a.z z using (x) join a.p p on p.k = y.k", [0, 1, 2]),
        # a derived table
        ("select y.v from a.y y join (select k from a.z) d on d.k = y.k join a.p p on p.k = y.k", [0]),
    ],
)
def test_upstreams_joined_by_other_conditions_are_loose(runtime: Runtime, sql: str, loose: list[int]) -> None:
    from tests.test_analyzer import upstreams

    result = runtime.macro("ivm_analyze")(sql, upstreams(LOOSE_NAMES))
    assert not result["issues"]
    found: list[int] = []
    edges = runtime.macro("_ivm_join_edges")(result["parsed"], found)
    assert sorted(set(found)) == loose
    assert {"a": 2, "ca": "k", "b": 0, "cb": "k"} in edges


def test_a_loose_leaf_is_still_cut_by_its_partner(runtime: Runtime) -> None:
    steps = lineitem_changed(runtime, ["o_orderkey"])
    steps[2]["loose_join"] = True
    out = runtime.macro("_ivm_reduced_relations")(KEY_EDGES, {i: f"up{i}" for i in range(4)}, steps[1], steps)
    subquery = f"(select `o_custkey` from {out[0]} __ivm_p)"
    assert out[2] == f"(select * from up2 __ivm_r where (`c_custkey`) in {subquery})"


def test_delta_replaces_slices_only_by_listed_single_column_keys(runtime: Runtime) -> None:
    """REPLACE WHERE takes literal IN lists of one column each: Delta translates its condition
    into data source filters, which have no tuple IN, so a composite row key without a key
    box (tests/test_key_boxes.py) goes by MERGE."""
    replaced = runtime.macro("_ivm_delta_replaced_slices")

    def change(key: list[str], ids: list[list[str]] | None, old: int = 1) -> dict[str, Any]:
        hidden = [{"name": f"__ivm_t__{k}", "column": k} for k in key]
        up = {"kind": "change_log", "unique_key": key, "hidden": hidden}
        return {"index": 0, "changed": True, "old": old, "has_new": True, "ids": ids, "up": up}

    one = change(["o_orderkey"], [["cast('7' as bigint)"], ["cast('9' as bigint)"]])
    other = dict(change(["c_custkey"], [["cast('3' as int)"]], old=0), index=1)
    orders = "__ivm_t__o_orderkey in (cast('7' as bigint), cast('9' as bigint))"
    assert replaced([one, other], False) == f"({orders} or __ivm_t__c_custkey in (cast('3' as int)))"
    composite = change(["l_orderkey", "l_linenumber"], [["cast('7' as bigint)", "cast('1' as int)"]])
    assert replaced([one, composite], False) is None
    assert replaced([one, change(["c_custkey"], None)], False) is None  # a change too large to list
    assert replaced([one], True) is None  # a repair re-applies by version
    unchanged = dict(change(["c_custkey"], None), changed=False)
    assert replaced([one, unchanged], False) == f"({orders})"
    # Delta fails an IN list of decimals in REPLACE WHERE (an internal error)
    credits = [["cast('1.50' as decimal(10,2))"], ["cast('2' as decimal(10,2))"]]
    decimal = dict(change(["c_credit"], credits), index=1)
    assert replaced([one, dict(decimal, id_types=["decimal(10,2)"])], False) is None


def test_affected_keys_as_a_values_list(runtime: Runtime) -> None:
    """The keyed path's affected keys, read back as text, become typed literals of a VALUES
    relation named by the key columns (a NULL key too: they are matched null-safely); none
    listed: an empty relation of the same types; more than the lists hold: none (the
    scratch table then)."""
    values = runtime.macro("_ivm_keys_values")
    keys, types = ["c_custkey", "segment"], ["bigint", "string"]
    out = values(json.dumps([["7", "O'Brien"], ["12", None]]), keys, types)
    assert out["relation"] == (
        "(select * from values (7L, 'O\\'Brien'), (12L, cast(null as string))"
        " as __ivm_keys(`c_custkey`, `segment`))"
    )
    assert out["literals"] == [["7L", "'O\\'Brien'"], ["12L", None]]
    sqlglot.parse_one(out["relation"], read="spark")
    empty = values("[]", keys, types)
    assert empty["relation"].endswith("as __ivm_keys(`c_custkey`, `segment`) where false)")
    assert "cast(null as bigint), cast(null as string)" in empty["relation"]
    assert empty["literals"] == []
    dated = values(json.dumps([["2026-12-06"]]), ["day"], ["date"])
    assert "values (date'2026-12-06')" in dated["relation"]
    assert values(json_list(range(over_max(runtime))), ["k"], ["int"]) is None


def test_listed_affected_keys_replace_their_slices(runtime: Runtime) -> None:
    """On Delta a keyed refresh whose affected keys of one column were listed replaces their
    slices by a predicate of literals (a NULL key by IS NULL, none listed by false); keys of
    several columns, keys in the scratch table, or decimal keys (whose IN list Delta cannot
    take) go by the MERGE (none)."""
    macro = runtime.macro("_ivm_delta_replaced_keys")

    def replaced(keys: list[str], literals: Any, types: list[str] | None = None) -> Any:
        return macro(keys, literals, types or ["bigint"] * len(keys))

    assert replaced(["c_custkey"], [["7L"], ["12L"]]) == "(`c_custkey` in (7L, 12L))"
    assert replaced(["c_custkey"], [["7L"], [None]]) == "(`c_custkey` in (7L) or `c_custkey` is null)"
    assert replaced(["c_custkey"], [[None]]) == "(`c_custkey` is null)"
    assert replaced(["c_custkey"], []) == "(false)"
    assert replaced(["c_custkey"], None) is None
    assert replaced(["c_custkey", "segment"], [["7L", "'a'"]]) is None
    assert replaced(["name"], [["'a'"]], ["string"]) == "(`name` in ('a'))"
    assert replaced(["day"], [["date'2024-01-31'"]], ["date"]) == "(`day` in (date'2024-01-31'))"
    assert replaced(["credit"], [["cast('1.50' as decimal(10,2))"]], ["decimal(10,2)"]) is None
    sqlglot.parse_one("select * from t where " + replaced(["c_custkey"], [["7L"], [None]]), read="spark")
