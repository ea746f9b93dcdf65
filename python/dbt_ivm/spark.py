"""The embedded Spark session: PySpark in this process, metastore and warehouse on disk.

dbt-spark's `method: session` calls `SparkSession.builder.getOrCreate()`, so creating the
session here first (with the metastore in a chosen folder) makes dbt run on it too.

Delta Lake is loaded from the jars `make setup` fetched into `.delta-jars/` (see
scripts/fetch_delta_jars.sh): with Delta's catalog as the session catalog, one session
serves Delta and parquet tables alike.
"""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import SparkSession

SPARK_CONF: dict[str, str] = {
    "spark.master": "local[2]",
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "2g",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
}

DELTA_JARS = Path(__file__).resolve().parents[2] / ".delta-jars"
DELTA_SQL_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
# tiny local tables: Delta's log replay in 2 partitions instead of its default 50
DELTA_LOCAL_CONF: dict[str, str] = {"spark.databricks.delta.snapshotPartitions": "2"}


class DeltaUnavailable(RuntimeError):
    """Delta Lake's jars are not on this machine."""


def delta_conf(jars: Path = DELTA_JARS) -> dict[str, str]:
    """Session settings that load Delta Lake from the fetched jars."""
    found = sorted(jars.glob("*.jar"))
    if not any(p.name.startswith("delta-spark_") for p in found):
        raise DeltaUnavailable(
            f"Delta Lake's jars are missing from {jars}: run `make setup` (it runs "
            "scripts/fetch_delta_jars.sh, which needs Maven and Maven Central once)"
        )
    return {"spark.jars": ",".join(str(p) for p in found), **DELTA_SQL_CONF}


def local_spark(home: Path, extra_conf: dict[str, str] | None = None, delta: bool = False) -> SparkSession:
    """Start (or reuse) the embedded session with its warehouse and metastore under `home`;
    delta=True loads Delta Lake (DeltaUnavailable when its jars were not fetched)."""
    home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYSPARK_PYTHON", "python3")
    builder = SparkSession.builder.appName("dbt_ivm").enableHiveSupport()
    conf = {
        **SPARK_CONF,
        **({**delta_conf(), **DELTA_LOCAL_CONF} if delta else {}),
        "spark.sql.warehouse.dir": str(home / "spark-warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={home / 'metastore_db'};create=true"
        ),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={home}",
        **(extra_conf or {}),
    }
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
