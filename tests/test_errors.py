"""Every restriction of an ivm model fails with a message that names the model,
the restriction code, the construct with its position, and the fix."""

from __future__ import annotations

import pytest

from tests.support import IvmProject, sources_yaml

SOURCES = {
    "orders": "unique_key: [order_id], change_log: orders_changes",
    "customers": "unique_key: [customer_id], change_log: customers_changes",
    "no_feed": None,
    "no_key": "change_log: no_key_changes",
    "no_log": "unique_key: [id], change_log: missing_changes",
    "key_only": "unique_key: [id]",
    # declared, never created: the check that it exists lists only the names it looks for
    "never_loaded": "unique_key: [id]",
    # declared names that would inject SQL: refused before any statement runs
    "injected_log": "unique_key: [id], change_log: 'x; drop table y'",
    "quoted_log": "unique_key: [id], change_log: '`x`'",
    "injected_key": "unique_key: ['id`; drop table y'], change_log: injected_key_changes",
}

ORDERS = "{{ source('shop', 'orders') }}"
CUSTOMERS = "{{ source('shop', 'customers') }}"
CONFIG = "{{ config(materialized='ivm') }}\n"

# model name -> (SQL, fragments the error message must contain)
BAD_MODELS: dict[str, tuple[str, list[str]]] = {
    "missing_change_feed": (
        f"select o.order_id, n.id from {ORDERS} o "
        "join {{ source('shop', 'no_feed') }} n on o.order_id = n.id",
        ["IVM031", "upstream shop.no_feed", "line 2, column", "change_log:", "watermark:"],
    ),
    "missing_row_key": (
        f"select o.order_id from {ORDERS} o join {{{{ source('shop', 'no_key') }}}} k on o.order_id = k.id",
        ["IVM030", "upstream shop.no_key", "unique_key: [id]"],
    ),
    "not_a_delta_feed": (
        f"select o.order_id from {ORDERS} o join {{{{ source('shop', 'key_only') }}}} d on o.order_id = d.id",
        [
            "IVM031",
            "upstream shop.key_only",
            "declares only unique_key, which is enough for a Delta table with change data feed",
            "a parquet table, not a Delta table",
            "delta.enableChangeDataFeed",
            "change_log: <relation>",
        ],
    ),
    "missing_source_table": (
        f"select o.order_id from {ORDERS} o\n"
        "join {{ source('shop', 'never_loaded') }} n on o.order_id = n.id",
        ["upstream shop.never_loaded", "does not exist. Build or load it first."],
    ),
    "missing_change_log": (
        f"select o.order_id from {ORDERS} o join {{{{ source('shop', 'no_log') }}}} m on o.order_id = m.id",
        ["IVM032", "missing_changes", "does not exist", "_commit_version"],
    ),
    "bad_change_log_name": (
        f"select o.order_id from {ORDERS} o\n"
        f"join {{{{ source('shop', 'injected_log') }}}} i on o.order_id = i.id",
        [
            "upstream shop.injected_log declares change_log 'x; drop table y'",
            "not a table name",
            "nothing was run",
        ],
    ),
    "backticked_change_log_name": (
        f"select o.order_id from {ORDERS} o\n"
        f"join {{{{ source('shop', 'quoted_log') }}}} i on o.order_id = i.id",
        ["upstream shop.quoted_log declares change_log '`x`'", "not a table name"],
    ),
    "bad_key_name": (
        f"select o.order_id from {ORDERS} o\n"
        f"join {{{{ source('shop', 'injected_key') }}}} i on o.order_id = i.id",
        ["upstream shop.injected_key declares the column name 'id`; drop table y'", "not a column name"],
    ),
    # outer joins are maintained by slices of a key (the keyed path); a FULL join of these
    # leaves no column that is never NULL-extended
    "outer_join": (
        f"select o.order_id, c.region from {ORDERS} o\n"
        f"full join {CUSTOMERS} c on o.customer_id = c.customer_id",
        ["IVM020", "FULL OUTER JOIN", "line 3, column 1", "IVM070", "unique_key"],
    ),
    "cross_join": (
        f"select o.order_id, c.region from {ORDERS} o cross join {CUSTOMERS} c",
        ["IVM021", "CROSS JOIN"],
    ),
    "theta_join": (
        f"select o.order_id from {ORDERS} o join {CUSTOMERS} c on o.customer_id < c.customer_id",
        ["IVM021", "join condition without an equality"],
    ),
    "self_join": (
        f"select a.order_id from {ORDERS} a full join {ORDERS} b on a.order_id = b.customer_id",
        ["IVM022", "upstream shop.orders read twice", "second upstream model", "IVM070"],
    ),
    "cte_read_twice": (
        f"with t as (select order_id, customer_id from {ORDERS})\n"
        "select a.order_id from t a full join t b on a.order_id = b.customer_id",
        ["IVM022", "CTE t read twice", "line 3, column 38", "IVM070"],
    ),
    "reserved_column": (
        f"select order_id, amount as __ivm_amount from {ORDERS}",
        ["IVM016", "output column __ivm_amount", "rename it"],
    ),
    "delta_column_name": (
        f"{{{{ config(file_format='delta') }}}}\nselect order_id, amount * 2 from {ORDERS}",
        ["IVM017", "output column `(amount * 2)` (file_format='delta')", "as total_amount"],
    ),
    "tablesample": (
        f"select order_id from {ORDERS} tablesample (10 percent)",
        ["IVM010", "TABLESAMPLE", "line 2, column 22"],
    ),
    "aggregate_in_cte": (
        f"with t as (select customer_id, sum(amount) as total from {ORDERS} group by customer_id)\n"
        "select max(total) as top from t",
        ["IVM040", "GROUP BY in t", "line 2, column", "its own ivm model", "IVM070"],
    ),
    "aggregate_star": (
        f"select *, count(*) as n from {ORDERS} group by order_id, customer_id, amount",
        ["IVM041", "SELECT *", "list the group columns"],
    ),
    "aggregate_mixed_item": (
        f"select customer_id * count(*) as weighted from {ORDERS} group by customer_id",
        ["IVM042", "line 2, column 8", "downstream model", "IVM070"],
    ),
    "distinct_aggregate": (
        f"select distinct count(*) as n from {ORDERS} group by customer_id",
        ["IVM043", "SELECT DISTINCT"],
    ),
    "rollup": (
        f"select customer_id, sum(amount) as total from {ORDERS} group by rollup(customer_id)",
        ["IVM044", "ROLLUP"],
    ),
    "whole_table_recompute": (
        f"select count(distinct customer_id) as customers from {ORDERS}",
        ["IVM045", "count(DISTINCT ...) without GROUP BY", "add a GROUP BY"],
    ),
    "random": (
        f"select order_id, rand() as r from {ORDERS}",
        ["IVM010", "rand()", "line 2, column 18"],
    ),
    "window": (
        f"select order_id, row_number() over (order by amount) as rn from {ORDERS}",
        ["IVM011", "window function"],
    ),
    "limit": (
        f"select order_id from {ORDERS} limit 10",
        ["IVM012", "LIMIT"],
    ),
    "intersect": (
        f"select order_id from {ORDERS} intersect select customer_id from {CUSTOMERS}",
        ["IVM013", "INTERSECT"],
    ),
    "subquery": (
        f"select order_id from {ORDERS} where customer_id not in (select customer_id from {CUSTOMERS})",
        ["IVM014", "subquery in WHERE (NOT IN: use NOT EXISTS)"],
    ),
    "window_key_not_selected": (
        f"select order_id, row_number() over (partition by customer_id order by amount) as rn from {ORDERS}",
        ["IVM011", "IVM070", "no key to recompute slices by", "PARTITION BY column"],
    ),
    "no_key_path": (
        f"with m as (select max(amount) as top from {ORDERS})\n"
        f"select o.order_id from {ORDERS} o join m on o.amount = m.top",
        ["IVM071", "upstream shop.orders: m aggregates it without GROUP BY", "line 2, column 43"],
    ),
    "duplicate_unique_key": (
        f"{{{{ config(unique_key='customer_id') }}}}\nselect o.customer_id, o.amount from {ORDERS} o\n"
        f"left anti join {CUSTOMERS} c on o.customer_id = c.customer_id",
        ["unique_key (customer_id) is not unique: 1 key value(s) have more than one row"],
    ),
    "explode": (
        f"select order_id, x from {ORDERS} lateral view explode(array(1, 2)) t as x",
        ["IVM015", "LATERAL VIEW"],
    ),
    "hardcoded_table": (
        f"select o.order_id from {ORDERS} o join some_schema.some_table s on o.order_id = s.id",
        ["IVM002", "some_schema.some_table", "ref() or source()"],
    ),
}


