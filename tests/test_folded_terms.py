"""An aggregate over a join whose dimensions change together: their signed terms are one
term, so the table they all join is read once for all of them (see
`_ivm_signed_change_terms`). On both formats, each batch changes two or three upstreams;
after every `dbt run` the tables equal their definitions, and the statement that applies
the change holds the folded term (the tag filter) exactly when it should."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dbt_ivm.changelog import Op
from tests.support import IvmProject, format_project

LINES = "{{ source('shop', 'lines') }}"
ORDERS = "{{ source('shop', 'orders') }}"
CUSTOMERS = "{{ source('shop', 'customers') }}"

MODELS = {
    # the fact last, as TPC-H Q3 writes it: read once for the customers' and orders' changes
    "revenue": f"""
        select c.region, o.grp, count(*) as n, sum(l.qty) as qty, avg(l.qty) as mean_qty
        from {CUSTOMERS} c
        join {ORDERS} o on c.id = o.cid
        join {LINES} l on l.oid = o.id
        group by c.region, o.grp
        """,
    # the fact first: the customers are the table read once
    "fact_first": f"""
        select c.region, count(*) as n, sum(l.qty) as qty
        from {LINES} l
        join {ORDERS} o on l.oid = o.id
        join {CUSTOMERS} c on c.id = o.cid
        group by c.region
        """,
    "pairs": f"""
        select distinct c.region, o.grp
        from {CUSTOMERS} c
        join {ORDERS} o on c.id = o.cid
        join {LINES} l on l.oid = o.id
        """,
}
TAG_FILTER = "where abs(__ivm_sign_"


@pytest.fixture(scope="module", params=["parquet", "delta"])
def shop(request: pytest.FixtureRequest, project_factory) -> Iterator[tuple[IvmProject, dict[str, Any], str]]:
    project, fmt = format_project(request, project_factory, "folded")
    customers = [{"id": i, "region": [None, "EU", "US"][i % 3]} for i in range(1, 7)]
    orders = [{"id": i, "cid": 1 + i % 6, "grp": "ab"[i % 2]} for i in range(1, 13)]
    lines = [{"id": i, "oid": 1 + i % 12, "qty": i % 4 or None} for i in range(1, 31)]
    tables = project.tracked_sources(
        fmt,
        (
            ("customers", "id bigint, region string", customers),
            ("orders", "id bigint, cid bigint, grp string", orders),
            ("lines", "id bigint, oid bigint, qty int", lines),
        ),
    )
    for name, sql in MODELS.items():
        config = f"{{{{ config(materialized='ivm', file_format='{fmt}') }}}}"
        project.write(f"models/{name}.sql", f"{config}\n{sql}")
    project.run()
    yield project, tables, fmt


def refresh(project: IvmProject, when: str) -> dict[str, list[str]]:
    sent = project.statements()
    project.assert_consistent(list(MODELS), when)
    return sent


def folded(sent: list[str]) -> bool:
    return any(TAG_FILTER in s for s in sent)


def scans(project: IvmProject, sent: list[str], table: str) -> int:
    """How often Spark's plan of the parquet refresh statement that evaluates the change
    terms (its merged groups, read back as listed rows or written to the scratch table)
    reads the upstream `table`."""
    [write] = [s for s in sent if s.startswith(("create table", "select")) and TAG_FILTER in s]
    query = write.split(" using parquet as ", 1)[1] if write.startswith("create table") else write
    return project.plan_scans(query, [table])[table]


def test_dimensions_changed_together_are_one_term(shop) -> None:
    project, t, _ = shop
    # a customer moves region, an order moves customer and group, another goes: the fact
    # is unchanged, so every changed upstream but the fact is folded
    t["customers"].apply([Op("update", {"id": 2, "region": "EU"})])
    t["orders"].apply([Op("update", {"id": 3, "cid": 1, "grp": "b"}), Op("delete", {"id": 4})])
    sent = refresh(project, "after a customer and two orders changed")
    assert folded(sent["revenue"]) and folded(sent["pairs"])
    # fact_first: customers (its last upstream) and orders changed: one term each
    assert not folded(sent["fact_first"])


def test_every_upstream_changed(shop) -> None:
    project, t, fmt = shop
    t["customers"].apply([Op("update", {"id": 5, "region": None}), Op("insert", {"id": 7, "region": "EU"})])
    t["orders"].apply(
        [Op("update", {"id": 6, "cid": 7, "grp": "a"}), Op("insert", {"id": 13, "cid": 2, "grp": "a"})]
    )
    t["lines"].apply(
        [
            Op("update", {"id": 5, "oid": 13, "qty": 3}),
            Op("insert", {"id": 31, "oid": 6, "qty": None}),
            Op("delete", {"id": 8}),
        ]
    )
    sent = refresh(project, "after all three upstreams changed")
    # lines and orders fold in fact_first (customers read once); customers and orders in
    # the others (lines read once), the fact's own change a term of its own
    assert all(folded(sent[m]) for m in MODELS)
    if fmt == "parquet":
        # one scan of the fact for both dimensions' changes (its own change reads its change
        # log), where a term per dimension read it twice
        assert scans(project, sent["revenue"], "lines") == 1
        assert scans(project, sent["fact_first"], "customers") == 1


def test_one_changed_dimension_is_not_folded(shop) -> None:
    project, t, _ = shop
    t["orders"].apply([Op("update", {"id": 7, "cid": 3, "grp": "b"})])
    sent = refresh(project, "after one order changed")
    assert not any(folded(sent[m]) for m in MODELS)
