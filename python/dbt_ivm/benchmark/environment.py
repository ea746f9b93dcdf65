"""The machine and software a benchmark ran on, for the report."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

PACKAGES = ("pyspark", "dbt-core", "dbt-spark", "duckdb", "duckdb-extension-tpch")
SPARK_KEYS = ("spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions")


def describe(spark: SparkSession, repo: Path) -> dict[str, Any]:
    conf = spark.sparkContext.getConf()
    return {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
        "spark": {key: spark.conf.get(key, conf.get(key, None)) for key in SPARK_KEYS},
        "git": _git(repo),
    }


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _git(repo: Path) -> str | None:
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "macros", "models", "python"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{commit}{' (uncommitted changes)' if dirty else ''}"
