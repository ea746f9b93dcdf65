"""Exactly-once under SIGKILL, for models stored as Delta and as parquet: a parent kills
`dbt run` processes at chosen moments of a refresh, and the next process checks that the
tables equal their definitions.

Each child is its own OS process (a Python process running dbt with `method: session`, and
the JVM it starts, in one process group) on a Spark home (warehouse + Derby metastore)
used by nothing else. A child:
  1. reads the facts the last kill left: per model, the refresh log rows since the last
     'success' ('started' rows without 'success' = interrupted refreshes) and, for each,
     for a Delta model, whether the table's history has a data-changing commit after the
     version its 'started' row recorded (table_version);
  2. runs `dbt run` (the recovery), then compares every model with its definition
     recomputed from scratch (EXCEPT ALL both ways);
  3. commits a random batch of inserts/updates/deletes to the two Delta upstreams (change
     data feed on, declared only by unique_key), announces "refresh started" and runs
     `dbt run` again: the parent kills the process group during that run.
After a kill that left a committed but unlogged refresh, some children commit a batch
first and are killed during the recovery run itself (two interrupted refreshes in a row).
Events (run start, each write statement and refresh log row, start and end) go to the
parent through a pipe, so the parent can aim its kills at the write commit; the outcome
is classified afterwards from the facts of step 1 only.

    python -m tests.kill_worker campaign --work DIR --kills 24 [--seed N] [--out report.md]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import re
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt_ivm.spark import ThriftServer, thrift_server
from tests.support import TEST_SPARK_CONF, differences_sql

REPO_ROOT = Path(__file__).resolve().parents[1]
SCHEMA = "kills"
RAW = "kills_raw"
MODELS: dict[str, str] = {
    # join-only: every refresh is one INSERT (insert-only batch) or one MERGE
    "facts": """\
        {{ config(materialized='ivm', file_format='delta') }}
        select o.id, o.amount, c.id as customer_id, c.region
        from {{ source('shop', 'orders') }} o join {{ source('shop', 'customers') }} c on o.customer_id = c.id
        """,
    # aggregate over the join: signed count/sum deltas merged into the stored groups
    "by_region": """\
        {{ config(materialized='ivm', file_format='delta') }}
        select c.region, count(*) as n, sum(o.amount) as total
        from {{ source('shop', 'orders') }} o join {{ source('shop', 'customers') }} c on o.customer_id = c.id
        group by c.region
        """,
    # the same two stored as parquet (each write is a new generation directory and a
    # location switch, or a partition overwrite), the join partitioned
    "facts_pq": """\
        {{ config(materialized='ivm', partition_by=['region']) }}
        select o.id, o.amount, c.id as customer_id, c.region
        from {{ source('shop', 'orders') }} o join {{ source('shop', 'customers') }} c on o.customer_id = c.id
        """,
    "by_region_pq": """\
        {{ config(materialized='ivm') }}
        select c.region, count(*) as n, sum(o.amount) as total
        from {{ source('shop', 'orders') }} o join {{ source('shop', 'customers') }} c on o.customer_id = c.id
        group by c.region
        """,
}
# models stored as parquet: no table history, so whether a killed write committed is unknown
PARQUET = ("facts_pq", "by_region_pq")
TABLES = {
    "orders": "id bigint, customer_id bigint, amount int",
    "customers": "id bigint, region string",
}
REGIONS = ["eu", "us", "apac", None]


# ---------------------------------------------------------------------------- the child


class Events:
    """JSON lines to the parent through an inherited pipe (one write each: atomic)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()

    def send(self, event: str, **data: Any) -> None:
        line = json.dumps({"event": event, "t": time.time(), **data}, default=str) + "\n"
        with self.lock:
            os.write(self.fd, line.encode())