@pytest.fixture(scope="module")
def failures(project_factory) -> dict[str, str]:
    project: IvmProject = project_factory("errors")
    project.write("models/sources.yml", sources_yaml(project.raw, SOURCES))
    # two orders of one customer: duplicate_unique_key's key is not unique
    project.create_table(
        "orders",
        "order_id bigint, customer_id bigint, amount double",
        [{"order_id": 1, "customer_id": 7, "amount": 1.0}, {"order_id": 2, "customer_id": 7, "amount": 2.0}],
    )
    project.create_table("customers", "customer_id bigint, region string")
    project.logged_table("orders", ["order_id"])
    project.logged_table("customers", ["customer_id"])
    for table in ("no_feed", "no_key", "no_log", "key_only", "injected_log", "quoted_log", "injected_key"):
        project.create_table(table, "id bigint")
    project.logged_table("no_key", ["id"])
    for name, (sql, _) in BAD_MODELS.items():
        project.write(f"models/{name}.sql", CONFIG + sql + "\n")
    project.write(
        "models/bad_option.sql",
        f"{{{{ config(materialized='ivm', ivm_on_unsupported='ignore') }}}}\nselect order_id from {ORDERS}\n",
    )
    project.write(
        "models/bad_threshold.sql",
        f"{{{{ config(materialized='ivm', meta={{'ivm_rebuild_above': true}}) }}}}\n"
        f"select order_id from {ORDERS}\n",
    )
    for key, value in (("ivm_lease_wait", "-1"), ("ivm_lease_timeout", "0")):
        project.write(
            f"models/bad_{key}.sql",
            f"{{{{ config(materialized='ivm', {key}={value}) }}}}\nselect order_id from {ORDERS}\n",
        )
    for name, config in BAD_TABLE_CONFIGS.items():
        project.write(
            f"models/{name}.sql",
            f"{{{{ config(materialized='ivm', {config[0]}) }}}}\nselect order_id from {ORDERS}\n",
        )
    return project.run_failures("--exclude", "ivm_refresh_log")


