"""Fuzz test over the supported grammar (tests/sql_grammar.py): every generated model
either builds, refreshes and equals its definition after random changes, or fails with an
IVM code; a raw Spark error for SQL the analyzer accepted is a bug.

DBT_IVM_FUZZ_SEED picks another set of models (the seed is in every failure message),
DBT_IVM_FUZZ_MODELS how many."""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass

import pytest

from dbt_ivm.changelog import ChangeLoggedTable, Op
from tests.sql_grammar import TABLES, random_model
from tests.support import IvmProject, sources_yaml

SEED = int(os.environ.get("DBT_IVM_FUZZ_SEED", "20261123"))
MODELS = int(os.environ.get("DBT_IVM_FUZZ_MODELS", "16"))
COLUMNS = {
    "orders": "id bigint, customer_id bigint, amount double, `order` string, status string",
    "customers": "id bigint, region string, `group` int",
}
STRINGS = ["a", "b", "abc", None]


def random_row(pick: random.Random, table: str, key: int) -> dict[str, object]:
    row: dict[str, object] = {"id": key}
    for column, kind in TABLES[table].items():
        if column == "id":
            continue
        if column == "customer_id":
            row[column] = pick.choice([1, 2, 3, None])
        elif kind == "num":
            row[column] = (
                pick.choice([0, 1, 7, 42, None]) if column == "group" else pick.choice([0.5, 2.0, 30.0, None])
            )
        else:
            row[column] = pick.choice(STRINGS)
    return row


def random_batch(pick: random.Random, table: ChangeLoggedTable, name: str, keys: set[int]) -> None:
    ops = []
    for _ in range(pick.randint(1, 5)):
        kind = pick.choice(["insert", "update", "delete"]) if keys else "insert"
        if kind == "insert":
            key = max(keys, default=0) + 1
            keys.add(key)
            ops.append(Op("insert", random_row(pick, name, key)))
        elif kind == "update":
            ops.append(Op("update", random_row(pick, name, pick.choice(sorted(keys)))))
        else:
            key = pick.choice(sorted(keys))
            keys.discard(key)
            ops.append(Op("delete", {"id": key}))
    table.apply(ops)


def failure_without_code(message: str) -> bool:
    return not re.search(r"\bIVM0\d\d\b", message)


@dataclass
class Fuzz:
    project: IvmProject
    sqls: dict[str, str]  # model -> SQL
    failures: dict[str, str]  # model -> error message of its first build
    keys: dict[str, set[int]]  # upstream -> its row keys now

    @property
    def built(self) -> list[str]:
        return [m for m in self.sqls if m not in self.failures]


@pytest.fixture(scope="module")
def fuzz(project_factory) -> Fuzz:
    """The models, built once over seeded upstreams."""
    project: IvmProject = project_factory("grammar_fuzz")
    pick = random.Random(SEED)
    project.write(
        "models/sources.yml",
        sources_yaml(project.raw, {t: f"unique_key: [id], change_log: {t}_changes" for t in TABLES}, "src"),
    )
    keys: dict[str, set[int]] = {}
    for table in TABLES:
        rows = [random_row(pick, table, k) for k in range(1, 7)]
        project.create_table(table, COLUMNS[table], rows)
        project.logged_table(table, ["id"])
        keys[table] = {k for k in range(1, 7)}
    sqls = {f"m{i:02d}": random_model(pick) for i in range(MODELS)}
    for name, sql in sqls.items():
        project.write(f"models/{name}.sql", sql)
    result = project.dbt.invoke("run", check=False)
    failures = {
        r.node.name: r.message for r in result.result.results if str(r.status) in ("error", "runtime error")
    }
    return Fuzz(project, sqls, failures, keys)


def test_accepted_models_build_and_refuse_with_a_code(fuzz: Fuzz) -> None:
    raw = {m: f"{fuzz.sqls[m]}\n{e}" for m, e in fuzz.failures.items() if failure_without_code(e)}
    assert not raw, f"seed {SEED}: failed without an IVM code:\n" + "\n=====\n".join(raw.values())
    assert len(fuzz.built) >= len(fuzz.sqls) // 2, f"seed {SEED}: only {len(fuzz.built)} models built"
    fuzz.project.assert_consistent(fuzz.built, f"after the first build (seed {SEED})")


def test_built_models_refresh_to_their_definition(fuzz: Fuzz) -> None:
    project = fuzz.project
    pick = random.Random(SEED + 1)
    for batch in range(2):
        for table in TABLES:
            log = f"{project.raw}.{table}_changes"
            random_batch(
                pick,
                ChangeLoggedTable(project.spark, f"{project.raw}.{table}", log, ["id"]),
                table,
                fuzz.keys[table],
            )
        result = project.dbt.invoke("run", "--select", *fuzz.built, check=False)
        errors = {
            r.node.name: f"{fuzz.sqls[r.node.name]}\n{r.message}"
            for r in result.result.results
            if str(r.status) in ("error", "runtime error")
        }
        assert not errors, f"seed {SEED}, batch {batch}: refresh failed:\n" + "\n=====\n".join(
            errors.values()
        )
        project.assert_consistent(fuzz.built, f"after batch {batch} (seed {SEED})")
