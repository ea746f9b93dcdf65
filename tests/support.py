"""Test helpers: a throw-away dbt project using this package, upstream tables with change
logs, and the differential check (table == definition recomputed from scratch)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt.cli.main import dbtRunnerResult
from pyspark.sql import SparkSession

from dbt_ivm.changelog import ChangeLoggedTable, Row
from dbt_ivm.runner import DbtProject, failure_text

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


def sources_yaml(raw: str, tables: dict[str, str | None], source: str = "shop") -> str:
    """A sources file: each table with its `meta.ivm` declaration (None: undeclared)."""
    lines = ["version: 2", "sources:", f"  - name: {source}", f"    schema: {raw}", "    tables:"]
    for table, ivm in tables.items():
        lines.append(f"      - name: {table}")
        if ivm is not None:
            lines.append(f"        meta: {{ivm: {{{ivm}}}}}")
    return "\n".join(lines) + "\n"


@dataclass
class IvmProject:
    root: Path
    schema: str
    raw: str
    spark: SparkSession
    dbt: DbtProject

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
        return self.dbt.invoke("run", *args, check=check)

    def run_error(self, *args: str) -> str:
        """Run dbt expecting a failure; returns the error text."""
        result = self.dbt.invoke("run", *args, check=False)
        assert not result.success, "dbt run was expected to fail"
        return failure_text(result)

    def run_failures(self, *args: str) -> dict[str, str]:
        """Run dbt expecting failures; returns the error message of each failed model."""
        result = self.dbt.invoke("run", *args, check=False)
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

    def differences(self, model: str) -> list[dict[str, Any]]:
        """Rows on one side only of table vs. definition (multiset), bookkeeping excluded."""
        table = f"{self.schema}.{model}"
        definition = f"{self.schema}.__ivm_def__{model}"
        cols = ", ".join(f"`{c}`" for c in self.spark.table(table).columns if not c.startswith("__ivm_"))
        only_in_table = f"select {cols} from {table} except all select {cols} from {definition}"
        only_in_definition = f"select {cols} from {definition} except all select {cols} from {table}"
        query = (
            f"select 'table' as side, * from ({only_in_table}) "
            f"union all select 'definition' as side, * from ({only_in_definition})"
        )
        return [r.asDict() for r in self.spark.sql(query).collect()]