# dbt's table configs that an ivm table cannot honour: model -> (config, message fragments)
BAD_TABLE_CONFIGS: dict[str, tuple[str, list[str]]] = {
    "bucketed": (
        "clustered_by=['order_id'], buckets=4",
        ["does not support the config clustered_by", "Spark writes buckets only", "Remove clustered_by"],
    ),
    "with_options": (
        "options={'compression': 'zstd'}",
        ["does not support the config options", "Remove options"],
    ),
    "reserved_property": (
        "tblproperties={'dbt_ivm.row_key': 'x'}",
        ["the table property dbt_ivm.row_key is set by dbt_ivm", "Remove it from tblproperties"],
    ),
    "feed_off": (
        "file_format='delta', tblproperties={'delta.enableChangeDataFeed': 'false'}",
        ["the table property delta.enableChangeDataFeed is set by dbt_ivm"],
    ),
    "bad_properties": ("tblproperties='a=b'", ["tblproperties must be a mapping", "got 'a=b'"]),
    "located_partitions": (
        "location_root='/tmp/x', partition_by='order_id'",
        ["location_root with partition_by is not supported for parquet tables", "file_format: delta"],
    ),
    "granted": (
        "grants={'select': ['analysts']}",
        ["grants are set, but open-source Spark SQL has no GRANT statement", "Remove grants"],
    ),
}


@pytest.mark.parametrize("model", sorted(BAD_TABLE_CONFIGS))
def test_table_config_rejected(failures: dict[str, str], model: str) -> None:
    message = failures[model]
    assert message.startswith(f"Model '{model}': ") or f"Model '{model}': " in message, message
    for fragment in BAD_TABLE_CONFIGS[model][1]:
        assert fragment in message, f"{fragment!r} missing from:\n{message}"


@pytest.mark.parametrize("model", sorted(BAD_MODELS))
def test_restriction_message(failures: dict[str, str], model: str) -> None:
    message = failures[model]
    assert f"Model '{model}'" in message
    for fragment in BAD_MODELS[model][1]:
        assert fragment in message, f"{fragment!r} missing from:\n{message}"


def test_invalid_config_value_is_rejected(failures: dict[str, str]) -> None:
    assert (
        "Model 'bad_option': ivm_on_unsupported must be 'error' or 'full_rebuild', got 'ignore'"
        in failures["bad_option"]
    )


def test_rebuild_threshold_must_be_a_number_not_true(failures: dict[str, str]) -> None:
    """true would otherwise count as the number 1 (Jinja's number test accepts booleans)."""
    assert "Model 'bad_threshold': ivm_rebuild_above must be a positive number" in failures["bad_threshold"]
    assert "got 'True'" in failures["bad_threshold"]


def test_lease_settings_must_be_seconds(failures: dict[str, str]) -> None:
    assert (
        "Model 'bad_ivm_lease_wait': ivm_lease_wait must be a number of seconds (0: do not wait), got '-1'"
        in failures["bad_ivm_lease_wait"]
    )
    assert (
        "Model 'bad_ivm_lease_timeout': ivm_lease_timeout must be a number of seconds above 0, got '0'"
        in failures["bad_ivm_lease_timeout"]
    )
