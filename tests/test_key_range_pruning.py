"""Key ranges skip data: when new orders and their lines arrive with keys above the existing
ones, the refresh cuts the upstreams they join to the range of the changed keys, and Delta
skips the files outside it by their statistics. Shown by taking those files away during
the refresh: a refresh that opened one would fail. Then the files come back and every
model equals its definition."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.support import IvmProject, sources_yaml

AGGREGATE = """\
    {{ config(materialized='ivm', file_format='delta') }}
    select o.customer_id, count(*) as lines, sum(l.amount) as total
    from {{ source('shop', 'lines') }} l
    join {{ source('shop', 'orders') }} o on l.order_id = o.order_id
    group by o.customer_id
    """
JOIN = """\
    {{ config(materialized='ivm', file_format='delta') }}
    select l.line_id, l.amount, o.customer_id
    from {{ source('shop', 'lines') }} l
    join {{ source('shop', 'orders') }} o on l.order_id = o.order_id
    """
MODELS = ("customer_totals", "order_lines")
BATCHES = 4  # orders 0-99, 100-199, ...: one commit (and its own files) each


@pytest.fixture(scope="module")
def shop(delta: None, project_factory) -> Iterator[IvmProject]:
    project = project_factory("key_ranges")
    spark = project.spark
    feed = "tblproperties ('delta.enableChangeDataFeed' = 'true')"
    for table, columns in (
        ("orders", "order_id bigint, customer_id bigint"),
        ("lines", "line_id bigint, order_id bigint, amount double"),
    ):
        spark.sql(f"create table {project.raw}.{table} ({columns}) using delta {feed}")
    for b in range(BATCHES):
        low, high = 100 * b, 100 * b + 99
        spark.sql(f"insert into {project.raw}.orders select id, id % 7 from range({low}, {high + 1})")
        spark.sql(
            f"insert into {project.raw}.lines select id * 3 + k, id, cast(k + 1 as double) "
            f"from range({low}, {high + 1}) cross join (select explode(array(0, 1, 2)) as k)"
        )
    declared = {"orders": "unique_key: [order_id]", "lines": "unique_key: [line_id]"}
    project.write("models/sources.yml", sources_yaml(project.raw, declared))
    project.write("models/customer_totals.sql", AGGREGATE)
    project.write("models/order_lines.sql", JOIN)
    project.run()
    yield project


def files_below(project: IvmProject, table: str, key: str, bound: int) -> list[Path]:
    """The data files of a Delta table whose rows all have key < bound."""
    files = f"select input_file_name() as f, {key} from {project.raw}.{table}"
    rows = project.spark.sql(f"select f, max({key}) as top from ({files}) group by f").collect()
    return [Path(urlparse(r.f).path) for r in rows if r.top < bound]


def test_new_keys_read_only_the_files_of_their_range(shop: IvmProject, tmp_path: Path) -> None:
    spark = shop.spark
    top = 100 * BATCHES
    spark.sql(f"insert into {shop.raw}.orders values ({top}, 3), ({top + 1}, 5)")
    spark.sql(
        f"insert into {shop.raw}.lines values ({3 * top}, {top}, 10.0), ({3 * top + 1}, {top + 1}, 20.0)"
    )
    bound = 100 * (BATCHES - 1)
    away = files_below(shop, "orders", "order_id", bound) + files_below(shop, "lines", "order_id", bound)
    assert len(away) >= 2 * (BATCHES - 1)
    moved = []
    try:
        for i, f in enumerate(away):
            target = tmp_path / f"{i}_{f.name}"
            shutil.move(f, target)
            moved.append((target, f))
        shop.run()
        for model in MODELS:
            assert shop.last_path(model) == "incremental", shop.last_refresh(model)
    finally:
        for target, f in moved:
            shutil.move(target, f)
    shop.assert_consistent(list(MODELS), "after inserts above the existing keys")
