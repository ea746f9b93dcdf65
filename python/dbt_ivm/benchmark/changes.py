"""Deterministic change batches for the TPC-H upstreams.

A batch changes a fraction of the base rows of orders and lineitem (and, for updates, of
customer), as one kind:
* insert: copies of sampled orders with fresh order keys (above the current maximum),
  with copies of their lineitems;
* delete: sampled orders with all their lineitems (TPC-H's refresh function 2);
* update: non-key values of sampled lineitems, orders and customers, and for some rows
  the columns that workloads join, group or partition on (l_returnflag / l_linestatus,
  o_orderdate, o_custkey, c_mktsegment);
* mixed: a third of each, on distinct orders.
Locality `uniform` samples among all orders; `recent` among the most recent orders by
o_orderdate (about the last three months of TPC-H's seven years, more when the batch
needs it), so that date-partitioned views see changes in few partitions.

Sampling ranks rows by a seeded hash (xxhash64), so the same seed on the same data gives
the same batch. Sampled order keys are materialized (local checkpoint) before anything
is written: the frames of one batch read the upstreams as they were before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from dbt_ivm.benchmark.upstreams import Upstream

KINDS: tuple[str, ...] = ("insert", "delete", "update", "mixed")
LOCALITIES: tuple[str, ...] = ("uniform", "recent")
# orders of the recent pool: at least this share of all orders (TPC-H spans ~79 months)
RECENT_SHARE = 1 / 26
PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY")


@dataclass(frozen=True)
class BatchSpec:
    kind: str
    fraction: float
    locality: str
    seed: int


@dataclass(frozen=True)
class RoleCounts:
    """How many orders each role takes, and how many lineitems / customers are updated."""

    insert: int
    delete: int
    update: int
    lineitem_updates: int
    customer_updates: int

    @property
    def orders(self) -> int:
        return self.insert + self.delete + self.update


def role_counts(kind: str, fraction: float, base_rows: dict[str, int]) -> RoleCounts:
    """Batch size from the base (initial) row counts, so that it does not drift with the data."""

    def share(table: str, part: int = 1) -> int:
        return max(1, round(fraction * base_rows[table] / part))

    if kind == "insert":
        return RoleCounts(share("orders"), 0, 0, 0, 0)
    if kind == "delete":
        return RoleCounts(0, share("orders"), 0, 0, 0)
    if kind == "update":
        return RoleCounts(0, 0, share("orders"), share("lineitem"), share("customer"))
    if kind == "mixed":
        third = share("orders", 3)
        return RoleCounts(third, third, third, share("lineitem", 3), share("customer", 3))
    raise ValueError(f"unknown change kind {kind!r}; expected one of {', '.join(KINDS)}")


def make_batch(
    tables: dict[str, Upstream], spec: BatchSpec, base_rows: dict[str, int]
) -> dict[str, DataFrame]:
    """Change rows per table (its columns plus `_change_type`), to commit in this order:
    lineitem, orders, customer (lineitem's frame reads orders as of before the batch)."""
    if spec.locality not in LOCALITIES:
        raise ValueError(f"unknown locality {spec.locality!r}; expected one of {', '.join(LOCALITIES)}")
    counts = role_counts(spec.kind, spec.fraction, base_rows)
    orders, lineitem, customer = (tables[n].frame() for n in ("orders", "lineitem", "customer"))
    pool, pool_orders = _order_pool(orders, spec.locality, counts.orders, base_rows["orders"])
    max_key = int(orders.agg(F.max("o_orderkey")).first()[0])
    picked = _pick_orders(pool, pool_orders, counts, spec.seed, max_key)
    pool_lines = pool_orders * base_rows["lineitem"] / base_rows["orders"]
    recent_keys = pool.select(F.col("o_orderkey").alias("l_orderkey")) if spec.locality == "recent" else None
    batch = {
        "lineitem": _lineitem_changes(
            lineitem, recent_keys, pool_lines, picked, counts.lineitem_updates, spec.seed
        ),
        # customers are only ever updated: their keys stay 1..base count
        "orders": _orders_changes(orders, picked, base_rows["customer"], spec.seed),
    }
    if counts.customer_updates:
        batch["customer"] = _customer_changes(
            customer, base_rows["customer"], counts.customer_updates, spec.seed
        )
    return batch


def _hash(columns: Sequence[str], seed: int, salt: int = 0) -> Column:
    return F.xxhash64(*(F.col(c) for c in columns), F.lit(seed), F.lit(salt))


def _choice(values: Sequence[str], h: Column) -> Column:
    """One of values, picked by a hash."""
    return F.element_at(F.array(*map(F.lit, values)), (F.abs(h % len(values)) + 1).cast("int"))


def _sample(frame: DataFrame, key: Sequence[str], n: int, seed: int, pool_rows: float) -> DataFrame:
    """The n rows with the smallest seeded hash. A hash pre-filter keeps the sort to a few
    times n rows; pool_rows, an estimate of the frame's rows, only sizes that filter (with
    a margin that makes getting fewer than n rows negligibly rare)."""
    h = _hash(key, seed)
    keep = min(1.0, (3 * n + 200) / max(pool_rows, 1))
    bound = int(keep * 2**62)
    candidates = frame.withColumn("__h", h).where(F.abs(F.col("__h") % F.lit(2**62)) < F.lit(bound))
    return candidates.orderBy("__h").limit(n).drop("__h")


def _order_pool(orders: DataFrame, locality: str, needed: int, total: int) -> tuple[DataFrame, int]:
    """The orders to sample from, and about how many there are."""
    if locality == "uniform":
        return orders, total
    size = min(total, max(3 * needed, round(total * RECENT_SHARE)))
    cutoff = (
        orders.select("o_orderdate")
        .orderBy(F.col("o_orderdate").desc())
        .limit(size)
        .agg(F.min("o_orderdate"))
    ).first()[0]
    return orders.where(F.col("o_orderdate") >= F.lit(cutoff)), size


def _pick_orders(pool: DataFrame, pool_rows: int, counts: RoleCounts, seed: int, max_key: int) -> DataFrame:
    """o_orderkey, role (delete / update / insert) and, for inserts, a fresh key above max_key."""
    sampled = _sample(pool.select("o_orderkey"), ["o_orderkey"], counts.orders, seed, pool_rows)
    rank = F.row_number().over(Window.orderBy(_hash(["o_orderkey"], seed)))
    role = (
        F.when(F.col("rn") <= counts.delete, "delete")
        .when(F.col("rn") <= counts.delete + counts.update, "update")
        .otherwise("insert")
    )
    picked = (
        sampled.withColumn("rn", rank)
        .withColumn("role", role)
        .withColumn("new_key", F.when(F.col("role") == "insert", F.lit(max_key) + F.col("rn")))
        .drop("rn")
    )
    return picked.localCheckpoint(eager=True)


def _role(picked: DataFrame, role: str) -> DataFrame:
    return picked.where(F.col("role") == role)


def _typed(frame: DataFrame, like: DataFrame, change_type: str | Column) -> DataFrame:
    """frame's columns cast to like's types, in like's order, plus _change_type."""
    change = F.lit(change_type) if isinstance(change_type, str) else change_type
    return frame.select(*(F.col(c).cast(t).alias(c) for c, t in like.dtypes), change.alias("_change_type"))


def _with_updates(old: DataFrame, like: DataFrame, new_values: dict[str, Column]) -> DataFrame:
    """Pre- and post-images of updated rows."""
    new = old.withColumns(new_values)
    return _typed(old, like, "update_preimage").unionByName(_typed(new, like, "update_postimage"))


def _lineitem_changes(
    lineitem: DataFrame,
    recent_keys: DataFrame | None,
    pool_lines: float,
    picked: DataFrame,
    updates: int,
    seed: int,
) -> DataFrame:
    key = ["l_orderkey", "l_linenumber"]
    deleted = _role(picked, "delete").select(F.col("o_orderkey").alias("l_orderkey"))
    inserted = _role(picked, "insert").select(F.col("o_orderkey").alias("l_orderkey"), "new_key")
    changes = _typed(lineitem.join(deleted, "l_orderkey", "left_semi"), lineitem, "delete").unionByName(
        _typed(
            lineitem.join(inserted, "l_orderkey").withColumn("l_orderkey", F.col("new_key")),
            lineitem,
            "insert",
        )
    )
    if not updates:
        return changes
    candidates = lineitem if recent_keys is None else lineitem.join(recent_keys, "l_orderkey", "left_semi")
    candidates = candidates.join(deleted, "l_orderkey", "left_anti")
    old = _sample(candidates, key, updates, seed + 1, pool_lines)
    group_change = F.abs(_hash(key, seed, 1) % 4) == 0
    new_values = {
        "l_quantity": F.col("l_quantity") + 1,
        "l_extendedprice": F.col("l_extendedprice") + 1,
        "l_discount": ((F.col("l_discount") * 100 + 1) % 11) / 100,
        "l_returnflag": F.when(group_change, _choice("ANR", _hash(key, seed, 2))).otherwise(
            F.col("l_returnflag")
        ),
        "l_linestatus": F.when(
            group_change, F.when(F.col("l_linestatus") == "O", "F").otherwise("O")
        ).otherwise(F.col("l_linestatus")),
    }
    return changes.unionByName(_with_updates(old, lineitem, new_values))


def _orders_changes(orders: DataFrame, picked: DataFrame, customers: int, seed: int) -> DataFrame:
    key = ["o_orderkey"]
    deleted = _typed(orders.join(_role(picked, "delete"), "o_orderkey", "left_semi"), orders, "delete")
    inserted = _typed(
        orders.join(_role(picked, "insert"), "o_orderkey").withColumn("o_orderkey", F.col("new_key")),
        orders,
        "insert",
    )
    old = orders.join(_role(picked, "update").select("o_orderkey"), "o_orderkey", "left_semi")
    priority = _choice(PRIORITIES, _hash(key, seed, 3))
    new_values = {
        "o_totalprice": F.col("o_totalprice") + 1,
        "o_orderpriority": priority,
        "o_orderdate": F.when(
            F.abs(_hash(key, seed, 4) % 4) == 0,
            F.date_sub(F.col("o_orderdate"), (F.abs(_hash(key, seed, 5) % 10) + 1).cast("int")),
        ).otherwise(F.col("o_orderdate")),
        "o_custkey": F.when(
            F.abs(_hash(key, seed, 6) % 8) == 0, (F.col("o_custkey") + 7919) % customers + 1
        ).otherwise(F.col("o_custkey")),
    }
    return deleted.unionByName(inserted).unionByName(_with_updates(old, orders, new_values))


def _customer_changes(customer: DataFrame, rows: int, updates: int, seed: int) -> DataFrame:
    key = ["c_custkey"]
    old = _sample(customer, key, updates, seed + 2, rows)
    segment = _choice(SEGMENTS, _hash(key, seed, 7))
    new_values = {
        "c_acctbal": F.col("c_acctbal") + 1,
        "c_mktsegment": F.when(F.abs(_hash(key, seed, 8) % 2) == 0, segment).otherwise(F.col("c_mktsegment")),
    }
    return _with_updates(old, customer, new_values)
