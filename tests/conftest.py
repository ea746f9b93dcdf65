"""Shared fixtures: one embedded Spark session for the whole run (Delta Lake loaded, so it
serves both storage formats), dbt projects in tmp dirs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from pyspark.sql import SparkSession

from dbt_ivm.spark import DeltaUnavailable, ThriftServer, delta_conf, local_spark, thrift_server
from tests.support import SPARK_EXECUTION_DEFAULTS, TEST_SPARK_CONF, IvmProject

REPO_ROOT = Path(__file__).resolve().parents[1]

settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", max_examples=10, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def delta_missing() -> str | None:
    """Why Delta cannot run here, or None. In CI Delta tests must run: missing jars fail."""
    try:
        delta_conf()
    except DeltaUnavailable as e:
        if os.environ.get("CI") == "true":
            raise
        return str(e)
    return None


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    home = tmp_path_factory.mktemp("spark_home")
    # dbt runs 4 models at once in this one driver, whose heap also plans their large change
    # statements (2g ran out once while broadcasting a 7-row change set)
    conf = {**TEST_SPARK_CONF, "spark.driver.memory": "4g"}
    session = local_spark(home, conf, delta=delta_missing() is None)
    yield session
    session.stop()


@pytest.fixture
def spark_defaults(spark: SparkSession) -> Iterator[SparkSession]:
    """The session with Spark's code generation and adaptive execution, for the tests on
    benchmark-sized data (hundreds of thousands of rows), where they pay off."""
    for key, value in SPARK_EXECUTION_DEFAULTS.items():
        spark.conf.set(key, value)
    yield spark
    for key in SPARK_EXECUTION_DEFAULTS:
        spark.conf.set(key, TEST_SPARK_CONF[key])


@pytest.fixture(scope="session")
def delta(spark: SparkSession) -> None:
    """Tests on Delta Lake: skipped only off CI when the jars were not fetched."""
    reason = delta_missing()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def thrift(delta: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThriftServer]:
    """One Spark Thrift Server (pyspark's own jars, Delta loaded) for the tests that run
    `dbt run` as separate processes against it, as teams do against a cluster."""
    with thrift_server(tmp_path_factory.mktemp("thrift_home"), TEST_SPARK_CONF, delta=True) as server:
        yield server


@pytest.fixture(scope="session")
def project_factory(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory):
    """Create a dbt project that installs this package; each gets its own schemas."""

    def make(name: str) -> IvmProject:
        return IvmProject.create(tmp_path_factory.mktemp(name), name, spark, REPO_ROOT)

    return make


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that need Spark (they use the session, directly or through another
    fixture; tests that ask for it by name are marked by hand), so `make quick` can run the
    rest: `pytest -m "not spark"`."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
