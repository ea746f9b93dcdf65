"""The embedded Spark session: PySpark in this process, metastore and warehouse on disk.

dbt-spark's `method: session` calls `SparkSession.builder.getOrCreate()`, so creating the
session here first (with the metastore in a chosen folder) makes dbt run on it too.

Delta Lake is loaded from the jars `make setup` fetched into `.delta-jars/` (see
scripts/fetch_delta_jars.sh): with Delta's catalog as the session catalog, one session
serves Delta and parquet tables alike.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark
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


def home_conf(home: Path, extra_conf: dict[str, str] | None, delta: bool) -> dict[str, str]:
    """Settings of a local Spark with its warehouse and Derby metastore under `home`."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        **SPARK_CONF,
        **({**delta_conf(), **DELTA_LOCAL_CONF} if delta else {}),
        "spark.sql.warehouse.dir": str(home / "spark-warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={home / 'metastore_db'};create=true"
        ),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={home}",
        **(extra_conf or {}),
    }


def local_spark(home: Path, extra_conf: dict[str, str] | None = None, delta: bool = False) -> SparkSession:
    """Start (or reuse) the embedded session with its warehouse and metastore under `home`;
    delta=True loads Delta Lake (DeltaUnavailable when its jars were not fetched)."""
    os.environ.setdefault("PYSPARK_PYTHON", "python3")
    builder = SparkSession.builder.appName("dbt_ivm").enableHiveSupport()
    conf = home_conf(home, extra_conf, delta)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class ThriftServer:
    """A Spark Thrift Server on this machine (dbt-spark's `method: thrift`)."""

    host: str
    port: int
    ui_port: int
    process: subprocess.Popen[bytes]
    log: Path

    def running_statements(self) -> dict[int, str]:
        """SQL executions the server's UI (its REST API) shows as running: id -> description."""
        base = f"http://{self.host}:{self.ui_port}/api/v1/applications"
        with urllib.request.urlopen(base, timeout=10) as r:
            app = json.load(r)[0]["id"]
        with urllib.request.urlopen(f"{base}/{app}/sql?details=false&length=100000", timeout=10) as r:
            return {
                int(e["id"]): str(e.get("description", ""))[:200]
                for e in json.load(r)
                if e["status"] == "RUNNING"
            }

    def wait_idle(self, timeout: float = 300.0, quiet: float = 30.0) -> None:
        """Until no statement runs: those of a killed client finish or are cancelled first.

        The UI can show an execution RUNNING for good when its end event was lost (seen once
        in CI after a client was killed mid-statement), and its REST API can answer 404 for a
        moment (seen once in CI); executions count as stale, and an unanswered query as idle,
        once what the API said and the server's log have not changed for `quiet` seconds,
        since a live statement logs every job, stage and file it reads."""
        deadline = time.monotonic() + timeout
        state: tuple[dict[int, str] | str, int] | None = None
        since = time.monotonic()
        while running := self._running_or_error():
            now = (running, self.log.stat().st_size)
            if now != state:
                state, since = now, time.monotonic()
            elif time.monotonic() - since > quiet:
                return
            if time.monotonic() > deadline:
                listed = (
                    running
                    if isinstance(running, str)
                    else "; ".join(f"{i}: {d}" for i, d in sorted(running.items()))
                )
                raise TimeoutError(
                    f"the thrift server on port {self.port} stayed busy for {timeout:.0f} s: {listed}"
                )
            time.sleep(0.2)

    def _running_or_error(self) -> dict[int, str] | str:
        """The running statements, or why the UI did not say."""
        try:
            return self.running_statements()
        except (OSError, ValueError, LookupError) as e:
            return f"the UI did not answer: {e}"


@contextmanager
def thrift_server(
    home: Path, extra_conf: dict[str, str] | None = None, delta: bool = False, startup_timeout: float = 180.0
) -> Iterator[ThriftServer]:
    """Run pyspark's own HiveThriftServer2 (local[2]) with its warehouse and metastore under
    `home`, on free ports of 127.0.0.1; its log is `home/thrift-server.log`."""
    port, ui_port = free_port(), free_port()
    conf = {
        **home_conf(home, extra_conf, delta),
        "spark.ui.enabled": "true",
        "spark.ui.port": str(ui_port),
        "spark.hive.server2.thrift.port": str(port),
        "spark.hive.server2.thrift.bind.host": "127.0.0.1",
    }
    if delta:
        # statements run in the server's own class loader, which sees the driver's class
        # path but not `spark.jars`
        conf["spark.driver.extraClassPath"] = conf["spark.jars"].replace(",", os.pathsep)
    spark_home = Path(pyspark.__file__).parent
    argv = [str(spark_home / "bin" / "spark-submit"), "--master", str(conf.pop("spark.master"))]
    argv += ["--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    env = {**os.environ, "SPARK_HOME": str(spark_home)}
    log_path = home / "thrift-server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([*argv, "spark-internal"], env=env, stdout=log, stderr=subprocess.STDOUT)
    server = ThriftServer("127.0.0.1", port, ui_port, process, log_path)
    try:
        deadline = time.monotonic() + startup_timeout
        while not port_open(server.host, port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the Spark Thrift Server did not start in {startup_timeout:.0f} s: see {server.log}"
                )
            time.sleep(0.5)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0
