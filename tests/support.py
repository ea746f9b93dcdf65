"""Test helpers: a throw-away dbt project using this package, upstream tables with change
logs, and the differential check (table == definition recomputed from scratch)."""

from __future__ import annotations

import os
import random
import re
import shutil
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from dbt.cli.main import dbtRunnerResult
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from dbt_ivm.changelog import ChangeLoggedTable, DeltaFeedTable, Op, Row
from dbt_ivm.runner import DbtProject, failure_text, sent_sql

# Spark settings of every test session (embedded, thrift server, kill-campaign children).
# Test tables hold a few rows, so a session's CPU goes to planning and compiling, not data:
# one shuffle partition and one Delta snapshot partition avoid idle tasks; expressions are
# interpreted and plans run without whole-stage code generation or adaptive re-planning
# (compiling generated classes, and the JIT compiling them again, took a quarter of the
# JVM's CPU; results do not depend on these). `make bench`, `make demo` and the SF 0.1
# benchmark test (fixture `spark_defaults`) keep Spark's defaults.
TEST_SPARK_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "1",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
}
# Spark's own values of the settings above that only pay off on real data volumes
SPARK_EXECUTION_DEFAULTS: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
    "spark.sql.adaptive.enabled": "true",
}

PROFILE = """\
ivm_test:
  target: session
  outputs:
    session:
      type: spark
      method: session
      host: NA
      schema: {schema}
      threads: 4
"""


REPO_ROOT = Path(__file__).resolve().parents[1]


