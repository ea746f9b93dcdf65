"""SELECT DISTINCT with a star: the signed change terms add an `__ivm_sign` column to every
upstream relation, which a star also expands, so DISTINCT terms are read by column name.
Deletes, updates (NULLs too) and a changed join partner are refreshed, and the tables equal
their definitions after every run."""

from __future__ import annotations

import pytest

from dbt_ivm.changelog import ChangeLoggedTable, Op
from tests.support import IvmProject, sources_yaml

ORDERS = "{{ source('shop', 'orders') }}"
CUSTOMERS = "{{ source('shop', 'customers') }}"

MODELS = {
    "distinct_all": f"{{{{ config(materialized='ivm') }}}}\nselect distinct * from {ORDERS}\n",
    "distinct_joined": (
        "{{ config(materialized='ivm') }}\n"
        f"select distinct o.*, c.region from {ORDERS} o join {CUSTOMERS} c on o.customer_id = c.customer_id\n"
    ),
}


@pytest.fixture(scope="module")
def shop(project_factory) -> tuple[IvmProject, ChangeLoggedTable, ChangeLoggedTable]:
    project = project_factory("distinct_star")
    sources = {
        "orders": "unique_key: [id], change_log: orders_changes",
        "customers": "unique_key: [customer_id], change_log: customers_changes",
    }
    project.write("models/sources.yml", sources_yaml(project.raw, sources))
    for name, sql in MODELS.items():
        project.write(f"models/{name}.sql", sql)
    project.create_table(
        "orders",
        "id bigint, customer_id bigint, status string",
        [{"id": i, "customer_id": i % 3, "status": "open" if i % 2 else None} for i in range(1, 9)],
    )
    regions = [{"customer_id": c, "region": "ne"} for c in range(3)]
    project.create_table("customers", "customer_id bigint, region string", regions)
    orders = project.logged_table("orders", ["id"])
    customers = project.logged_table("customers", ["customer_id"])
    project.run()
    return project, orders, customers


def test_distinct_star_refreshes_deletes_updates_and_joins(
    shop: tuple[IvmProject, ChangeLoggedTable, ChangeLoggedTable],
) -> None:
    project, orders, customers = shop
    orders.apply(
        [
            Op("delete", {"id": 1}),
            Op("update", {"id": 2, "customer_id": 2, "status": "open"}),
            Op("insert", {"id": 20, "customer_id": 1, "status": None}),
        ]
    )
    customers.apply([Op("update", {"customer_id": 1, "region": "sw"}), Op("delete", {"customer_id": 0})])
    project.run()
    project.assert_consistent(list(MODELS), "after deletes, updates and a changed join partner")
    assert {project.last_refresh(m)["path"] for m in MODELS} == {"incremental"}
    orders.apply([Op("delete", {"id": i}) for i in range(3, 9)])
    project.run()
    project.assert_consistent(list(MODELS), "after deleting most rows")
