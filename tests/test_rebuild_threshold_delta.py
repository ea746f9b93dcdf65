"""The rebuild threshold (`ivm_rebuild_above`) on Delta: the changed upstreams' row counts
come from the query that counts the change sets, and a change above the threshold rebuilds."""

from __future__ import annotations

from dbt_ivm.changelog import DeltaFeedTable, Op
from tests.support import sources_yaml

MODEL = """\
    {{ config(materialized='ivm', file_format='delta', meta={'ivm_rebuild_above': 0.5}) }}
    select customer_id, count(*) as orders, sum(amount) as total
    from {{ source('shop', 'orders') }}
    group by customer_id
    """


def test_change_above_the_threshold_rebuilds_a_delta_model(delta, project_factory) -> None:
    project = project_factory("threshold_delta")
    orders = DeltaFeedTable(project.spark, f"{project.raw}.orders", ["order_id"])
    orders.create(
        "order_id bigint, customer_id bigint, amount double",
        [{"order_id": i, "customer_id": i % 2, "amount": float(i)} for i in range(4)],
    )
    project.write("models/sources.yml", sources_yaml(project.raw, {"orders": "unique_key: [order_id]"}))
    project.write("models/totals.sql", MODEL)
    project.run()
    orders.apply([Op("update", {"order_id": 1, "customer_id": 1, "amount": 9.0})])
    project.run()
    assert project.last_refresh("totals")["path"] == "incremental"
    # 13 new rows of the 17 the upstream then holds
    orders.apply([Op("insert", {"order_id": 20 + i, "customer_id": 1, "amount": 2.0}) for i in range(13)])
    project.run()
    refresh = project.last_refresh("totals")
    assert refresh["path"] == "full"
    assert refresh["reason"].startswith("13 changed rows = "), refresh["reason"]
    assert refresh["reason"].endswith("above ivm_rebuild_above=0.5: rebuilding is cheaper"), refresh["reason"]
    assert not project.differences("totals")