def copy_integration_project(tmp_path: Path) -> Path:
    """A copy of integration_tests/ under tmp_path that installs this package."""
    project = tmp_path / "integration_tests"
    shutil.copytree(
        REPO_ROOT / "integration_tests",
        project,
        ignore=shutil.ignore_patterns("target", "logs", "dbt_packages", "spark-warehouse", "metastore_db"),
    )
    (project / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    return project


def sources_yaml(raw: str, tables: dict[str, str | None], source: str = "shop") -> str:
    """A sources file: each table with its `config.meta.ivm` declaration (None: undeclared)."""
    lines = ["version: 2", "sources:", f"  - name: {source}", f"    schema: {raw}", "    tables:"]
    for table, ivm in tables.items():
        lines.append(f"      - name: {table}")
        if ivm is not None:
            lines.append(f"        config: {{meta: {{ivm: {{{ivm}}}}}}}")
    return "\n".join(lines) + "\n"


@dataclass
class IvmProject:
    root: Path
    schema: str
    raw: str
    spark: SparkSession
    dbt: DbtProject
    # the models whose refresh was a no-op in the last run(): the message of their run
    # result (one that found nothing changed writes no refresh log row)
    noops: set[str] = field(default_factory=set)

    @classmethod
    def create(cls, root: Path, name: str, spark: SparkSession, package: Path) -> IvmProject:
        schema = f"t_{name}"
        (root / "models").mkdir()
        (root / "dbt_project.yml").write_text(
            textwrap.dedent(
                f"""\
                name: ivm_test_{name}
                version: "1.0"
                config-version: 2
                profile: ivm_test
                model-paths: ["models"]
                models:
                  ivm_test_{name}:
                    # test tables are tiny: every batch is a large share of them
                    +meta: {{ivm_rebuild_above: false}}
                """
            )
        )
        (root / "profiles.yml").write_text(PROFILE.format(schema=schema))
        (root / "packages.yml").write_text(f"packages:\n  - local: {package}\n")
        project = cls(root, schema, f"{schema}_raw", spark, DbtProject(root, root))
        for db in (project.schema, project.raw):
            spark.sql(f"drop database if exists {db} cascade")
            spark.sql(f"create database {db}")
        project.dbt.invoke("deps")
        return project

    def write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))

    def run(self, *args: str, check: bool = True) -> dbtRunnerResult:
        return self.invoke("run", *args, check=check)

    def invoke(
        self, command: str, *args: str, check: bool = True, callbacks: Sequence[Callable[[Any], None]] = ()
    ) -> dbtRunnerResult:
        """Run a dbt command, noting which ivm models were no-ops."""
        # no target/manifest.json or run_results.json: no test reads them, and dbt spends
        # a few tenths of a second serialising them on every invocation
        result = self.dbt.invoke("--no-write-json", command, *args, check=check, callbacks=callbacks)
        results = getattr(result.result, "results", None) or []
        self.noops = {r.node.name for r in results if getattr(r, "message", None) == "no-op"}
        return result

    def statements(self, *args: str) -> dict[str, list[str]]:
        """`dbt run` with args; the statements each model's node sent, in order (dbt's query
        comment dropped, whitespace collapsed)."""
        sent: dict[str, list[str]] = {}

        def listen(msg: Any) -> None:
            if msg.info.name == "SQLQuery":
                sent.setdefault(msg.data.node_info.node_name, []).append(sent_sql(msg.data.sql))

        self.invoke("run", *args, callbacks=[listen])
        return sent

    def last_path(self, model: str) -> str:
        """The path the last run() took for a model: no-op, or its last refresh log row's."""
        return "no-op" if model in self.noops else self.last_refresh(model)["path"]

    def run_error(self, *args: str) -> str:
        """Run dbt expecting a failure; returns the error text."""
        result = self.invoke("run", *args, check=False)
        assert not result.success, "dbt run was expected to fail"
        return failure_text(result)

    def run_failures(self, *args: str) -> dict[str, str]:
        """Run dbt expecting failures; returns the error message of each failed model."""
        result = self.invoke("run", *args, check=False)
        assert not result.success, "dbt run was expected to fail"
        return {
            r.node.name: r.message
            for r in result.result.results
            if str(r.status) in ("error", "runtime error")
        }

    def create_table(self, name: str, columns: str, rows: Sequence[Row] = ()) -> None:
        self.spark.sql(f"drop table if exists {self.raw}.{name}")
        self.spark.sql(f"create table {self.raw}.{name} ({columns}) using parquet")
        if rows:
            schema = self.spark.table(f"{self.raw}.{name}").schema
            data = [tuple(r.get(n) for n in schema.names) for r in rows]
            self.spark.createDataFrame(data, schema).write.insertInto(f"{self.raw}.{name}")

    def logged_table(self, name: str, key: Sequence[str]) -> ChangeLoggedTable:
        table = ChangeLoggedTable(self.spark, f"{self.raw}.{name}", f"{self.raw}.{name}_changes", key)
        self.spark.sql(f"drop table if exists {table.log}")
        table.create_log()
        return table

    def tracked_table(
        self,
        fmt: str,
        name: str,
        columns: str,
        rows: Sequence[Row],
        key: Sequence[str],
        feed_declared: bool = True,
    ) -> tuple[ChangeLoggedTable | DeltaFeedTable, str]:
        """An upstream that records its changes, and its `meta.ivm` declaration: on Delta a
        table with its change data feed, declared `change_feed: delta` or (feed_declared
        false) by its key alone, which the package detects; on parquet a table with its
        change log `<name>_changes`."""
        keys = ", ".join(key)
        if fmt == "delta":
            table = DeltaFeedTable(self.spark, f"{self.raw}.{name}", list(key))
            table.create(columns, rows)
            return table, f"unique_key: [{keys}]" + (", change_feed: delta" if feed_declared else "")
        self.create_table(name, columns, rows)
        return self.logged_table(name, key), f"unique_key: [{keys}], change_log: {name}_changes"

    def tracked_sources(
        self, fmt: str, specs: Sequence[tuple[str, str, Sequence[Row]]]
    ) -> dict[str, ChangeLoggedTable | DeltaFeedTable]:
        """Upstreams (name, columns, rows) keyed by `id` that record their changes
        (tracked_table), declared in models/sources.yml as source `shop`."""
        tables: dict[str, ChangeLoggedTable | DeltaFeedTable] = {}
        declared: dict[str, str | None] = {}
        for name, columns, rows in specs:
            tables[name], declared[name] = self.tracked_table(fmt, name, columns, rows, ["id"])
        self.write("models/sources.yml", sources_yaml(self.raw, declared))
        return tables

    def plan_scans(self, query: str, tables: Sequence[str]) -> dict[str, int]:
        """How often Spark's plan of `query` reads each parquet table of the raw schema."""
        plan = self.spark.sql("explain formatted " + query).collect()[0][0]
        return {
            t: len(re.findall(rf"^\(\d+\) Scan parquet spark_catalog\.{self.raw}\.{t}$", plan, re.M))
            for t in tables
        }

    def build_facts(self, model_sql: str) -> ChangeLoggedTable:
        """A parquet upstream shop.orders (order_id, amount; one row) with a change log, and
        the model `facts` over it, built; returns the upstream."""
        self.create_table("orders", "order_id bigint, amount double", [{"order_id": 1, "amount": 1.0}])
        orders = self.logged_table("orders", ["order_id"])
        declared = {"orders": "unique_key: [order_id], change_log: orders_changes"}
        self.write("models/sources.yml", sources_yaml(self.raw, declared))
        self.write("models/facts.sql", model_sql)
        self.run()
        return orders

    def refresh_log(self, model: str) -> list[dict[str, Any]]:
        """The package's refresh log rows of one model, oldest first."""
        return [
            r.asDict()
            for r in self.spark.sql(
                f"select * from {self.schema}.__ivm_refresh_log where model like '%.{model}' "
                "order by logged_at"
            ).collect()
        ]

    def last_refresh(self, model: str) -> dict[str, Any]:
        rows = [r for r in self.refresh_log(model) if r["status"] == "success"]
        return rows[-1]

    def relog(self, refresh_id: str, status: str) -> None:
        """Append a copy of a refresh's 'success' log row with another status: the state a
        crash leaves behind, for the repair tests."""
        log = f"{self.schema}.__ivm_refresh_log"
        columns = [c for c in self.spark.table(log).columns if c not in ("status", "logged_at", "event")]
        copied = ", ".join(f"'{status}' as status" if c == "status" else c for c in ["status", *columns])
        self.spark.sql(
            f"insert into {log} ({', '.join(['status', *columns, 'logged_at', 'event'])}) "
            f"select {copied}, current_timestamp(), concat('{status}:', refresh_id) from {log} "
            f"where refresh_id = '{refresh_id}' and status = 'success'"
        )

    def assert_consistent(self, models: Sequence[str], when: str) -> None:
        for model in models:
            diff = self.differences(model)
            assert not diff, f"{model} differs from its definition {when}: {diff}"

    def differences(self, model: str) -> list[dict[str, Any]]:
        """Rows on one side only of table vs. definition (multiset), bookkeeping excluded."""
        columns = self.spark.table(f"{self.schema}.{model}").columns
        return [r.asDict() for r in self.spark.sql(differences_sql(self.schema, model, columns)).collect()]


