"""The benchmark run: data, upstreams, models, then for every change batch the ivm
refresh, its correctness check and the rebuild of the table twin, in one Spark session."""

from __future__ import annotations

import time
import zlib
from dataclasses import asdict
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import dbt_ivm
from dbt_ivm.benchmark import environment, report, tpch, upstreams
from dbt_ivm.benchmark.changes import BatchSpec, make_batch
from dbt_ivm.benchmark.config import BenchConfig
from dbt_ivm.benchmark.measure import check, first_line, measure_refresh, refresh_entry, timed_run
from dbt_ivm.benchmark.profile import SparkProfile
from dbt_ivm.benchmark.progress import Progress
from dbt_ivm.benchmark.project import BenchProject
from dbt_ivm.benchmark.results import BenchResult, CatchUp, Sample, percent
from dbt_ivm.benchmark.workloads import SMALL_MODEL, SMALL_ROWS, VIEW_MODEL, Workload, select
from dbt_ivm.spark import local_spark

# commit order within a batch: lineitem's change rows read orders as of before the batch
COMMIT_ORDER = ("lineitem", "orders", "customer")


def package_root(config: BenchConfig) -> Path:
    """The dbt package to benchmark: config.package_dir, else this source checkout
    (python/dbt_ivm/__init__.py -> repository root)."""
    root = (config.package_dir or Path(dbt_ivm.__file__).parents[2]).resolve()
    if not (root / "dbt_project.yml").exists():
        raise RuntimeError(f"dbt_ivm's dbt package not found at {root}: pass --package-dir")
    return root


def batch_seed(config: BenchConfig, locality: str, kind: str, fraction: float, rep: int) -> int:
    return (config.seed * 1_000_003 + zlib.crc32(f"{locality}|{kind}|{fraction!r}|{rep}".encode())) % 2**31


def run_benchmark(
    config: BenchConfig, spark: SparkSession | None = None, progress: Progress | None = None
) -> BenchResult:
    """Run the whole benchmark and write its results to config.out (also as it goes, so an
    interrupted run keeps what it measured). Uses `spark` if given, else starts the
    embedded session under config.work_dir (and stops it at the end)."""
    progress = progress or Progress()
    began = time.perf_counter()
    work = config.work_dir.resolve()
    with progress.step(f"TPC-H SF {config.sf:g}: parquet in {tpch.data_dir(work / 'tpch', config.sf)}"):
        data, base_rows, generated = tpch.generate(work / "tpch", config.sf)
        progress.line(f"  {'generated with duckdb' if generated else 'cached, generation skipped'}")
    own_spark = spark is None
    if spark is None:
        with progress.step("Starting the embedded Spark session"):
            spark = local_spark(work / "spark", config.spark_conf, delta=config.file_format == "delta")
    result = BenchResult(
        config={**asdict(config), "package_dir": str(package_root(config))},
        environment=environment.describe(spark, package_root(config)),
    )
    result.environment["load_average_start"] = environment.load_average()
    try:
        result.base_rows = base_rows
        _run(config, spark, progress, result, data, work)
        result.finished = True
    finally:
        result.duration_s = time.perf_counter() - began
        result.environment["load_average_end"] = environment.load_average()
        with progress.step(f"Writing results to {config.out}"):
            report.write_all(result, config.out, plot=True)
        if own_spark:
            spark.stop()
    return result


def _run(
    config: BenchConfig, spark: SparkSession, progress: Progress, result: BenchResult, data: Path, work: Path
) -> None:
    feeds = "Delta tables with change data feed" if config.file_format == "delta" else "tables + change logs"
    with progress.step(f"Loading upstreams into {config.raw_schema} ({feeds})"):
        tables = upstreams.load(
            spark, config.raw_schema, work / "upstreams" / config.raw_schema, data, config.file_format
        )
        progress.line("  " + ", ".join(f"{n} {c:,} rows" for n, c in result.base_rows.items()))
    with progress.step(f"Writing the dbt project, dbt deps (schema {config.schema})"):
        project = BenchProject.create(
            work / "project" / config.schema,
            config.schema,
            config.raw_schema,
            spark,
            package_root(config),
            config.capture,
            config.file_format,
            config.package_defaults,
        )
    workloads = select(list(config.workloads))
    built = [w for w in workloads if _build(project, w, config, progress, result)]
    report.write_all(result, config.out, plot=False)
    _fixed_cost(project, built, config, progress, result)
    report.write_all(result, config.out, plot=False)

    # the models measured on a batch are refreshed after it; the others catch up at the end.
    # Batches of one kind run together, so a model left out of a kind's batches (see
    # --insert-workloads) catches up after every batch it was measured on
    behind = {w.name: 0 for w in built}
    total = sum(
        len(config.fractions) * config.reps
        for locality in config.localities
        for kind in config.kinds
        if any(locality in w.localities and config.measures(w.name, kind) for w in built)
    )
    done = 0
    for locality in config.localities:
        for kind in config.kinds:
            measured = [w for w in built if locality in w.localities and config.measures(w.name, kind)]
            if not measured:
                continue
            for fraction in config.fractions:
                for rep in range(1, config.reps + 1):
                    done += 1
                    label = f"[{done}/{total}] {locality} {kind} {percent(fraction)} rep {rep}"
                    spec = BatchSpec(
                        kind, fraction, locality, batch_seed(config, locality, kind, fraction, rep)
                    )
                    with progress.step(f"{label}: writing the change batch"):
                        batch = make_batch(tables, spec, result.base_rows)
                        rows = {n: tables[n].commit(batch[n]) for n in COMMIT_ORDER if n in batch}
                        progress.line("  logged " + ", ".join(f"{n} {r:,}" for n, r in rows.items()))
                    for w in built:
                        if w not in measured:
                            behind[w.name] += 1
                    for w in measured:
                        sample = Sample(w.name, locality, kind, fraction, rep, rows)
                        _measure_point(project, w, config, progress, sample)
                        result.samples.append(sample)
                    report.write_all(result, config.out, plot=False)
    for w in built:
        if behind[w.name]:
            _catch_up(project, w, behind[w.name], config, progress, result)
    _small_refresh(project, tables["customer"], config, progress, result)