def statement_kind(sql: str, model: str) -> str | None:
    """What a statement of a model's refresh does, for the events: the write of the
    model's table, or a refresh log row."""
    # dbt puts its query comment (/* {"app": "dbt", ...} */) first
    text = " ".join(re.sub(r"^\s*/\*.*?\*/", "", sql, flags=re.S).lower().split())
    table = f"{SCHEMA}.{model} "
    if text.startswith(("merge into " + table, "insert into " + table, "insert overwrite table " + table)):
        return "write"
    # parquet: a new generation directory, the switch to it, a partitioned table's CTAS
    if text.startswith("insert overwrite directory") and f"/{model}__ivm_g" in text:
        return "write"
    if text.startswith((f"alter table {table}set location", "create table " + table)):
        return "write"
    if text.startswith("create or replace table") and f"{SCHEMA}.{model} " in text:
        return "write"
    if "__ivm_refresh_log" in text and text.startswith("insert overwrite"):
        for status in ("started", "success"):
            if f", '{status}', " in text:
                return f"log-{status}"
    return None


def dbt_callback(events: Events) -> Callable[[Any], None]:
    """Forward the invocation id and the start and end of each write and log statement."""
    running: dict[str, str] = {}
    seen: list[str] = []

    def callback(msg: Any) -> None:
        name = msg.info.name
        if name not in ("SQLQuery", "SQLQueryStatus"):
            return
        model = msg.data.node_info.node_name
        if model not in MODELS:
            return
        if not seen:  # the id of this invocation, which starts every refresh_id
            seen.append(msg.info.invocation_id)
            events.send("invocation", id=msg.info.invocation_id)
        if name == "SQLQuery":
            kind = statement_kind(msg.data.sql, model)
            if kind:
                running[model] = kind
                events.send(f"{kind}-start", model=model)
        elif model in running:
            events.send(f"{running.pop(model)}-end", model=model)

    return callback


