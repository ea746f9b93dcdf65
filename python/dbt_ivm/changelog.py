"""Write changes to an upstream table and to its change log, the way a producer would.

Every operation becomes one commit version in the log (Delta's change-data-feed schema),
written before the table (the write-ahead contract dbt_ivm relies on). The table is read
into Python and rewritten whole: meant for the small tables of the demo and the tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

Row = dict[str, Any]
OpKind = Literal["insert", "update", "delete"]
CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


@dataclass(frozen=True)
class Op:
    """One change: insert or update carry the full new row, delete carries the key."""

    kind: OpKind
    row: Row


@dataclass
class ChangeLoggedTable:
    """An upstream table plus its change log relation, keyed by `key` columns."""

    spark: SparkSession
    table: str
    log: str
    key: Sequence[str]

    def create_log(self) -> None:
        """Create the (empty) change log with the table's columns plus the CDF columns."""
        self.spark.sql(
            f"create table if not exists {self.log} using parquet as "
            f"select *, cast(null as string) as _change_type, "
            f"cast(null as bigint) as _commit_version, "
            f"cast(null as timestamp) as _commit_timestamp from {self.table} where false"
        )

    def current_version(self) -> int:
        value = self.spark.sql(f"select max(_commit_version) from {self.log}").first()[0]
        return -1 if value is None else int(value)

    def _key(self, row: Row) -> tuple[Any, ...]:
        return tuple(row[k] for k in self.key)

    def apply(self, ops: Iterable[Op]) -> int:
        """Apply ops in order, one commit version each; returns the last version written."""
        ops = list(ops)
        schema = self.spark.table(self.table).schema
        names = schema.names
        state = {self._key(r): r for r in (row.asDict() for row in self.spark.table(self.table).collect())}
        version = self.current_version()
        log_rows: list[tuple[Any, ...]] = []
        now = datetime.now(timezone.utc).replace(tzinfo=None)

        def emit(row: Row, change: str) -> None:
            log_rows.append((*(row[n] for n in names), change, version, now))

        for op in ops:
            version += 1
            key = self._key(op.row)
            old = state.get(key)
            if op.kind == "delete":
                if old is None:
                    raise ValueError(f"{self.table}: delete of missing key {key}")
                emit(old, "delete")
                del state[key]
                continue
            new = {n: op.row.get(n) for n in names}
            if op.kind == "insert":
                if old is not None:
                    raise ValueError(f"{self.table}: insert of existing key {key}")
                emit(new, "insert")
            else:
                if old is None:
                    raise ValueError(f"{self.table}: update of missing key {key}")
                emit(old, "update_preimage")
                emit(new, "update_postimage")
            state[key] = new
        if not ops:
            return version
        log_schema = StructType(
            [
                *schema.fields,
                StructField("_change_type", StringType()),
                StructField("_commit_version", LongType()),
                StructField("_commit_timestamp", TimestampType()),
            ]
        )
        self.spark.createDataFrame(log_rows, log_schema).write.insertInto(self.log)
        self._overwrite(
            self.spark.createDataFrame([tuple(r[n] for n in names) for r in state.values()], schema)
        )
        return version

    def _overwrite(self, frame: DataFrame) -> None:
        frame.localCheckpoint(eager=True).write.insertInto(self.table, overwrite=True)


def append_rows(spark: SparkSession, table: str, rows: Sequence[Row]) -> None:
    """Append rows to an append-only upstream."""
    schema = spark.table(table).schema
    data = [tuple(r.get(n) for n in schema.names) for r in rows]
    spark.createDataFrame(data, schema).write.insertInto(table)


def sql_literal(value: Any) -> str:
    """A Spark SQL literal for a Python value (the types of the demo's and tests' tables)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Decimal):
        return f"{value}BD"
    if isinstance(value, datetime):
        return f"TIMESTAMP'{value.isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"DATE'{value.isoformat()}'"
    # Spark substitutes ${...} even inside string literals; it reads \{ back as {
    text = str(value).replace("\\", "\\\\").replace("'", "\\'").replace("${", "$\\{")
    return f"'{text}'"


@dataclass
class DeltaFeedTable:
    """A Delta table with its change data feed on, changed by SQL statements the way a
    producer would: every operation is one Delta commit (INSERT, UPDATE or DELETE)."""

    spark: SparkSession
    table: str
    key: Sequence[str]

    def create(self, columns: str, rows: Sequence[Row] = (), change_data_feed: bool = True) -> None:
        self.spark.sql(f"drop table if exists {self.table}")
        feed = " tblproperties ('delta.enableChangeDataFeed' = 'true')" if change_data_feed else ""
        self.spark.sql(f"create table {self.table} ({columns}) using delta{feed}")
        if rows:
            names = self.spark.table(self.table).schema.names
            values = ", ".join("(" + ", ".join(sql_literal(r.get(n)) for n in names) + ")" for r in rows)
            self.spark.sql(f"insert into {self.table} values {values}")

    def statements(self, ops: Iterable[Op]) -> list[str]:
        names = self.spark.table(self.table).schema.names
        result = []
        for op in ops:
            where = " and ".join(f"`{k}` <=> {sql_literal(op.row[k])}" for k in self.key)
            if op.kind == "insert":
                values = ", ".join(sql_literal(op.row.get(n)) for n in names)
                result.append(f"insert into {self.table} values ({values})")
            elif op.kind == "update":
                sets = ", ".join(f"`{n}` = {sql_literal(op.row.get(n))}" for n in names if n not in self.key)
                result.append(f"update {self.table} set {sets} where {where}")
            else:
                result.append(f"delete from {self.table} where {where}")
        return result

    def apply(self, ops: Iterable[Op]) -> None:
        """Apply ops in order, one Delta commit each."""
        for statement in self.statements(ops):
            self.spark.sql(statement)
