"""The benchmark's dbt project: written to a work folder, run in-process on the shared
Spark session. Reads what each refresh did from dbt_ivm's refresh log and checks every
ivm table against its definition view."""

from __future__ import annotations

import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_common.events.base_types import EventMsg
from pyspark.sql import SparkSession

from dbt_ivm.benchmark.upstreams import KEYS
from dbt_ivm.benchmark.workloads import SMALL_MODEL, VIEW_MODEL, VIEW_SQL, Workload, small_sql
from dbt_ivm.runner import DbtProject, failure_text

PROJECT_NAME = "ivm_bench"


@dataclass(frozen=True)
class RunOutcome:
    """One `dbt run --select <model>`: wall time, dbt's own timing of the node, error text."""

    wall_s: float
    node_s: float | None
    error: str | None
    # the ivm refresh found nothing changed (it writes no refresh log row)
    noop: bool = False
    # every statement dbt sent, in order: (epoch seconds when sent, its SQL)
    statements: tuple[tuple[float, str], ...] = ()


@dataclass(frozen=True)
class BenchProject:
    root: Path
    schema: str
    raw_schema: str
    spark: SparkSession
    # how the upstreams declare their changes: change_log or diff (change_feed: diff)
    capture: str = "change_log"
    # parquet (change logs) or delta (change data feed, Delta models)
    file_format: str = "parquet"

    @classmethod
    def create(
        cls,
        root: Path,
        schema: str,
        raw_schema: str,
        spark: SparkSession,
        package: Path,
        capture: str = "change_log",
        file_format: str = "parquet",
        package_defaults: bool = False,
    ) -> BenchProject:
        """Write the project, install the package (`dbt deps`), start from empty schemas.
        Unless package_defaults, ivm_rebuild_above is false: every size measures the
        incremental path (the crossover sets the default)."""
        project = cls(root, schema, raw_schema, spark, capture, file_format)
        models = root / "models"
        models.mkdir(parents=True, exist_ok=True)
        for stale in models.glob("*.sql"):
            stale.unlink()
        (root / "dbt_project.yml").write_text(
            textwrap.dedent(
                f"""\
                name: {PROJECT_NAME}
                version: "1.0"
                config-version: 2
                profile: {PROJECT_NAME}
                model-paths: ["models"]
                models:
                  {PROJECT_NAME}:
                    +meta:
                      ivm_rebuild_above: {"0.05" if package_defaults else "false"}
                flags:
                  send_anonymous_usage_stats: false
                """
            )
        )
        (root / "profiles.yml").write_text(
            textwrap.dedent(
                f"""\
                {PROJECT_NAME}:
                  target: session
                  outputs:
                    session:
                      type: spark
                      method: session
                      host: NA
                      schema: {schema}
                      threads: 1
                """
            )
        )
        (root / "packages.yml").write_text(f"packages:\n  - local: {package}\n")
        (models / "sources.yml").write_text(project._sources_yaml())
        (models / f"{VIEW_MODEL}.sql").write_text(VIEW_SQL)
        (models / f"{SMALL_MODEL}.sql").write_text(small_sql(file_format))
        spark.sql(f"drop database if exists {schema} cascade")
        spark.sql(f"create database {schema}")
        project.dbt.invoke("deps", "--quiet")
        return project

    @property
    def dbt(self) -> DbtProject:
        return DbtProject(self.root, self.root)

    def _sources_yaml(self) -> str:
        lines = ["version: 2", "sources:", "  - name: tpch", f"    schema: {self.raw_schema}", "    tables:"]
        for table, key in KEYS.items():
            lines.append(f"      - name: {table}")
            if self.capture == "diff":
                declared = "change_feed: diff"
            elif self.file_format == "delta":
                declared = "change_feed: delta"
            else:
                declared = f"change_log: {table}_changes"
            ivm = f"{{unique_key: [{', '.join(key)}], {declared}}}"
            lines.append(f"        config: {{meta: {{ivm: {ivm}}}}}")
        return "\n".join(lines) + "\n"

    def add_workload(self, workload: Workload) -> None:
        models = self.root / "models"
        (models / f"{workload.ivm_model}.sql").write_text(workload.model_sql("ivm", self.file_format))
        (models / f"{workload.table_model}.sql").write_text(workload.model_sql("table", self.file_format))
        if workload.hand_sql and self.file_format == "delta":
            (models / f"{workload.hand_model}.sql").write_text(workload.hand_sql)

    def run(self, model: str, *flags: str) -> RunOutcome:
        noop = f"dbt_ivm: {model}: no-op (no upstream changes)"
        said: list[str] = []
        sent: list[tuple[float, str]] = []

        def listen(msg: EventMsg) -> None:
            if msg.info.name == "JinjaLogInfo" and msg.info.msg.startswith(noop):
                said.append(msg.info.msg)
            elif msg.info.name == "SQLQuery":
                sent.append((time.time(), msg.data.sql))

        began = time.perf_counter()
        result = self.dbt.invoke("run", "--quiet", "--select", model, *flags, check=False, callbacks=[listen])
        wall = time.perf_counter() - began
        results = getattr(result.result, "results", None) or []
        node_s = float(results[0].execution_time) if results else None
        error = None if result.success else failure_text(result)
        return RunOutcome(wall, node_s, error, bool(said), tuple(sent))

    def last_refresh(self, model: str) -> dict[str, Any] | None:
        """The latest refresh-log row of an ivm model, or None."""
        log = f"{self.schema}.__ivm_refresh_log"
        if not self.spark.catalog.tableExists(log):
            return None
        model_id = f"model.{PROJECT_NAME}.{model}"
        row = (
            self.spark.table(log)
            .where(f"model = '{model_id}'")
            .orderBy("logged_at", ascending=False)
            .limit(1)
            .collect()
        )
        return row[0].asDict(recursive=True) if row else None

    def _compared(self, model: str) -> tuple[str, str, list[str]]:
        """The table, its definition view and the columns they share (bookkeeping excluded)."""
        table = f"{self.schema}.{model}"
        names = [c for c in self.spark.table(table).columns if not c.startswith("__ivm_")]
        return table, f"{self.schema}.__ivm_def__{model}", names

    def keyed_differences(self, table: str, ivm_model: str, key: tuple[str, ...]) -> dict[str, int]:
        """How a table keyed by `key` differs from an ivm model's definition, on the
        definition's columns: rows it should not have (`extra`), rows it lacks (`missing`)
        and rows whose values differ (`stale`). One join of key and row hash per side."""
        definition = f"{self.schema}.__ivm_def__{ivm_model}"
        names = [c for c in self.spark.table(definition).columns if not c.startswith("__ivm_")]
        hashed = ", ".join(f"`{c}` is null, `{c}`" for c in names)
        keys = ", ".join(f"`{k}`" for k in key)
        on = " and ".join(f"t.`{k}` <=> d.`{k}`" for k in key)
        row = self.spark.sql(
            f"select count_if(d.h is null), count_if(t.h is null), count_if(t.h <> d.h) "
            f"from (select {keys}, xxhash64({hashed}) as h from {self.schema}.{table}) t "
            f"full join (select {keys}, xxhash64({hashed}) as h from {definition}) d on {on}"
        ).first()
        return {"extra": int(row[0]), "missing": int(row[1]), "stale": int(row[2])}

    def fingerprints(self, model: str) -> tuple[tuple[int, int], tuple[int, int]]:
        """(rows, sum of 64-bit row hashes) of the table and of its definition view: equal
        multisets give equal pairs; a difference goes unnoticed only if the hash sums
        collide. One scan per side and no shuffle, for tables too large for `differences`.
        Each column's hash is preceded by its is-null flag, since xxhash64 skips NULLs."""
        table, definition, names = self._compared(model)
        hashed = ", ".join(f"`{c}` is null, `{c}`" for c in names)
        sides = []
        for relation in (table, definition):
            total = f"coalesce(sum(cast(xxhash64({hashed}) as decimal(38, 0))), 0)"
            row = self.spark.sql(f"select count(*), {total} from {relation}").first()
            sides.append((int(row[0]), int(row[1])))
        return sides[0], sides[1]

    def differences(self, model: str) -> tuple[int, int]:
        """Rows only in the table and only in the definition view, as multisets (`__ivm_`
        columns excluded): the row counts of `table EXCEPT ALL definition` and of
        `definition EXCEPT ALL table`, both from one aggregation over the union (each
        distinct row's count in the table minus its count in the definition)."""
        table, definition, names = self._compared(model)
        columns = ", ".join(f"`{c}`" for c in names)
        row = self.spark.sql(
            f"select coalesce(sum(greatest(n, 0)), 0), coalesce(sum(greatest(-n, 0)), 0) from ("
            f"select {columns}, sum(side) as n from ("
            f"select {columns}, 1 as side from {table} "
            f"union all select {columns}, -1 as side from {definition}"
            f") group by {columns}) where n <> 0"
        ).first()
        return int(row[0]), int(row[1])
