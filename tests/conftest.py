"""Shared fixtures: one embedded Spark session for the whole run, dbt projects in tmp dirs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from pyspark.sql import SparkSession

from dbt_ivm.spark import local_spark
from tests.support import IvmProject

REPO_ROOT = Path(__file__).resolve().parents[1]

# Delta Lake 4.4 for pyspark 4.2 (README "Delta Lake and Databricks")
DELTA_CONF = {
    "spark.jars.packages": "io.delta:delta-spark_2.13:4.4.1",
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}

settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", max_examples=10, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    home = tmp_path_factory.mktemp("spark_home")
    # small test data: one shuffle partition avoids idle tasks on every stage
    conf = {"spark.sql.shuffle.partitions": "1"}
    if os.environ.get("DBT_IVM_DELTA") == "1":
        # the full Delta run (tests/test_delta_full.py): Delta's jars from Maven
        conf.update(DELTA_CONF)
    session = local_spark(home, conf)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def project_factory(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory):
    """Create a dbt project that installs this package; each gets its own schemas."""

    def make(name: str) -> IvmProject:
        return IvmProject.create(tmp_path_factory.mktemp(name), name, spark, REPO_ROOT)

    return make