def write_project(
    project: Path, thrift: str | None, models: dict[str, str] = MODELS, lease_timeout: int = 1
) -> None:
    """The dbt project of the campaign (and of the concurrency test, with its models and
    the default lease timeout): `method: session` (the child's own embedded Spark) or
    `method: thrift` at host:port. In the campaign a killed refresh's lease is dead at once:
    the parent starts the next process only after the killed one is gone (and the server
    idle)."""
    (project / "models").mkdir(parents=True, exist_ok=True)
    (project / "dbt_project.yml").write_text(
        textwrap.dedent(
            f"""\
            name: ivm_kills
            version: "1.0"
            config-version: 2
            profile: ivm_kills
            model-paths: ["models"]
            models:
              ivm_kills:
                # tiny tables: every batch is a large share of them
                +meta:
                  ivm_rebuild_above: false
                  ivm_lease_timeout: {lease_timeout}
            """
        )
    )
    host, port = thrift.rsplit(":", 1) if thrift else ("NA", None)
    # dbt-spark polls a statement still running every poll_interval seconds (5 by default)
    method = f"thrift\n      port: {port}\n      poll_interval: 1" if port else "session"
    (project / "profiles.yml").write_text(
        "ivm_kills:\n  target: kills\n  outputs:\n    kills:\n      type: spark\n"
        f"      method: {method}\n      host: {host}\n      schema: {SCHEMA}\n      threads: 2\n"
    )
    (project / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    declared = "config: {meta: {ivm: {unique_key: [id]}}}"
    tables = "\n".join(f"      - {{name: {t}, {declared}}}" for t in TABLES)
    (project / "models" / "sources.yml").write_text(
        f"version: 2\nsources:\n  - name: shop\n    schema: {RAW}\n    tables:\n{tables}\n"
    )
    for name, sql in models.items():
        (project / "models" / f"{name}.sql").write_text(textwrap.dedent(sql))


def sql_value(v: Any) -> str:
    if v is None:
        return "null"
    return f"'{v}'" if isinstance(v, str) else str(v)


Query = Callable[[str], list[dict[str, Any]]]


def spark_query(spark: Any) -> Query:
    return lambda sql: [r.asDict() for r in spark.sql(sql).collect()]


def thrift_query(address: str) -> Query:
    """Statements through the Spark Thrift Server at host:port (PyHive, as dbt-spark)."""
    from pyhive import hive

    host, port = address.rsplit(":", 1)
    cursor = hive.connect(host=host, port=int(port)).cursor()

    def query(sql: str) -> list[dict[str, Any]]:
        cursor.execute(sql)
        if not cursor.description:
            return []
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    return query


def commit_batch(q: Query, pick: random.Random) -> dict[str, list[list[Any]]]:
    """One MERGE per upstream (some batches insert-only): each row is inserted, updated
    or deleted at most once. Returns the operations, per table."""
    insert_only = pick.random() < 0.3
    done: dict[str, list[list[Any]]] = {}
    for table in TABLES:
        ids = sorted(r["id"] for r in q(f"select id from {RAW}.{table}"))
        next_id = (max(ids) if ids else 0) + 1
        ops: list[list[Any]] = []
        for _ in range(pick.randint(0 if table == "customers" else 1, 3)):
            kind = "insert" if insert_only or not ids else pick.choice(["insert", "update", "delete"])
            if kind == "insert":
                key, next_id = next_id, next_id + 1
            else:
                key = ids.pop(pick.randrange(len(ids)))
            if table == "orders":
                amount = None if pick.random() < 0.1 else pick.randint(1, 50)
                ops.append([kind, key, pick.randint(1, 7), amount])
            else:
                ops.append([kind, key, pick.choice(REGIONS)])
        if ops:
            columns = [c.split()[0] for c in TABLES[table].split(", ")]
            values = ", ".join("(" + ", ".join(sql_value(v) for v in op) + ")" for op in ops)
            sets = ", ".join(f"t.{c} = s.{c}" for c in columns[1:])
            q(
                f"merge into {RAW}.{table} t "
                f"using (select * from values {values} as s(op, {', '.join(columns)})) s "
                f"on t.id = s.id when matched and s.op = 'delete' then delete "
                f"when matched then update set {sets} "
                f"when not matched and s.op != 'delete' then insert ({', '.join(columns)}) "
                f"values ({', '.join('s.' + c for c in columns)})"
            )
        done[table] = ops
    return done


def setup_upstreams(q: Query, pick: random.Random) -> None:
    for db in (SCHEMA, RAW):
        q(f"drop database if exists {db} cascade")
        q(f"create database {db}")
    for table, columns in TABLES.items():
        q(
            f"create table {RAW}.{table} ({columns}) using delta "
            "tblproperties ('delta.enableChangeDataFeed' = 'true')"
        )
    customers = ", ".join(f"({i}, {sql_value(pick.choice(REGIONS))})" for i in range(1, 6))
    orders = ", ".join(f"({i}, {pick.randint(1, 7)}, {sql_value(pick.randint(1, 50))})" for i in range(1, 13))
    q(f"insert into {RAW}.customers values {customers}")
    q(f"insert into {RAW}.orders values {orders}")


WRITES = ("WRITE", "MERGE", "CREATE TABLE AS SELECT", "CREATE OR REPLACE TABLE AS SELECT")


def refresh_facts(q: Query) -> dict[str, Any]:
    """Per model: the refresh log since its last 'success' row, each interrupted refresh
    ('started' without 'success') and whether its write committed: a data-changing commit
    of the table after the version its 'started' row recorded and up to the version the
    next 'started' row recorded (only one refresh writes the table at a time)."""
    facts: dict[str, Any] = {}
    for model in MODELS:
        log = q(
            f"select refresh_id, status, path, table_version from {SCHEMA}.__ivm_refresh_log "
            f"where model like '%.{model}' order by logged_at"
        )
        history = [] if model in PARQUET else q(f"describe history {SCHEMA}.{model}")
        writes = [c["version"] for c in history if c["operation"] in WRITES]
        started = [r for r in log if r["status"] == "started"]
        bounds = {
            r["refresh_id"]: (r["table_version"], nxt["table_version"] if nxt else None)
            for r, nxt in zip(started, [*started[1:], None], strict=True)
        }
        last_success = max((i for i, r in enumerate(log) if r["status"] == "success"), default=-1)
        interrupted = []
        for r in log[last_success + 1 :]:
            if r["status"] != "started":
                continue
            low, high = bounds[r["refresh_id"]]
            committed = (
                None
                if model in PARQUET
                else low is not None and any(v > low and (high is None or v <= high) for v in writes)
            )
            interrupted.append({"refresh_id": r["refresh_id"], "path": r["path"], "committed": committed})
        facts[model] = {"log_rows": len(log), "interrupted": interrupted}
    return facts


def differences(q: Query, model: str) -> list[dict[str, Any]]:
    """Rows on one side only of table vs. definition (multiset)."""
    return q(differences_sql(SCHEMA, model, [r["col_name"] for r in q(f"show columns in {SCHEMA}.{model}")]))


def last_paths(q: Query) -> dict[str, Any]:
    rows = q(
        f"select model, path, reason from {SCHEMA}.__ivm_refresh_log where status = 'success' "
        "order by logged_at"
    )
    return {r["model"].rsplit(".", 1)[-1]: f"{r['path']}: {r['reason']}" for r in rows}


def child_main(args: argparse.Namespace) -> int:
    from dbt_ivm.runner import DbtProject, failure_text
    from dbt_ivm.spark import local_spark

    events = Events(args.events_fd)
    project = Path(args.project)
    pick = random.Random(args.seed * 1000 + args.iteration)
    if args.thrift:
        q = thrift_query(args.thrift)
    else:
        q = spark_query(local_spark(Path(args.home), TEST_SPARK_CONF, delta=True))
    dbt = DbtProject(project, project)
    if args.setup:
        write_project(project, args.thrift)
        setup_upstreams(q, pick)
        dbt.invoke("deps")
    else:
        events.send("facts", facts=refresh_facts(q))
    if args.batch_first:
        # upstreams moved on after the crash: the recovery has a change of its own to apply
        events.send("batch", ops=commit_batch(q, pick))
    events.send("recovery-started")
    result = dbt.invoke("run", "--select", "package:ivm_kills", check=False, callbacks=[dbt_callback(events)])
    diffs = {m: differences(q, m) for m in MODELS} if result.success else {}
    events.send(
        "check",
        run_ok=result.success,
        error=None if result.success else failure_text(result),
        differences=diffs,
        paths=last_paths(q) if result.success else {},
    )
    if args.final or not result.success:
        return 0
    events.send("batch", ops=commit_batch(q, pick))
    events.send("refresh-started")
    result = dbt.invoke("run", "--select", "package:ivm_kills", check=False, callbacks=[dbt_callback(events)])
    events.send("refresh-finished", run_ok=result.success)
    return 0


# ---------------------------------------------------------------------------- the parent


@dataclass
class KillPlan:
    """When to kill: `delay` seconds after `anchor` (an event name) of `model`
    (None: any model), during the recovery run or the refresh after the batch."""

    run: str  # "refresh" | "recovery"
    anchor: str
    model: str | None
    delay: float


@dataclass
class Campaign:
    """Kills of `dbt run` processes on the embedded Spark (`thrift` None: each child is
    Python + its own JVM) or through a Spark Thrift Server (each child is a dbt client;
    the server outlives it, and the next child starts once the server is idle)."""

    work: Path
    seed: int
    thrift: ThriftServer | None = None
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pace(self) -> float:
        """Kill delays scale with how long a refresh takes: a warm server is much faster
        than a child's cold JVM."""
        return 0.25 if self.thrift else 1.0

    @property
    def home(self) -> Path:
        return self.work / "spark_home"

    @property
    def project(self) -> Path:
        return self.work / "project"

    def plan(self, pick: random.Random, committed: list[str]) -> KillPlan:
        """Spread the kills over a refresh: anywhere in the run; around the write of one
        model (before it, while it runs, just after its commit, before the 'success' log
        row); and, after a kill that came after the write of a model had returned
        (`committed`, from the events: the facts are read by the next child only), during
        the recovery run itself (a second interrupted refresh on top of the first)."""
        model = pick.choice(list(MODELS))
        if committed and pick.random() < 0.5:
            return KillPlan(
                "recovery",
                pick.choice(["log-started-end", "write-start"]),
                pick.choice(committed),
                pick.uniform(0.0, 0.4 * self.pace),
            )
        shape = pick.random()
        if shape < 0.2:
            return KillPlan("refresh", "refresh-started", None, pick.uniform(0.0, 12.0 * self.pace))
        if shape < 0.35:
            return KillPlan("refresh", "log-started-end", model, pick.uniform(0.0, 1.5 * self.pace))
        if shape < 0.75:
            return KillPlan("refresh", "write-start", model, pick.uniform(0.0, 2.5 * self.pace))
        return KillPlan("refresh", "write-end", model, pick.uniform(0.0, 0.6 * self.pace))

    def run(
        self, kills: int, log: Callable[[str], None] = print, progress: Callable[[], None] | None = None
    ) -> dict[str, Any]:
        self.work.mkdir(parents=True, exist_ok=True)
        pick = random.Random(self.seed)
        committed: list[str] = []
        iteration = 0
        killed = 0
        while True:
            final = killed >= kills
            plan = None if final else self.plan(pick, committed)
            record = self.child(iteration, plan, final)
            self.records.append(record)
            log(json.dumps(summary_line(record), default=str))
            if progress:
                progress()
            after_write = ("write-end", "log-success-start")
            committed = [m for m, phase in record.get("phase", {}).items() if phase in after_write]
            if record.get("killed"):
                killed += 1
            check = record.get("check") or {}
            if final or not check.get("run_ok", True):
                break
            iteration += 1
            if iteration > kills * 3:
                raise RuntimeError("too many children without a kill: the kill plans miss their runs")
        return self.summary()

    def child(self, iteration: int, plan: KillPlan | None, final: bool) -> dict[str, Any]:
        self.work.mkdir(parents=True, exist_ok=True)
        read_fd, write_fd = os.pipe()
        argv = [
            sys.executable,
            "-m",
            "tests.kill_worker",
            "child",
            "--home",
            str(self.home),
            "--project",
            str(self.project),
            "--seed",
            str(self.seed),
            "--iteration",
            str(iteration),
            "--events-fd",
            str(write_fd),
        ]
        argv += ["--setup"] if iteration == 0 else []
        argv += ["--final"] if final else []
        argv += ["--batch-first"] if plan and plan.run == "recovery" else []
        argv += ["--thrift", f"{self.thrift.host}:{self.thrift.port}"] if self.thrift else []
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "python"), str(REPO_ROOT)])}
        with open(self.work / f"child_{iteration:03d}.log", "wb") as out:
            proc = subprocess.Popen(
                argv,
                cwd=REPO_ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                start_new_session=True,
            )
        os.close(write_fd)
        record: dict[str, Any] = {
            "iteration": iteration,
            "plan": plan.__dict__ if plan else None,
            "started": time.time(),
            "events": [],
        }
        lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=read_events, args=(read_fd, lines), daemon=True).start()
        deadline: float | None = None
        armed = plan is None
        run_seen = False
        while True:
            timeout = 0.5 if deadline is None else max(0.0, deadline - time.time())
            try:
                event = lines.get(timeout=timeout)
            except queue.Empty:
                event = {}
            if event is None:  # the child closed the pipe: it ended
                break
            if event:
                record["events"].append(event)
                name = event["event"]
                if name in ("facts", "check", "batch"):
                    record[name] = event.get(name, event)
                if plan and not armed and name == f"{plan.run}-started":
                    run_seen = True
                    if plan.anchor == name:
                        deadline, armed = event["t"] + plan.delay, True
                elif (
                    plan
                    and run_seen
                    and not armed
                    and name == plan.anchor
                    and event.get("model") == plan.model
                ):
                    deadline, armed = event["t"] + plan.delay, True
                if name == "check" and plan and plan.run == "refresh" and not event["run_ok"]:
                    plan = None  # the recovery failed: nothing to kill, the test reports it
            if deadline is not None and time.time() >= deadline:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    record["killed"] = True
                    record["kill_t"] = time.time()
                deadline = None
            if time.time() - record["started"] > 600:
                os.killpg(proc.pid, signal.SIGKILL)
                raise RuntimeError(f"child {iteration} ran for 10 minutes: see {self.work}")
        proc.wait()
        wait_group_gone(proc.pid)
        if self.thrift:
            self.thrift.wait_idle()
        record["returncode"] = proc.returncode
        record["seconds"] = round(time.time() - record["started"], 1)
        if record.get("killed"):
            record["phase"] = phase_at_kill(record)
        return record

    def summary(self) -> dict[str, Any]:
        """Per kill: which refreshes it interrupted (facts read by the next child) and
        whether the next run converged. Counts over the kills and over the interrupted
        refreshes (one kill can interrupt both models)."""
        by_iteration = {r["iteration"]: r for r in self.records}
        # a kill counts once a later child has read its facts and finished a recovery
        kills = [
            r
            for r in self.records
            if r.get("killed")
            and any(c["iteration"] > r["iteration"] and c.get("check") for c in self.records)
        ]
        seconds = sorted(r["seconds"] for r in self.records if r.get("seconds"))
        counted: dict[str, Any] = {
            "kills": len(kills),
            "pending": sum(1 for r in self.records if r.get("killed")) - len(kills),
            "child_seconds_median": seconds[len(seconds) // 2] if seconds else None,
            "landed": 0,
            "interrupted_refreshes": 0,
            "before_commit": 0,
            "after_commit": 0,
            "parquet": 0,
            "log_lost": 0,
            "converged": 0,
            "chained": 0,
            "phases": {},
            "children": len(self.records),
        }
        for r in kills:
            nxt = by_iteration.get(r["iteration"] + 1, {})
            facts = nxt.get("facts") or {}
            invocation = r.get("invocation_ids", [])
            mine = [
                i
                for f in facts.values()
                for i in f["interrupted"]
                if invocation and i["refresh_id"].split(":")[0] == invocation[-1]
            ]
            r["interrupted"] = mine
            if mine:
                counted["landed"] += 1
                counted["interrupted_refreshes"] += len(mine)
                counted["after_commit"] += sum(1 for i in mine if i["committed"])
                counted["before_commit"] += sum(1 for i in mine if i["committed"] is False)
                counted["parquet"] += sum(1 for i in mine if i["committed"] is None)
            if any(f["log_rows"] == 0 for f in facts.values()):
                counted["log_lost"] += 1
            if r["plan"]["run"] == "recovery" and mine:
                counted["chained"] += 1
            # the first recovery that ran to its end (the next one may be killed too)
            later = [c for c in self.records if c["iteration"] > r["iteration"] and c.get("check")]
            check = later[0]["check"] if later else {}
            if check.get("run_ok") and not any(check.get("differences", {}).values()):
                counted["converged"] += 1
            for model, phase in r.get("phase", {}).items():
                counted["phases"].setdefault(model, {}).setdefault(phase, 0)
                counted["phases"][model][phase] += 1
        return counted


def read_events(fd: int, lines: queue.Queue[dict[str, Any] | None]) -> None:
    buffer = b""
    while True:
        select.select([fd], [], [])
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        for line in complete:
            event = json.loads(line)
            event["t_parent"] = time.time()
            lines.put(event)
    os.close(fd)
    lines.put(None)


def wait_group_gone(pgid: int) -> None:
    """Until no process of the killed group (the JVM) is left: Derby's lock is released."""
    for _ in range(200):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(pgid, signal.SIGKILL)


def phase_at_kill(record: dict[str, Any]) -> dict[str, str]:
    """Per model, the last refresh statement event the parent saw before its kill in the
    killed run: where in the refresh the kill landed (the facts say what it left)."""
    kill_t = record["kill_t"]
    run = record["plan"]["run"]
    phases: dict[str, str] = {}
    in_run = False
    ids: list[str] = []
    for e in record["events"]:
        if e["t_parent"] > kill_t:
            break
        if e["event"] == f"{run}-started":
            in_run = True
            phases = {}
        if e["event"] == "invocation":
            ids.append(e["id"])
        if in_run and e.get("model") in MODELS:
            phases[e["model"]] = e["event"]
    record["invocation_ids"] = ids
    return {m: phases.get(m, "before-refresh") for m in MODELS}


def summary_line(record: dict[str, Any]) -> dict[str, Any]:
    check = record.get("check") or {}
    return {
        "child": record["iteration"],
        "seconds": record.get("seconds"),
        "plan": record.get("plan"),
        "killed": record.get("killed", False),
        "phase": record.get("phase"),
        "facts": record.get("facts"),
        "run_ok": check.get("run_ok"),
        "differ": {m: len(d) for m, d in check.get("differences", {}).items()},
        "error": check.get("error"),
    }


def markdown(summary: dict[str, Any], seed: int, seconds: float, thrift: bool) -> str:
    s = summary
    phases = "\n".join(
        f"| {m} | " + ", ".join(f"{k}: {v}" for k, v in sorted(p.items())) + " |"
        for m, p in sorted(s["phases"].items())
    )
    if thrift:
        how = (
            "Each kill SIGKILLs a `dbt run` process (`method: thrift`) whose Spark Thrift Server\n"
            "lives on, as a cluster outlives a dying scheduler worker; the next process starts once\n"
            "the server is idle, recovers"
        )
    else:
        how = (
            "Each kill SIGKILLs the whole `dbt run` process group (`method: session`: Python and\n"
            "the Spark driver's JVM, in the middle of a write or not); the next process recovers"
        )
    mode = " --thrift" if thrift else ""
    command = f"python -m tests.kill_worker campaign{mode} --kills {s['kills']} --seed {seed}"
    return (
        f"# Exactly-once under SIGKILL{' (thrift)' if thrift else ' (embedded session)'}\n\n"
        f"`{command}` (`make soak`); {s['children']} child processes, {seconds:.0f} s on this machine\n"
        f"(2 shared cores). {how} and compares every model with its definition recomputed from\n"
        "scratch. Two models are stored as Delta, two as parquet (the join partitioned). Outcomes\n"
        "from facts only: the refresh log ('started' without 'success') and, for Delta, the table\n"
        "history (commits after the version each 'started' row recorded).\n\n"
        + textwrap.dedent(
            f"""\
        | figure | count |
        |---|---|
        | kills (SIGKILL of a live dbt run) | {s["kills"]} |
        | landed inside a refresh (a 'started' row without 'success') | {s["landed"]} |
        | interrupted refreshes (a kill can interrupt several models) | {s["interrupted_refreshes"]} |
        | ... of a Delta model, write not committed (before the MERGE/INSERT commit) | {s["before_commit"]} |
        | ... of a Delta model, write committed, 'success' row missing | {s["after_commit"]} |
        | ... of a parquet model | {s["parquet"]} |
        | kills during a recovery run that left a 2nd interrupted refresh | {s["chained"]} |
        | kills after which the refresh log of a model was lost | {s["log_lost"]} |
        | converged (next run succeeded, every model == its definition) | {s["converged"]} |
        | kills whose recovery had not run when the campaign stopped | {s["pending"]} |

        Median seconds per child process: {s["child_seconds_median"]}.

        Last refresh event the parent saw before each kill, per model:

        | model | events |
        |---|---|
        """
        )
        + phases
        + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    child = sub.add_parser("child")
    child.add_argument("--home", required=True)
    child.add_argument("--project", required=True)
    child.add_argument("--seed", type=int, required=True)
    child.add_argument("--iteration", type=int, required=True)
    child.add_argument("--events-fd", type=int, required=True)
    child.add_argument("--setup", action="store_true")
    child.add_argument("--final", action="store_true")
    child.add_argument("--batch-first", action="store_true")
    child.add_argument("--thrift", help="host:port of a Spark Thrift Server (default: embedded Spark)")
    campaign = sub.add_parser("campaign")
    campaign.add_argument("--work", required=True)
    campaign.add_argument("--kills", type=int, default=24)
    campaign.add_argument("--seed", type=int, default=20261123)
    campaign.add_argument("--out")
    campaign.add_argument("--thrift", action="store_true", help="through a Spark Thrift Server")
    again = sub.add_parser("summarize", help="the figures of a campaign's records.json (e.g. a stopped one)")
    again.add_argument("--work", required=True)
    again.add_argument("--seed", type=int, default=20261123)
    again.add_argument("--seconds", type=float, required=True)
    again.add_argument("--out", required=True)
    again.add_argument("--thrift", action="store_true", help="the campaign ran through a thrift server")
    args = parser.parse_args()
    if args.command == "child":
        return child_main(args)
    if args.command == "summarize":
        c = Campaign(Path(args.work), args.seed)
        c.records = json.loads((Path(args.work) / "records.json").read_text())
        for r in c.records:
            if r.get("killed"):
                r["phase"] = phase_at_kill(r)
        Path(args.out).write_text(markdown(c.summary(), args.seed, args.seconds, args.thrift))
        print(json.dumps(c.summary(), indent=1))
        return 0
    started = time.time()
    c = Campaign(Path(args.work), args.seed)

    def save() -> None:
        (Path(args.work) / "records.json").write_text(json.dumps(c.records, default=str, indent=1))
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(markdown(c.summary(), args.seed, time.time() - started, args.thrift))

    if args.thrift:
        with thrift_server(c.home, TEST_SPARK_CONF, delta=True) as c.thrift:
            summary = c.run(args.kills, progress=save)
    else:
        summary = c.run(args.kills, progress=save)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