def _build(
    project: BenchProject, workload: Workload, config: BenchConfig, progress: Progress, result: BenchResult
) -> bool:
    """First build of both twins; a workload whose ivm model cannot build is reported and skipped."""
    project.add_workload(workload)
    with progress.step(f"{workload.name}: first build of {workload.ivm_model} and {workload.table_model}"):
        ivm = project.run(workload.ivm_model)
        table = project.run(workload.table_model)
        build = {"ivm_s": ivm.wall_s, "table_s": table.wall_s, "check": "not run", "error": None}
        if ivm.error or table.error:
            build["error"] = first_line(ivm.error or table.error or "")
            progress.line(f"  FAILED, skipping {workload.name} at every point: {build['error']}")
        else:
            build["rows"] = refresh_entry(project, workload.ivm_model)["rows_inserted"]
            if config.check:
                build["check"], build["differences"], build["error"] = check(
                    project, workload.ivm_model, config.check_method
                )
            progress.line(
                f"  ivm {ivm.wall_s:.1f} s, table {table.wall_s:.1f} s, {build['rows']} rows, "
                f"check {build['check']}"
            )
        if build["error"] is None and _has_hand(workload, config):
            hand = project.run(workload.hand_model)
            build["hand_s"] = hand.wall_s
            progress.line(f"  hand-written incremental {workload.hand_model}: {hand.wall_s:.1f} s")
            if hand.error:
                build["error"] = f"{workload.hand_model}: {first_line(hand.error)}"
        result.builds[workload.name] = build
    return build["error"] is None and (build["check"] == "pass" or not config.check)


def _has_hand(workload: Workload, config: BenchConfig) -> bool:
    """The hand-written incremental twin runs on Delta (its merge strategy needs it)."""
    return workload.hand_sql is not None and config.file_format == "delta"


def _fixed_cost(
    project: BenchProject, built: list[Workload], config: BenchConfig, progress: Progress, result: BenchResult
) -> None:
    """Wall time of `dbt run` for a no-op ivm refresh and for a plain view model."""
    with progress.step(f"Fixed cost: {config.reps} x (view model, no-op refresh of each ivm model)"):
        project.run(VIEW_MODEL)  # warm-up: first parse of the project with the view model
        fixed = result.fixed_cost
        for _ in range(config.reps):
            fixed.view_s.append(project.run(VIEW_MODEL).wall_s)
            for w in built:
                outcome = project.run(w.ivm_model)
                fixed.noop_s.setdefault(w.name, []).append(outcome.wall_s)
                path = "error" if outcome.error else "no-op" if outcome.noop else "-"
                fixed.noop_paths.setdefault(w.name, []).append(path)
        summary = ", ".join(f"{n} {min(v):.2f} s" for n, v in fixed.noop_s.items())
        progress.line(f"  view {min(fixed.view_s):.2f} s; no-op ivm {summary} (fastest of {config.reps})")


