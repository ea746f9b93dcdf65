"""Key boxes (macros/apply/delta_apply.sql, _ivm_delta_key_boxes): a Delta join-only refresh
whose changed upstream has a row key of several columns replaces the box around its
changed keys (every key column among the values it has in them) by one INSERT ... REPLACE
WHERE, when the box stays within _ivm_key_box_ratio() keys per changed key; otherwise it
merges by the exact keys. Both must leave the table equal to its definition, the box's
unchanged rows included."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dbt_ivm.changelog import Op
from tests.manifests import package_runtime
from tests.support import IvmProject, sources_yaml
from tests.test_statement_budget import BUDGET, COLUMN

MODEL = """\
    {{ config(materialized='ivm', file_format='delta') }}
    select l.order_id, l.line_no, l.sku, l.qty, o.status
    from {{ source('shop', 'lines') }} l
    join {{ source('shop', 'orders') }} o on l.order_id = o.order_id
    """


def change(key: list[str], ids: list[list[str]] | None, old: int = 1, index: int = 0) -> dict[str, Any]:
    """A changed upstream of a plan as the refresh holds it after the change counts."""
    hidden = [{"name": f"__ivm_k{index}_{k}", "column": k} for k in key]
    up = {"kind": "change_log", "unique_key": key, "hidden": hidden}
    ranges = {k: {"lo": "1", "hi": "9", "keys": None, "partners": []} for k in [*key, "sku"]}
    return {
        "index": index,
        "changed": True,
        "old": old,
        "has_new": False,
        "ids": ids,
        "up": up,
        "ranges": ranges,
    }


def lit(v: int) -> str:
    return f"cast('{v}' as bigint)"


def test_a_box_is_taken_within_its_ratio_and_replaces_by_one_list_per_column() -> None:
    runtime = package_runtime()
    boxes, replaced = runtime.macro("_ivm_delta_key_boxes"), runtime.macro("_ivm_delta_replaced_slices")
    lines = change(["order_id", "line_no"], [[lit(1), lit(2)], [lit(3), lit(1)], [lit(3), lit(4)]])
    orders = change(["order_id"], [[lit(2)]], index=1)
    plan = [lines, orders]
    boxes(plan)
    # 2 orders x 3 line numbers = 6 keys for 3 changed: within 8 per changed key
    assert lines["box"] == [[lit(1), lit(3)], [lit(1), lit(2), lit(4)]]
    assert lines["has_new"] is True  # the box's unchanged rows are inserted again
    # not sku: the box holds other skus; the key columns' bounds and lists are the box's
    assert sorted(lines["ranges"]) == ["line_no", "order_id"]
    assert lines["ranges"]["order_id"] == {
        "lo": f"array_min(array({lit(1)}, {lit(3)}))",
        "hi": f"array_max(array({lit(1)}, {lit(3)}))",
        "keys": [lit(1), lit(3)],
        "partners": [],
    }
    assert "box" not in orders and sorted(orders["ranges"]) == ["order_id", "sku"]
    box = (
        f"(__ivm_k0_order_id in ({lit(1)}, {lit(3)}) and __ivm_k0_line_no in ({lit(1)}, {lit(2)}, {lit(4)}))"
    )
    assert replaced(plan, False) == f"({box} or __ivm_k1_order_id in ({lit(2)}))"


def test_a_box_keeps_string_keys_that_differ_only_in_case() -> None:
    """Jinja's `unique` ignores case unless told: a box folding 'AB' into 'ab' would leave a
    changed row outside the REPLACE WHERE."""
    runtime = package_runtime()

    def sku(v: str) -> str:
        return f"cast('{v}' as string)"

    lines = change(["order_id", "sku"], [[lit(1), sku("ab")], [lit(1), sku("AB")], [lit(2), sku("ab")]])
    runtime.macro("_ivm_delta_key_boxes")([lines])
    assert lines["box"] == [[lit(1), lit(2)], [sku("AB"), sku("ab")]]
    assert lines["ranges"]["sku"]["keys"] == [sku("AB"), sku("ab")]


def test_no_box_beyond_its_ratio_or_with_a_key_not_listed() -> None:
    runtime = package_runtime()
    boxes, replaced = runtime.macro("_ivm_delta_key_boxes"), runtime.macro("_ivm_delta_replaced_slices")
    # nine keys on a diagonal: a box of 81 keys, more than 8 per changed key
    diagonal = change(["order_id", "line_no"], [[lit(i), lit(i)] for i in range(1, 10)])
    boxes([diagonal])
    assert "box" not in diagonal and replaced([diagonal], False) is None
    eight = change(["order_id", "line_no"], [[lit(i), lit(i)] for i in range(1, 9)])
    boxes([eight])
    assert len(eight["box"][0]) == 8
    # another upstream's keys were not listed: the refresh merges, so no box either
    small = change(["order_id", "line_no"], [[lit(1), lit(1)]])
    unlisted = change(["order_id"], None, index=1)
    boxes([small, unlisted])
    assert "box" not in small and not small["has_new"]


@pytest.fixture(scope="module")
def shop(delta, project_factory) -> Iterator[tuple[IvmProject, Any, Any]]:
    project = project_factory("key_boxes")
    line_rows = [
        {"order_id": o, "line_no": n, "sku": f"s{(o * n) % 7}", "qty": o + n}
        for o in range(1, 11)
        for n in range(1, 11)
    ]
    order_rows = [{"order_id": o, "status": "open" if o % 2 else "paid"} for o in range(1, 11)]
    lines, lines_declared = project.tracked_table(
        "delta",
        "lines",
        "order_id bigint, line_no bigint, sku string, qty int",
        line_rows,
        ["order_id", "line_no"],
    )
    orders, orders_declared = project.tracked_table(
        "delta", "orders", "order_id bigint, status string", order_rows, ["order_id"]
    )
    project.write(
        "models/sources.yml", sources_yaml(project.raw, {"lines": lines_declared, "orders": orders_declared})
    )
    project.write("models/order_lines.sql", MODEL)
    project.run()
    project.assert_consistent(["order_lines"], "after the first build")
    yield project, lines, orders


def applied(project: IvmProject) -> str:
    """Refresh; the statement that wrote the model's table. A boxed or merged refresh sends
    no more statements than the budget test's join, but for one: these batches commit
    several times to lines, whose oldest unread commit's age is then checked against the
    feed's retention (one `select current_timestamp()`)."""
    sent = project.statements()["order_lines"]
    assert len(sent) <= BUDGET[("delta", "incremental")][COLUMN["order_regions"]] + 1, sent
    table = f"{project.schema}.order_lines "
    writes = [s for s in sent if s.startswith(("merge into " + table, "insert into " + table))]
    assert len(writes) == 1, writes
    return writes[0]