def differences_sql(schema: str, model: str, columns: Sequence[str]) -> str:
    """Rows on one side only of an ivm table vs. its definition view (multiset), with a
    `side` column; the package's bookkeeping columns (__ivm_*) are left out."""
    table, definition = f"{schema}.{model}", f"{schema}.__ivm_def__{model}"
    cols = ", ".join(f"`{c}`" for c in columns if not c.startswith("__ivm_"))
    only_in_table = f"select {cols} from {table} except all select {cols} from {definition}"
    only_in_definition = f"select {cols} from {definition} except all select {cols} from {table}"
    return (
        f"select 'table' as side, * from ({only_in_table}) "
        f"union all select 'definition' as side, * from ({only_in_definition})"
    )


@dataclass(frozen=True)
class TableSpec:
    """A random upstream table keyed by `id`: its columns, how hypothesis draws the other
    columns' values, and the values the seeded first load picks from."""

    columns: str
    values: dict[str, Any]  # column -> hypothesis strategy
    seed_values: dict[str, list[Any]]
    rows: int = 6


@dataclass
class ReloadedTable:
    """A parquet table without change data that its loader reloads in full, as `dbt seed`
    or a `table` model does: a batch overwrites it with the rows it holds after the ops."""

    spark: SparkSession
    table: str

    def apply(self, ops: Sequence[Op]) -> None:
        if not ops:
            return
        rows = {r["id"]: r.asDict() for r in self.spark.table(self.table).collect()}
        for op in ops:
            if op.kind == "delete":
                del rows[op.row["id"]]
            else:
                rows[op.row["id"]] = op.row
        schema = self.spark.table(self.table).schema
        frame = self.spark.createDataFrame(
            [tuple(r.get(n) for n in schema.names) for r in rows.values()], schema
        )
        frame.localCheckpoint(eager=True).write.insertInto(self.table, overwrite=True)


