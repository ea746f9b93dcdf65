"""The benchmark workloads: each is one SQL body, built as an `ivm` model and as the same
SQL with `materialized='table'` (the rebuild baseline). w1 and w2 are maintained by the
aggregate algorithm, w3, w3p and w5 by the join algorithm, w4 (a customers mart: an outer
join of an aggregate in a CTE) and w6 (orders LEFT JOIN their latest line, a window
function's rows joined on its PARTITION BY column) by keyed recompute, their slices named
by `unique_key`. w3 joins lineitem, whose row key has two columns; w5 joins only upstreams
keyed by one column (orders, customer), whose listed keys a Delta refresh applies by
REPLACE WHERE."""

from __future__ import annotations

from dataclasses import dataclass

W3_COLUMNS = """\
  l.l_orderkey, l.l_linenumber, l.l_partkey, l.l_suppkey, l.l_quantity, l.l_extendedprice,
  l.l_discount, l.l_tax, l.l_returnflag, l.l_linestatus, l.l_shipdate, l.l_commitdate,
  l.l_receiptdate, l.l_shipinstruct, l.l_shipmode,
  o.o_custkey, o.o_orderstatus, o.o_totalprice, o.o_orderdate, o.o_orderpriority, o.o_clerk,
  o.o_shippriority"""


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    sql: str
    partition_by: str | None = None
    # change localities it is measured on ('recent': most changes on recent order dates)
    localities: tuple[str, ...] = ("uniform",)
    # the ivm model's `unique_key` config: the slice key of the keyed recompute path
    unique_key: str | None = None
    # on Delta: the hand-written incremental model a dbt user would write instead
    hand_sql: str | None = None
    hand_key: tuple[str, ...] = ()

    @property
    def ivm_model(self) -> str:
        return f"{self.name}_ivm"

    @property
    def table_model(self) -> str:
        return f"{self.name}_table"

    @property
    def hand_model(self) -> str:
        return f"{self.name}_hand"

    def model_sql(self, materialized: str, file_format: str = "parquet") -> str:
        options = [f"materialized='{materialized}'", f"file_format='{file_format}'"]
        if self.partition_by:
            options.append(f"partition_by='{self.partition_by}'")
        if self.unique_key and materialized == "ivm":
            options.append(f"unique_key='{self.unique_key}'")
        return f"{{{{ config({', '.join(options)}) }}}}\n-- {self.title}\n{self.sql.strip()}\n"


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "w1",
            "W1 aggregate, TPC-H Q1 style: pricing summary per return flag and line status",
            """
select l_returnflag, l_linestatus, count(*) as count_order, sum(l_quantity) as sum_qty,
       sum(l_extendedprice) as sum_base_price, avg(l_discount) as avg_disc
from {{ source('tpch', 'lineitem') }}
where l_shipdate <= date'1998-09-02'
group by l_returnflag, l_linestatus
""",
        ),
        Workload(
            "w2",
            "W2 aggregate over joins, TPC-H Q3 style: revenue per market segment and order date",
            """
select c.c_mktsegment, o.o_orderdate, count(*) as n_lines,
       sum(l.l_extendedprice * (1 - l.l_discount)) as revenue
from {{ source('tpch', 'customer') }} c
join {{ source('tpch', 'orders') }} o on c.c_custkey = o.o_custkey
join {{ source('tpch', 'lineitem') }} l on l.l_orderkey = o.o_orderkey
group by c.c_mktsegment, o.o_orderdate
""",
        ),
        Workload(
            "w3",
            "W3 join-only: lineitem x orders denormalised",
            f"""
select
{W3_COLUMNS}
from {{{{ source('tpch', 'lineitem') }}}} l
join {{{{ source('tpch', 'orders') }}}} o on l.l_orderkey = o.o_orderkey
""",
            hand_sql=f"""\
{{{{ config(materialized='incremental', incremental_strategy='merge', file_format='delta',
          unique_key=['l_orderkey', 'l_linenumber']) }}}}
-- W3 as a dbt user writes it without dbt_ivm: merge the rows whose lineitem or order was
-- written since the newest row of the last run (deleted rows are never seen)
select
{W3_COLUMNS},
  greatest(l.updated_at, o.updated_at) as updated_at
from {{{{ source('tpch', 'lineitem') }}}} l
join {{{{ source('tpch', 'orders') }}}} o on l.l_orderkey = o.o_orderkey
{{% if is_incremental() %}}
where l.updated_at > (select max(updated_at) from {{{{ this }}}})
   or o.updated_at > (select max(updated_at) from {{{{ this }}}})
{{% endif %}}
""",
            hand_key=("l_orderkey", "l_linenumber"),
        ),
        Workload(
            "w3p",
            "W3 join-only, partitioned by order month (date-localised changes touch few partitions)",
            f"""
select
{W3_COLUMNS},
  date_format(o.o_orderdate, 'yyyy-MM') as order_month
from {{{{ source('tpch', 'lineitem') }}}} l
join {{{{ source('tpch', 'orders') }}}} o on l.l_orderkey = o.o_orderkey
""",
            partition_by="order_month",
            localities=("uniform", "recent"),
        ),
        Workload(
            "w4",
            "W4 customers mart (keyed recompute): customer LEFT JOIN per-customer aggregates "
            "of orders x lineitem",
            """
with

customers as (
    select * from {{ source('tpch', 'customer') }}
),

orders as (
    select * from {{ source('tpch', 'orders') }}
),

lineitems as (
    select * from {{ source('tpch', 'lineitem') }}
),

customer_orders as (
    select
        orders.o_custkey,
        count(distinct orders.o_orderkey) as order_count,
        min(orders.o_orderdate) as first_order_date,
        max(orders.o_orderdate) as last_order_date,
        sum(lineitems.l_extendedprice * (1 - lineitems.l_discount)) as total_revenue,
        count(*) as line_count
    from orders
    join lineitems on lineitems.l_orderkey = orders.o_orderkey
    group by orders.o_custkey
)

select
    customers.c_custkey,
    customers.c_name,
    customers.c_nationkey,
    customers.c_mktsegment,
    coalesce(customer_orders.order_count, 0) as order_count,
    customer_orders.first_order_date,
    customer_orders.last_order_date,
    coalesce(customer_orders.total_revenue, 0) as total_revenue,
    coalesce(customer_orders.line_count, 0) as line_count
from customers
left join customer_orders on customer_orders.o_custkey = customers.c_custkey
""",
            unique_key="c_custkey",
        ),
        Workload(
            "w6",
            "W6 orders with their last shipped line (keyed recompute): orders LEFT JOIN the "
            "latest lineitem per order, picked by QUALIFY row_number() in a CTE",
            """
with

last_line as (
    select l_orderkey, l_linenumber, l_shipdate, l_shipmode, l_extendedprice
    from {{ source('tpch', 'lineitem') }}
    qualify row_number() over (partition by l_orderkey order by l_shipdate desc, l_linenumber desc) = 1
)

select
    o.o_orderkey,
    o.o_custkey,
    o.o_orderdate,
    o.o_orderstatus,
    last_line.l_linenumber as last_linenumber,
    last_line.l_shipdate as last_shipdate,
    last_line.l_shipmode as last_shipmode,
    datediff(last_line.l_shipdate, o.o_orderdate) as days_to_last_shipment
from {{ source('tpch', 'orders') }} o
left join last_line on last_line.l_orderkey = o.o_orderkey
""",
            unique_key="o_orderkey",
        ),
        Workload(
            "w5",
            "W5 join-only: orders x customer denormalised (row keys of one column)",
            """
select
  o.o_orderkey, o.o_custkey, o.o_orderstatus, o.o_totalprice, o.o_orderdate, o.o_orderpriority,
  o.o_clerk, o.o_shippriority, c.c_name, c.c_nationkey, c.c_mktsegment, c.c_acctbal
from {{ source('tpch', 'orders') }} o
join {{ source('tpch', 'customer') }} c on o.o_custkey = c.c_custkey
""",
        ),
    )
}

# a plain view model: the fixed cost of a `dbt run` without dbt_ivm
VIEW_MODEL = "bench_view"
VIEW_SQL = "{{ config(materialized='view') }}\nselect * from {{ source('tpch', 'orders') }}\n"
# a 100-row ivm model: the fixed cost of an incremental refresh of one changed row
SMALL_MODEL = "bench_small_ivm"
SMALL_ROWS = 100


def small_sql(file_format: str) -> str:
    return (
        f"{{{{ config(materialized='ivm', file_format='{file_format}') }}}}\n"
        "select c_custkey, c_name, c_acctbal from {{ source('tpch', 'customer') }}\n"
        f"where c_custkey <= {SMALL_ROWS}\n"
    )


def select(names: list[str]) -> list[Workload]:
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise ValueError(f"unknown workloads {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    return [WORKLOADS[n] for n in names]
