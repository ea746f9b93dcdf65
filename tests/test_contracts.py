"""dbt model contracts on ivm models (`contract: {enforced: true}`): the columns and types
the SQL yields are checked against the YAML at every full build, before anything is
written, and in `--empty` runs (as CI's `dbt build --empty` checks them); the contract is
part of the definition, so changing it rebuilds (and so checks) the table; on Delta the
contract's constraints are added to the table at every full build (not_null as a CHECK constraint)
and Delta enforces them on every refresh."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dbt_ivm.changelog import Op
from tests.support import IvmProject, on_delta, sources_yaml

TOTALS = """\
    {{ config(materialized='ivm') }}
    select customer_id, count(*) as n, sum(amount) as total
    from {{ source('shop', 'orders') }}
    group by customer_id
    """


def contract(model: str, customer_type: str) -> str:
    return f"""\
      - name: {model}
        config:
          contract: {{enforced: true}}
        constraints:
          - {{type: check, name: positive_n, expression: "n > 0"}}
        columns:
          - name: customer_id
            data_type: {customer_type}
            constraints: [{{type: not_null}}]
          - name: n
            data_type: bigint
          - name: total
            data_type: double
"""


def models_yaml(customer_type: str) -> str:
    return (
        "version: 2\nmodels:\n"
        + contract("totals", customer_type)
        + contract("totals_parquet", customer_type)
    )


@pytest.fixture(scope="module")
def shop(delta, project_factory) -> Iterator[tuple[IvmProject, Any]]:
    project = project_factory("contracts")
    rows = [{"id": i, "customer_id": i % 3, "amount": float(i)} for i in range(9)]
    orders, declared = project.tracked_table(
        "delta", "orders", "id bigint, customer_id bigint, amount double", rows, ["id"]
    )
    project.write("models/sources.yml", sources_yaml(project.raw, {"orders": declared}))
    project.write("models/totals.sql", on_delta({"totals": TOTALS})["totals"])
    project.write("models/totals_parquet.sql", TOTALS)
    project.write("models/models.yml", models_yaml("bigint"))
    project.run()
    yield project, orders


def constraints(project: IvmProject) -> dict[str, str]:
    rows = project.spark.sql(f"show tblproperties {project.schema}.totals").collect()
    return {r.key: r.value for r in rows if r.key.startswith("delta.constraints.")}


def test_contract_holds_and_constraints_are_enforced(shop) -> None:
    project, orders = shop
    assert constraints(project) == {
        "delta.constraints.positive_n": "n > 0",
        "delta.constraints.customer_id_not_null": "`customer_id` is not null",
    }
    orders.apply([Op("insert", {"id": 100, "customer_id": 7, "amount": 1.0}), Op("delete", {"id": 0})])
    project.run()
    for model in ("totals", "totals_parquet"):
        assert project.last_path(model) == "incremental", project.last_refresh(model)
    project.assert_consistent(["totals", "totals_parquet"], "after a refresh under the contract")

    # a row the constraint refuses: Delta fails the refresh's write, and nothing is applied
    orders.apply([Op("insert", {"id": 101, "customer_id": None, "amount": 2.0})])
    failures = project.run_failures("--select", "totals")
    assert "NOT NULL" in failures["totals"].upper(), failures
    assert project.spark.table(f"{project.schema}.totals").where("customer_id is null").count() == 0
    orders.apply([Op("delete", {"id": 101})])
    project.run()
    project.assert_consistent(["totals"], "after the refused row was deleted")


def test_changed_contract_rebuilds_and_a_mismatch_fails_before_writing(shop) -> None:
    project, _ = shop
    before = {m: len(project.refresh_log(m)) for m in ("totals", "totals_parquet")}
    project.write("models/models.yml", models_yaml("string"))
    failures = project.run_failures()
    for model in ("totals", "totals_parquet"):
        assert "contract" in failures[model].lower() and "customer_id" in failures[model], failures
        # the full build the changed contract asks for failed before it logged anything
        assert len(project.refresh_log(model)) == before[model]

    # CI's schema-only build checks the contract too
    project.write("models/totals_fresh.sql", TOTALS)
    project.write("models/models.yml", models_yaml("string") + contract("totals_fresh", "string"))
    failures = project.run_failures("--empty", "--select", "totals_fresh")
    assert "contract" in failures["totals_fresh"].lower(), failures

    # the contract the tables were built under again: nothing to rebuild
    project.write("models/models.yml", models_yaml("bigint") + contract("totals_fresh", "bigint"))
    project.run()
    assert project.last_path("totals") == project.last_path("totals_parquet") == "no-op"
    assert project.last_refresh("totals_fresh")["reason"] == "first build"
    project.assert_consistent(["totals", "totals_parquet", "totals_fresh"], "after the contract was restored")