class RandomHistory:
    """Upstream tables with a random history: a seeded first load, then one random batch per
    generated example (see the differential tests). feed 'change_log': parquet tables with
    a change log each; 'delta': Delta tables with their change data feed on, changed by
    one INSERT/UPDATE/DELETE commit per operation; 'diff' (change capture by dbt_ivm):
    parquet tables reloaded in full; 'diff_delta': Delta tables without change data feed,
    changed by SQL statements."""

    def __init__(
        self, project: IvmProject, tables: dict[str, TableSpec], seed: int, feed: str = "change_log"
    ) -> None:
        pick = random.Random(seed)
        self.specs = tables
        self.rows: dict[str, dict[int, dict[str, Any]]] = {}
        self.tables: dict[str, ChangeLoggedTable | DeltaFeedTable | ReloadedTable] = {}
        self.next_id = 1000
        for name, spec in tables.items():
            rows = [
                {"id": i, **{c: pick.choice(choices) for c, choices in spec.seed_values.items()}}
                for i in range(spec.rows)
            ]
            self.rows[name] = {r["id"]: r for r in rows}
            if feed in ("delta", "diff_delta"):
                table = DeltaFeedTable(project.spark, f"{project.raw}.{name}", ["id"])
                table.create(spec.columns, rows, change_data_feed=feed == "delta")
                self.tables[name] = table
            elif feed == "diff":
                project.create_table(name, spec.columns, rows)
                self.tables[name] = ReloadedTable(project.spark, f"{project.raw}.{name}")
            else:
                project.create_table(name, spec.columns, rows)
                self.tables[name] = project.logged_table(name, ["id"])

    def draw_ops(self, data: Any, table: str) -> tuple[list[Op], dict[int, dict[str, Any]]]:
        """Up to 4 operations valid against the table's state, and the state after them; one
        key may change several times. The draws never depend on the state (values are
        drawn for deletes too), so hypothesis sees the same choices whatever the history."""
        state = dict(self.rows[table])
        ops: list[Op] = []
        for _ in range(data.draw(st.integers(0, 4), label=f"{table} op count")):
            kind = data.draw(st.sampled_from(["insert", "update", "update", "delete", "delete"]), label="op")
            pick = data.draw(st.integers(0, 1 << 16), label="key pick")
            values = {c: data.draw(s, label=f"{table}.{c}") for c, s in self.specs[table].values.items()}
            if kind == "insert" or not state:
                kind = "insert"
                self.next_id += 1
                key = self.next_id
            else:
                key = sorted(state)[pick % len(state)]
            if kind == "delete":
                del state[key]
                ops.append(Op("delete", {"id": key}))
            else:
                state[key] = {"id": key, **values}
                ops.append(Op(kind, state[key]))
        return ops, state

    def commit_batch(self, data: Any) -> str:
        """Draw and commit one batch on every table; returns what was committed."""
        committed = []
        for name, table in self.tables.items():
            ops, after = self.draw_ops(data, name)
            table.apply(ops)
            # only what reached the table: an example hypothesis abandons while drawing
            # must not change the history
            self.rows[name] = after
            committed.append(f"{name}: {[(op.kind, op.row['id']) for op in ops]}")
        return "; ".join(committed)