def _small_refresh(
    project: BenchProject,
    customer: upstreams.Upstream,
    config: BenchConfig,
    progress: Progress,
    result: BenchResult,
) -> None:
    """Wall time of `dbt run` of a 100-row ivm model after one update of a customer row it
    reads. Last, after every check: the workloads over customer are not refreshed after it."""
    with progress.step(
        f"Fixed cost: {config.reps} x (one changed row, refresh of a {SMALL_ROWS}-row ivm model)"
    ):
        built = project.run(SMALL_MODEL)
        if built.error:
            result.fixed_cost.small_paths.append("error")
            progress.line(f"  {SMALL_MODEL} failed to build: {first_line(built.error)}")
            return
        for rep in range(config.reps):
            row = customer.frame().where(F.col("c_custkey") == rep + 1)
            update = row.withColumn("_change_type", F.lit("update_preimage")).unionByName(
                row.withColumn("c_acctbal", F.col("c_acctbal") + 1).withColumn(
                    "_change_type", F.lit("update_postimage")
                )
            )
            customer.commit(update)
            outcome = project.run(SMALL_MODEL)
            result.fixed_cost.small_s.append(outcome.wall_s)
            path = (
                "error"
                if outcome.error
                else "no-op"
                if outcome.noop
                else refresh_entry(project, SMALL_MODEL)["path"]
            )
            result.fixed_cost.small_paths.append(str(path))
        progress.line(f"  {min(result.fixed_cost.small_s):.2f} s (fastest of {config.reps})")


def _measure_point(
    project: BenchProject, workload: Workload, config: BenchConfig, progress: Progress, sample: Sample
) -> None:
    # whichever runs first after a change batch reads colder files: they take turns
    rebuild_first = sample.rep % 2 == 0
    steps = f"refresh{', check' if config.check else ''}"
    order = f"rebuild, {steps}" if rebuild_first else f"{steps}, rebuild"
    progress.line(f"  {workload.name}: {order} ...")
    ui = project.spark.sparkContext.uiWebUrl
    profile = SparkProfile(ui.rstrip("/")) if ui else None
    rebuilt = _measure_rebuild(project, workload, sample, profile) if rebuild_first else False
    ok = measure_refresh(project, workload.ivm_model, sample, config.check, config.check_method, profile)
    if not ok:
        # start the next point from a correct table
        resync = project.run(workload.ivm_model, "--full-refresh")
        if resync.error:
            sample.errors.append(f"full refresh after the failure failed too: {first_line(resync.error)}")
    if not rebuild_first:
        rebuilt = _measure_rebuild(project, workload, sample, profile)
    if _has_hand(workload, config):
        _measure_hand(project, workload, sample, progress)
    ratio = f"x{sample.rebuild_s / sample.refresh_s:.1f}" if sample.refresh_s and rebuilt else "-"
    rows = f"-{sample.rows_deleted} +{sample.rows_inserted}" if sample.path else ""
    line = (
        f"  {workload.name}: refresh {sample.refresh_s or 0:.1f} s ({sample.path or 'failed'} {rows}), "
        f"rebuild {sample.rebuild_s:.1f} s, {ratio}, check {sample.check}"
    )
    progress.line(line + "".join(f"\n    ERROR {e}" for e in sample.errors))


def _measure_rebuild(
    project: BenchProject, workload: Workload, sample: Sample, profile: SparkProfile | None
) -> bool:
    """Rebuild the table twin into `sample`; True when it succeeded."""
    rebuild, sample.rebuild_profile = timed_run(project, workload.table_model, profile)
    sample.rebuild_s = rebuild.wall_s
    if rebuild.error:
        sample.errors.append(f"rebuild failed: {first_line(rebuild.error)}")
    return rebuild.error is None


def _measure_hand(project: BenchProject, workload: Workload, sample: Sample, progress: Progress) -> None:
    """Run the hand-written incremental twin and count the rows it has wrong."""
    hand = project.run(workload.hand_model)
    sample.hand_s = hand.wall_s
    if hand.error:
        sample.errors.append(f"hand-written {workload.hand_model} failed: {first_line(hand.error)}")
        return
    sample.hand_wrong = project.keyed_differences(workload.hand_model, workload.ivm_model, workload.hand_key)
    wrong = ", ".join(f"{n} {c:,}" for n, c in sample.hand_wrong.items())
    progress.line(f"  {workload.hand_model}: {hand.wall_s:.1f} s, rows wrong so far: {wrong}")


def _catch_up(
    project: BenchProject,
    workload: Workload,
    batches: int,
    config: BenchConfig,
    progress: Progress,
    result: BenchResult,
) -> None:
    with progress.step(
        f"{workload.name}: catch-up refresh over the {batches} batches it was not measured on"
    ):
        outcome = project.run(workload.ivm_model)
        entry = refresh_entry(project, workload.ivm_model) if not outcome.error else {"path": None}
        catch = CatchUp(workload.name, batches, outcome.wall_s, entry["path"], "off", None)
        if outcome.error:
            catch.errors.append(f"refresh failed: {first_line(outcome.error)}")
            catch.check = "not run"
        elif config.check:
            catch.check, catch.differences, error = check(project, workload.ivm_model, config.check_method)
            if error:
                catch.errors.append(error)
        progress.line(f"  {outcome.wall_s:.1f} s, {catch.path}, check {catch.check}")
        result.catch_up.append(catch)
