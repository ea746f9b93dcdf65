import sys

import pytest

sys.path.insert(0, "/tmp/sweep")
from ks_models import MODELS

from tests.support import THREE_TABLES as TABLES
from tests.support import differential_history, differential_test, on_delta


@pytest.fixture(scope="module")
def parquet_history(project_factory):
    project = project_factory("keysub")
    return project, differential_history(project, MODELS, TABLES, seed=31)


@pytest.fixture(scope="module")
def delta_history(delta, project_factory):
    project = project_factory("keysub_delta")
    return project, differential_history(project, on_delta(MODELS), TABLES, seed=32, feed="delta")


test_parquet = differential_test("parquet_history", list(MODELS), 12, ("incremental", "no-op"))
test_delta = differential_test("delta_history", list(MODELS), 6, ("incremental", "no-op"))