JOIN_KEY = st.one_of(st.none(), st.integers(0, 2))
KEYS = [None, 0, 1, 2]
# three random upstreams keyed by id, joinable on a (t1-t2) and b (t2-t3), c (t1-t3);
# join keys drawn from a few values and NULL, so batches move rows between keys
THREE_TABLES = {
    "t1": TableSpec(
        "id bigint, a int, c int, v string",
        {"a": JOIN_KEY, "c": JOIN_KEY, "v": st.sampled_from([None, "x", "y"])},
        {"a": KEYS, "c": KEYS, "v": [None, "x", "y"]},
    ),
    "t2": TableSpec(
        "id bigint, a int, b int, w int",
        {"a": JOIN_KEY, "b": JOIN_KEY, "w": st.one_of(st.none(), st.integers(0, 9))},
        {"a": KEYS, "b": KEYS, "w": [None, 1, 5, 9]},
    ),
    "t3": TableSpec(
        "id bigint, b int, x string",
        {"b": JOIN_KEY, "x": st.sampled_from([None, "p", "q"])},
        {"b": KEYS, "x": [None, "p", "q"]},
    ),
}


def format_project(
    request: pytest.FixtureRequest, project_factory: Callable[[str], IvmProject], name: str
) -> tuple[IvmProject, str]:
    """The project of a module fixture parametrized by storage format (request.param,
    'parquet' or 'delta'), and the format; on Delta the `delta` fixture first, which in CI
    fails rather than skips when the jars are missing."""
    fmt = request.param
    if fmt == "delta":
        request.getfixturevalue("delta")
    return project_factory(f"{name}_{fmt}"), fmt


def on_delta(models: dict[str, str]) -> dict[str, str]:
    """The same ivm models stored as Delta."""
    return {
        name: sql.replace("materialized='ivm'", "materialized='ivm', file_format='delta'")
        for name, sql in models.items()
    }


def differential_history(
    project: IvmProject,
    models: dict[str, str],
    tables: dict[str, TableSpec],
    seed: int,
    feed: str = "change_log",
) -> RandomHistory:
    """Write the models over random upstreams (source `src`; feed as in RandomHistory: a
    Delta change feed needs only the key), build them and check the first build: the start
    of a differential test's shared history."""
    declared = {
        "delta": "unique_key: [id]",
        "diff": "unique_key: [id], change_feed: diff",
        "diff_delta": "unique_key: [id], change_feed: diff",
    }.get(feed, "unique_key: [id], change_log: {}_changes")
    sources = {name: declared.format(name) for name in tables}
    project.write("models/sources.yml", sources_yaml(project.raw, sources, source="src"))
    for name, sql in models.items():
        project.write(f"models/{name}.sql", sql)
    history = RandomHistory(project, tables, seed, feed)
    project.run()
    project.assert_consistent(list(models), "after the first build")
    return history


def differential_test(
    fixture: str, models: Sequence[str], max_examples: int, paths: tuple[str, ...] | None = None
) -> Callable[..., None]:
    """A differential test over the shared history of a module fixture returning
    (IvmProject, RandomHistory): each generated example commits a random batch, refreshes
    and compares every model with its definition (and, with `paths`, checks each refresh
    took one of them). Each example refreshes every model once, so max_examples is the
    test's time budget (make test stays under CI's 45 minutes); DBT_IVM_EXAMPLES=k runs k
    times as many. No shrinking: a failing example depends on the history before it, which
    hypothesis cannot replay."""

    @pytest.mark.spark
    @settings(
        max_examples=max_examples * int(os.environ.get("DBT_IVM_EXAMPLES", "1")),
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        phases=[Phase.explicit, Phase.generate],
    )
    @given(data=st.data())
    def test(request: pytest.FixtureRequest, data: st.DataObject) -> None:
        project, history = request.getfixturevalue(fixture)
        committed = history.commit_batch(data)
        project.run()
        project.assert_consistent(models, f"after the batch {committed}")
        if paths:
            assert all(project.last_path(m) in paths for m in models)

    return test
