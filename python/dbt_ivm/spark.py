"""The embedded Spark session: PySpark in this process, metastore and warehouse on disk.

dbt-spark's `method: session` calls `SparkSession.builder.getOrCreate()`, so creating the
session here first (with the metastore in a chosen folder) makes dbt run on it too.
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
}


def local_spark(home: Path, extra_conf: dict[str, str] | None = None) -> SparkSession:
    """Start (or reuse) the embedded session with its warehouse and metastore under `home`."""
    home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYSPARK_PYTHON", "python3")
    builder = SparkSession.builder.appName("dbt_ivm").enableHiveSupport()
    conf = {
        **SPARK_CONF,
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
