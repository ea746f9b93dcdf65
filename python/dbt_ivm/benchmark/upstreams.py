"""The TPC-H upstreams, written in bulk by Spark, in one of two storage formats.

parquet (`LoggedTable`): each table is an external parquet table whose content lives in a
generation directory; its change log (Delta's change-data-feed schema) is a parquet table to which each batch
appends its own files, so a read of one version window skips the other files by their
parquet min/max statistics. (Partitioning the log by `_commit_version` would be the
natural layout, but the embedded Derby metastore fails to filter bigint partitions:
INTERNAL_ERROR_HIVE_METASTORE_PARTITION_FILTER.) A batch is written the way dbt_ivm's
write-ahead contract asks: the log first, then the table's next generation, computed
from that logged batch, switched in with one `ALTER TABLE ... SET LOCATION`.

delta (`DeltaUpstream`): each table is a Delta table with its change data feed on; a batch
is one MERGE, so the feed records it as one commit. lineitem and orders carry an
`updated_at` column that a batch sets on the rows it writes: the filter column of the
hand-written incremental model a dbt user would write instead of an ivm model.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

KEYS: dict[str, tuple[str, ...]] = {
    "lineitem": ("l_orderkey", "l_linenumber"),
    "orders": ("o_orderkey",),
    "customer": ("c_custkey",),
}
OLD_IMAGES = ("delete", "update_preimage")
NEW_IMAGES = ("insert", "update_postimage")
FORMATS: tuple[str, ...] = ("parquet", "delta")
# the Delta tables whose rows carry the time a batch last wrote them
UPDATED_AT = "updated_at"
STAMPED: tuple[str, ...] = ("lineitem", "orders")


class Upstream(Protocol):
    """What the benchmark needs of an upstream, whatever its storage format."""

    @property
    def table(self) -> str: ...

    def frame(self) -> DataFrame: ...

    def create(self, parquet: Path) -> None: ...

    def commit(self, changes: DataFrame) -> int: ...


def _bigint_columns(data: DataFrame) -> str:
    """The columns of a TPC-H file, integer keys and counts as bigint, so that inserted rows
    and joins agree on types."""
    return ", ".join(
        f"cast(`{c}` as bigint) as `{c}`" if t in ("int", "smallint") else f"`{c}`" for c, t in data.dtypes
    )


@dataclass(frozen=True)
class TpchTable:
    """The TPC-H table `<schema>.<name>`, whatever its format."""

    spark: SparkSession
    schema: str
    name: str

    @property
    def table(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def key(self) -> tuple[str, ...]:
        return KEYS[self.name]

    def frame(self) -> DataFrame:
        return self.spark.table(self.table)


@dataclass(frozen=True)
class LoggedTable(TpchTable):
    """One parquet upstream and its log `<schema>.<name>_changes`, under `root`."""

    root: Path

    @property
    def log(self) -> str:
        return f"{self.schema}.{self.name}_changes"

    def create(self, parquet: Path) -> None:
        """(Re)create the table from a parquet file, with an empty change log."""
        self.spark.sql(f"drop table if exists {self.table}")
        self.spark.sql(f"drop table if exists {self.log}")
        shutil.rmtree(self.root, ignore_errors=True)
        columns = _bigint_columns(self.spark.read.parquet(str(parquet)))
        self.spark.sql(
            f"create table {self.table} using parquet location '{self._generation(0)}' "
            f"as select {columns} from parquet.`{parquet}`"
        )
        self.spark.sql(
            f"create table {self.log} using parquet location '{self.root / 'log'}' as "
            f"select *, cast(null as string) as _change_type, cast(null as bigint) as _commit_version, "
            f"cast(null as timestamp) as _commit_timestamp from {self.table} where false"
        )

    def current_version(self) -> int:
        value = self.spark.sql(f"select max(_commit_version) from {self.log}").first()[0]
        return -1 if value is None else int(value)

    def commit(self, changes: DataFrame) -> int:
        """Write one batch: rows with the table's columns plus `_change_type`. Returns the
        number of change rows logged (0: nothing written, no new version)."""
        version = self.current_version() + 1
        stamp = datetime.now(timezone.utc).replace(tzinfo=None)
        log_columns = self.spark.table(self.log).columns
        logged = changes.withColumn("_commit_version", F.lit(version).cast("bigint")).withColumn(
            "_commit_timestamp", F.lit(stamp).cast("timestamp")
        )
        logged.select(*log_columns).write.insertInto(self.log)
        batch = self.spark.table(self.log).where(F.col("_commit_version") == version)
        rows = int(batch.count())
        if rows == 0:
            return 0
        old = batch.where(F.col("_change_type").isin(*OLD_IMAGES)).select(*self.key).distinct()
        new = batch.where(F.col("_change_type").isin(*NEW_IMAGES)).select(*self.frame().columns)
        content = self.frame().join(old, list(self.key), "left_anti").unionByName(new)
        location = self._generation(version + 1)
        content.write.parquet(str(location))
        previous = self._location()
        self.spark.sql(f"alter table {self.table} set location '{location}'")
        self.spark.sql(f"refresh table {self.table}")
        if previous is not None and previous != location:
            shutil.rmtree(previous, ignore_errors=True)
        return rows

    def _generation(self, number: int) -> Path:
        return self.root / f"g{number}"

    def _location(self) -> Path | None:
        row = self.spark.sql(f"describe table extended {self.table}").where("col_name = 'Location'").first()
        return None if row is None else Path(str(row[1]).removeprefix("file:"))


@dataclass(frozen=True)
class DeltaUpstream(TpchTable):
    """One upstream as a Delta table with its change data feed on."""

    def create(self, parquet: Path) -> None:
        """(Re)create the table from a parquet file, in the file's order (TPC-H writes
        lineitem and orders by order key, so Delta's file statistics can skip by it)."""
        self.spark.sql(f"drop table if exists {self.table}")
        columns = _bigint_columns(self.spark.read.parquet(str(parquet)))
        if self.name in STAMPED:
            columns += f", timestamp'2000-01-01 00:00:00' as {UPDATED_AT}"
        self.spark.sql(
            f"create table {self.table} using delta "
            "tblproperties ('delta.enableChangeDataFeed' = 'true') "
            f"as select {columns} from parquet.`{parquet}`"
        )

    def commit(self, changes: DataFrame) -> int:
        """Write one batch as one MERGE (one Delta commit); returns the change rows in it."""
        batch = changes.localCheckpoint(eager=True)
        rows = int(batch.count())
        if rows == 0:
            return 0
        names = self.frame().columns
        new = batch.where(F.col("_change_type").isin(*NEW_IMAGES))
        if UPDATED_AT in names:
            new = new.withColumn(UPDATED_AT, F.current_timestamp())
        gone = (
            batch.where(F.col("_change_type").isin(*OLD_IMAGES))
            .select(*self.key)
            .distinct()
            .join(new.select(*self.key), list(self.key), "left_anti")
        )
        source = new.select(*names, F.lit(False).alias("__gone")).unionByName(
            gone.withColumn("__gone", F.lit(True)), allowMissingColumns=True
        )
        view = f"__bench_batch_{self.name}"
        source.createOrReplaceTempView(view)
        on = " and ".join(f"t.`{k}` = s.`{k}`" for k in self.key)
        sets = ", ".join(f"`{c}` = s.`{c}`" for c in names if c not in self.key)
        values = ", ".join(f"s.`{c}`" for c in names)
        self.spark.sql(
            f"merge into {self.table} t using {view} s on {on} "
            "when matched and s.__gone then delete "
            f"when matched then update set {sets} "
            f"when not matched and not s.__gone then insert ({', '.join(f'`{c}`' for c in names)}) "
            f"values ({values})"
        )
        self.spark.catalog.dropTempView(view)
        return rows


def upstream_tables(spark: SparkSession, schema: str, root: Path, file_format: str) -> dict[str, Upstream]:
    if file_format == "delta":
        return {name: DeltaUpstream(spark, schema, name) for name in KEYS}
    return {name: LoggedTable(spark, schema, name, root / name) for name in KEYS}


def load(
    spark: SparkSession, schema: str, root: Path, parquet_dir: Path, file_format: str = "parquet"
) -> dict[str, Upstream]:
    """Create the raw schema with every TPC-H upstream (and, on parquet, its empty change log)."""
    spark.sql(f"drop database if exists {schema} cascade")
    spark.sql(f"create database {schema}")
    tables = upstream_tables(spark, schema, root, file_format)
    for name, table in tables.items():
        table.create(parquet_dir / f"{name}.parquet")
    return tables