def line(order_id: int, line_no: int, sku: str | None, qty: int | None) -> dict[str, Any]:
    return {"order_id": order_id, "line_no": line_no, "sku": sku, "qty": qty}


def test_boxes_replace_their_slices_and_keep_the_table_exact(shop: tuple[IvmProject, Any, Any]) -> None:
    project, lines, orders = shop
    # updated, deleted and new lines of orders 1 and 3, an order's status: a box of
    # orders {1, 3} x lines {1, 2, 11}, whose other rows (1, 1) and (3, 2) are replaced too
    lines.apply(
        [
            Op("update", line(1, 2, None, 99)),
            Op("delete", line(3, 1, None, None)),
            Op("insert", line(3, 11, "new", 1)),
        ]
    )
    orders.apply([Op("update", {"order_id": 2, "status": "void"})])
    sql = applied(project)
    assert sql.startswith("insert into") and " replace where " in sql, sql[:300]
    assert project.last_refresh("order_lines")["path"] == "incremental"
    project.assert_consistent(["order_lines"], "after a boxed refresh")

    # only deletes, so no new images: the box's unchanged rows (5, 2) and (6, 1) must still
    # be inserted again
    lines.apply([Op("delete", line(5, 1, None, None)), Op("delete", line(6, 2, None, None))])
    assert " replace where " in applied(project)
    project.assert_consistent(["order_lines"], "after a boxed delete")

    # nine lines on a diagonal: their box holds 81 keys, so the refresh merges by exact keys
    lines.apply([Op("update", line(i, i, f"d{i}", -i)) for i in range(1, 10)])
    assert applied(project).startswith("merge into")
    project.assert_consistent(["order_lines"], "after a merge of a diagonal")

    # a line moved to another order (a delete and an insert), a deleted order and its line
    lines.apply(
        [
            Op("delete", line(7, 3, None, None)),
            Op("insert", line(8, 12, "moved", 3)),
            Op("delete", line(9, 1, None, None)),
        ]
    )
    orders.apply([Op("delete", {"order_id": 9, "status": None})])
    assert " replace where " in applied(project)
    project.assert_consistent(["order_lines"], "after a boxed move")
