"""The differential suite on Delta Lake: the join and aggregate differential models stored
as Delta tables (file_format='delta', every refresh one MERGE) over change-logged
upstreams, and the same models over Delta upstreams read through their change data feed
(declared by their key alone; several commits per batch, empty batches), with the join
models stored as Delta and the aggregates as parquet.

Delta's jars are fetched once by `make setup` (scripts/fetch_delta_jars.sh); in CI the
tests fail instead of skipping when they are missing (tests/conftest.py)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from dbt_ivm.changelog import DeltaFeedTable
from tests import test_aggregate_differential as aggregates
from tests import test_join_differential as joins
from tests.support import (
    IvmProject,
    RandomHistory,
    differential_history,
    differential_test,
)

pytestmark = pytest.mark.usefixtures("delta")

DIFFERENTIAL = {
    **{f"j_{name}": sql for name, sql in joins.MODELS.items()},
    **{f"a_{name}": aggregates.CONFIG + sql for name, sql in aggregates.MODELS.items()},
}
TABLES = {**joins.TABLES, **aggregates.TABLES}


def delta_project(project: IvmProject) -> IvmProject:
    """Every model of the project stored as Delta."""
    path = project.root / "dbt_project.yml"
    path.write_text(path.read_text() + "    +file_format: delta\n")
    return project


@pytest.fixture(scope="module")
def history(project_factory) -> tuple[IvmProject, RandomHistory]:
    project = delta_project(project_factory("delta_differential"))
    return project, differential_history(project, DIFFERENTIAL, TABLES, seed=20261122)


@pytest.fixture(scope="module")
def feed_history(project_factory) -> tuple[IvmProject, RandomHistory]:
    project = project_factory("delta_feed_differential")
    models = {
        name: sql.replace("materialized='ivm'", "materialized='ivm', file_format='delta'")
        if name.startswith("j_")
        else sql
        for name, sql in DIFFERENTIAL.items()
    }
    return project, differential_history(project, models, TABLES, seed=20261123, feed="delta")


# a refresh of all ten models takes several seconds on Delta: fewer examples than the
# parquet differential tests, which cover the same algorithms
test_delta_models_match_definition = differential_test("history", list(DIFFERENTIAL), max_examples=2)
test_models_over_delta_change_feeds_match_definition = differential_test(
    "feed_history", list(DIFFERENTIAL), max_examples=2
)


def test_refresh_is_one_commit(history: tuple[IvmProject, RandomHistory]) -> None:
    """Every refresh committed at most one write after the version its 'started' row
    recorded (what an interrupted refresh is resolved by), and exactly one when it changed
    rows (a MERGE that changes nothing commits nothing)."""
    project, _ = history
    for model in DIFFERENTIAL:
        rows = project.refresh_log(model)
        started = [r for r in rows if r["status"] == "started" and r["path"] == "incremental"]
        if not started:
            continue
        last = started[-1]
        done = next(r for r in rows if r["refresh_id"] == last["refresh_id"] and r["status"] == "success")
        commits = project.spark.sql(f"describe history {last['relation']}").collect()
        after = [(c["version"], c["operation"]) for c in commits if c["version"] > last["table_version"]]
        changed = done["rows_deleted"] + done["rows_inserted"] > 0
        assert len(after) <= 1 and (len(after) == 1 or not changed), (model, done, after)
        assert all(operation in ("MERGE", "WRITE") for _, operation in after)


def write_shop_sources(project: IvmProject) -> None:
    """orders and customers: Delta upstreams read through their change data feed, keyed by id."""
    project.write(
        "models/sources.yml",
        f"""\
        version: 2
        sources:
          - name: shop
            schema: {project.raw}
            tables:
              - {{name: orders, config: {{meta: {{ivm: {{change_feed: delta, unique_key: [id]}}}}}}}}
              - {{name: customers, config: {{meta: {{ivm: {{change_feed: delta, unique_key: [id]}}}}}}}}
        """,
    )


def test_delta_change_feed_upstreams(project_factory) -> None:
    project = delta_project(project_factory("delta_cdf"))
    spark = project.spark
    for name, columns in (
        ("orders", "id bigint, customer_id bigint, amount int"),
        ("customers", "id bigint, region string"),
    ):
        spark.sql(
            f"create table {project.raw}.{name} ({columns}) using delta "
            "tblproperties ('delta.enableChangeDataFeed' = 'true')"
        )
    spark.sql(f"insert into {project.raw}.orders values (1, 1, 10), (2, 1, 20), (3, 2, null), (4, null, 5)")
    spark.sql(f"insert into {project.raw}.customers values (1, 'eu'), (2, 'us'), (3, null)")
    write_shop_sources(project)
    project.write(
        "models/facts.sql",
        """\
        {{ config(materialized='ivm') }}
        select o.id, o.amount, c.region from {{ source('shop', 'orders') }} o
        join {{ source('shop', 'customers') }} c on o.customer_id = c.id
        """,
    )
    project.write(
        "models/by_region.sql",
        """\
        {{ config(materialized='ivm') }}
        select c.region, count(*) as n, sum(o.amount) as total, max(o.amount) as top
        from {{ source('shop', 'orders') }} o join {{ source('shop', 'customers') }} c on o.customer_id = c.id
        group by c.region
        """,
    )
    models = ["facts", "by_region"]
    project.run()
    project.assert_consistent(models, "after the first build")
    batches = [
        [f"insert into {project.raw}.orders values (5, 2, 7), (6, 3, 1)"],
        [
            f"update {project.raw}.orders set amount = amount + 1 where id in (1, 3)",
            f"delete from {project.raw}.customers where id = 2",
        ],
        [
            f"update {project.raw}.customers set region = 'apac' where id = 1",
            f"delete from {project.raw}.orders where id = 2",
            f"insert into {project.raw}.customers values (2, 'us')",
        ],
        [],
    ]
    for batch in batches:
        for statement in batch:
            spark.sql(statement)
        project.run()
        project.assert_consistent(models, f"after {batch}")
        assert project.last_path("facts") in ("incremental", "no-op")
    # a refresh that committed its MERGE but crashed before logging success: the commit's
    # user metadata shows it committed, so the next run neither repairs nor rebuilds
    spark.sql(f"insert into {project.raw}.orders values (7, 1, 3)")
    project.run()
    project.relog(project.last_refresh("by_region")["refresh_id"], "started")
    spark.sql(f"delete from {project.raw}.orders where id = 7")
    project.run()
    last = project.last_refresh("by_region")
    assert last["path"] == "incremental" and "interrupted" not in last["reason"], last
    project.assert_consistent(models, "after a refresh that follows an interrupted one")
    # a no-op does not describe these upstreams; a column added is a commit, after which the
    # refresh reads their columns and rebuilds on the new schema
    spark.sql(f"alter table {project.raw}.customers add columns (tier string)")
    project.run()
    for model in models:
        last = project.last_refresh(model)
        assert last["path"] == "full", last
        assert "customers changed its columns since the last refresh (tier added)" in last["reason"], last
    project.assert_consistent(models, "after a column was added to an upstream")


# The change-feed error classes (and both ivm_on_change_feed_error values) are provoked for
# real in tests/test_delta_feed_errors.py.


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("avg(o.amount)", "merged signed count/sum deltas"),
        # max after a delete: the affected groups are recomputed
        ("max(o.amount)", "recomputed the affected groups"),
    ],
)
def test_a_group_that_comes_and_goes_within_a_change_is_left_out(
    project_factory, value: str, path: str
) -> None:
    """An order added for a customer deleted in the same batch: its group (region NULL) gets
    +1 from the new order with the old customer and -1 from the deleted customer with the new
    order (merge path), or is affected with no row left (recompute path), so the MERGE's
    source holds a group the table lacks, with all-NULL keys. It must be left out: with
    deletion vectors on (set here; aggregates are built without them by default), Delta tests
    the null-safe ON again on the padding of an unmatched row, where NULL <=> NULL holds, and
    fails the write."""
    project = delta_project(project_factory("delta_null_group_" + value[:3]))
    spark = project.spark
    orders = DeltaFeedTable(spark, f"{project.raw}.orders", ["id"])
    customers = DeltaFeedTable(spark, f"{project.raw}.customers", ["id"])
    orders.create("id bigint, customer_id bigint, amount int", [{"id": 1, "customer_id": 2, "amount": 10}])
    customers.create("id bigint, region string", [{"id": 1, "region": None}, {"id": 2, "region": "eu"}])
    write_shop_sources(project)
    project.write(
        "models/by_region.sql",
        """\
        {{ config(materialized='ivm', tblproperties={'delta.enableDeletionVectors': 'true'}) }}
        select c.region, count(*) as n, sum(o.amount) as total, VALUE as v
        from {{ source('shop', 'orders') }} o join {{ source('shop', 'customers') }} c on o.customer_id = c.id
        group by c.region
        """.replace("VALUE", value),
    )
    project.run()
    spark.sql(f"insert into {project.raw}.orders values (5, 1, 7), (6, 2, 1)")
    spark.sql(f"delete from {project.raw}.customers where id = 1")
    project.run()
    last = project.last_refresh("by_region")
    assert last["path"] == "incremental" and last["status"] == "success", last
    assert path in last["reason"], last
    project.assert_consistent(["by_region"], "after the batch")
    rows = spark.sql(f"select region, n, total from {project.schema}.by_region").collect()
    assert [tuple(r) for r in rows] == [("eu", 2, 11)]


# the keyed marts' key columns, and whether their slices go by REPLACE WHERE: Delta fails an
# IN list of decimals in its condition with an internal error, so decimal keys are merged
KEYED_BY = {"name": True, "signup": True, "credit": False}


def test_slices_of_typed_keys_are_replaced_or_merged(project_factory) -> None:
    """Keyed marts per key type with literals (string with quotes, backslashes and non-ASCII
    text, date, decimal; NULL keys in each) and a join over an upstream keyed by a decimal,
    stored as Delta: listed keys replace their slices by REPLACE WHERE, decimal ones by the
    MERGE, and every table equals its definition after each batch."""
    project = project_factory("delta_typed_keys")
    spark = project.spark
    orders = DeltaFeedTable(spark, f"{project.raw}.orders", ["id"])
    customers = DeltaFeedTable(spark, f"{project.raw}.customers", ["id"])
    tiers = DeltaFeedTable(spark, f"{project.raw}.tiers", ["tier"])
    orders.create("id bigint, customer_id bigint, amount int", [{"id": 1, "customer_id": 1, "amount": 5}])
    customers.create(
        "id bigint, name string, signup date, credit decimal(10,2)",
        [
            {"id": 1, "name": "O'Brien", "signup": date(2024, 1, 31), "credit": Decimal("10.50")},
            {"id": 2, "name": "Zoë", "signup": None, "credit": Decimal("-0.01")},
            {"id": 3, "name": None, "signup": date(2024, 2, 1), "credit": None},
        ],
    )
    tiers.create(
        "tier decimal(10,2), label string",
        [{"tier": Decimal("10.50"), "label": "gold"}, {"tier": Decimal("-0.01"), "label": "debt"}],
    )
    write_shop_sources(project)
    sources = (project.root / "models/sources.yml").read_text()
    tiers_source = "{name: tiers, config: {meta: {ivm: {change_feed: delta, unique_key: [tier]}}}}"
    project.write("models/sources.yml", sources + f"      - {tiers_source}\n")
    for key in KEYED_BY:
        project.write(
            f"models/by_{key}.sql",
            f"""\
            {{{{ config(materialized='ivm', unique_key='{key}', file_format='delta') }}}}
            with per_customer as (
                select customer_id, count(*) as n, sum(amount) as total
                from {{{{ source('shop', 'orders') }}}} group by customer_id
            )
            select c.{key}, count(*) as customers, sum(coalesce(p.n, 0)) as orders, sum(p.total) as total
            from {{{{ source('shop', 'customers') }}}} c
            left join per_customer p on p.customer_id = c.id
            group by c.{key}
            """,
        )
    project.write(
        "models/customer_tiers.sql",
        """\
        {{ config(materialized='ivm', file_format='delta') }}
        select c.id, c.name, t.tier, t.label
        from {{ source('shop', 'customers') }} c join {{ source('shop', 'tiers') }} t on c.credit = t.tier
        """,
    )
    project.run()
    models = [*(f"by_{key}" for key in KEYED_BY), "customer_tiers"]
    batches = [
        [
            f"update {project.raw}.customers set name = 'back\\\\slash \\'q\\'', signup = date'2024-01-31', "
            "credit = 10.50 where id = 2",
            f"insert into {project.raw}.orders values (2, 3, 7), (3, 2, 1)",
            f"update {project.raw}.tiers set label = upper(label)",
        ],
        [
            f"update {project.raw}.customers set name = null, signup = null, credit = null where id = 1",
            f"delete from {project.raw}.customers where id = 3",
            f"insert into {project.raw}.customers values (4, 'O\\'Brien', date'1999-12-31', -0.01)",
            f"insert into {project.raw}.tiers values (0.00, 'none'), (99.99, 'top')",
            f"delete from {project.raw}.tiers where tier = 10.50",
        ],
    ]
    for number, batch in enumerate(batches, 1):
        for sql in batch:
            spark.sql(sql)
        sent = project.statements()
        for key, replaced in KEYED_BY.items():
            model = f"by_{key}"
            last = project.last_refresh(model)
            assert last["path"] == "incremental" and "their keys listed" in last["reason"], last
            replace = f"insert into {project.schema}.{model} replace where (`{key}` in ("
            writes = [s for s in sent[model] if s.startswith((replace, "merge into"))]
            assert len(writes) == 1 and writes[0].startswith(replace) == replaced, sent[model]
        assert [s for s in sent["customer_tiers"] if s.startswith("merge into")], sent["customer_tiers"]
        project.assert_consistent(models, f"after batch {number}")
