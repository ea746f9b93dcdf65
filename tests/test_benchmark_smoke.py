"""The benchmark end to end at its default scale (TPC-H SF 0.1, one mixed batch of 1%, one
repetition) on the session's Spark: every output is written and every correctness check
passes. No timing assertions: the numbers only have to exist.

One date-localised batch covers the most per second: w3p (partitioned) is measured on it,
and w1, w2 (aggregates) and w3 (unpartitioned) apply it in catch-up refreshes, checked too.

duckdb and duckdb-extension-tpch come with the `bench` extra; without them this test
fails with the install command, it never skips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from dbt_ivm.benchmark import BenchConfig, run_benchmark
from dbt_ivm.benchmark.measure import check
from dbt_ivm.benchmark.project import BenchProject
from dbt_ivm.benchmark.report import JSON_FILE, MARKDOWN_FILE, PLOT_FILE

# date-localised batches are measured on w3p; the others apply them in a checked catch-up
SMOKE_WORKLOADS = ("w1", "w2", "w3", "w3p")


def smoke_config(tmp_path: Path, **settings: Any) -> BenchConfig:
    """One mixed batch of 1%, one repetition, results and work under tmp_path."""
    return BenchConfig(
        fractions=(0.01,),
        kinds=("mixed",),
        reps=1,
        out=tmp_path / "results",
        work_dir=tmp_path / "work",
        command="tests/test_benchmark_smoke.py",
        **settings,
    )


def test_benchmark_end_to_end_every_check_passes(spark_defaults: SparkSession, tmp_path: Path) -> None:
    config = smoke_config(
        tmp_path, sf=0.1, workloads=SMOKE_WORKLOADS, localities=("recent",), schema="t_bench"
    )
    result = run_benchmark(config, spark=spark_defaults)

    for name in (JSON_FILE, MARKDOWN_FILE, PLOT_FILE):
        assert (config.out / name).stat().st_size > 0, name
    saved = json.loads((config.out / JSON_FILE).read_text())
    assert saved["finished"] and len(saved["samples"]) == 1
    assert "## W3 join-only, partitioned" in (config.out / MARKDOWN_FILE).read_text()

    assert result.errors() == []
    assert set(result.checks()) == {"pass"}
    assert [(s.workload, s.locality, s.kind) for s in result.samples] == [("w3p", "recent", "mixed")]
    for sample in result.samples:
        assert sample.path == "incremental", sample
        assert sample.batch_rows["lineitem"] > 0 and sample.batch_rows["orders"] > 0
        assert sample.rows_deleted and sample.rows_inserted
        assert sample.refresh_s is not None and sample.rebuild_s is not None
    assert result.fixed_cost.noop_paths == {w: ["no-op"] for w in SMOKE_WORKLOADS}
    assert result.fixed_cost.view_s
    assert result.fixed_cost.small_paths == ["incremental"] and result.fixed_cost.small_s
    # w1, w2 and w3 are not measured on date-localised batches: they apply them at the end
    assert [(c.workload, c.batches, c.path, c.check) for c in result.catch_up] == [
        (w, 1, "incremental", "pass") for w in ("w1", "w2", "w3")
    ]


def test_differences_counts_rows_on_each_side_as_multisets(spark: SparkSession, tmp_path: Path) -> None:
    project = BenchProject(tmp_path, "t_bench_diff", "t_bench_diff_raw", spark)
    spark.sql("drop database if exists t_bench_diff cascade")
    spark.sql("create database t_bench_diff")
    spark.sql(
        "create table t_bench_diff.m using parquet as "
        "select * from values (1, 'x', 'a'), (1, 'x', 'b'), (2, null, 'c'), (3, null, 'd') "
        "as v(k, s, __ivm_id)"
    )
    spark.sql(
        "create view t_bench_diff.__ivm_def__m as "
        "select * from values (1, 'x'), (2, null), (2, null), (3, null) as v(k, s)"
    )
    # one (1, 'x') only in the table, one (2, null) only in the definition; __ivm_ columns ignored
    assert project.differences("m") == (1, 1)
    # the fingerprint check sees the same difference although the row counts agree
    assert check(project, "m", "fingerprint") == ("fail", [4, 4], None)
    spark.sql(
        "create or replace view t_bench_diff.__ivm_def__m as "
        "select * from values (3, null), (1, 'x'), (2, null), (1, 'x') as v(k, s)"
    )
    assert check(project, "m", "fingerprint") == ("pass", [4, 4], None)
    # NULLs in different columns: xxhash64 skips NULLs, the is-null flags tell them apart
    spark.sql("drop table t_bench_diff.m")
    spark.sql(
        "create table t_bench_diff.m using parquet as "
        "select * from values (cast(null as int), 1, 'a') as v(k, s, __ivm_id)"
    )
    spark.sql(
        "create or replace view t_bench_diff.__ivm_def__m as "
        "select * from values (1, cast(null as int)) as v(k, s)"
    )
    assert check(project, "m", "fingerprint")[0] == "fail"
    spark.sql("drop database t_bench_diff cascade")


def test_benchmark_on_delta_with_the_hand_written_twin(
    spark: SparkSession, delta: None, tmp_path: Path
) -> None:
    """`--format delta` at a tiny scale: Delta upstreams changed by one MERGE per batch, read
    through their change data feed; W3's hand-written incremental twin runs after the refresh
    and keeps the lines of deleted orders, which the ivm table drops."""
    config = smoke_config(
        tmp_path,
        sf=0.01,
        workloads=("w3",),
        localities=("uniform",),
        schema="t_bench_delta",
        file_format="delta",
    )
    result = run_benchmark(config, spark=spark)

    assert result.errors() == []
    assert set(result.checks()) == {"pass"}
    (sample,) = result.samples
    assert sample.path == "incremental" and sample.rows_deleted and sample.rows_inserted
    assert sample.hand_s is not None and sample.hand_wrong is not None
    assert sample.hand_wrong["extra"] > 0 and sample.hand_wrong["missing"] == 0, sample.hand_wrong
    assert result.fixed_cost.small_paths == ["incremental"]
    report = (config.out / MARKDOWN_FILE).read_text()
    assert "Delta tables (upstreams with change data feed" in report
    assert "## Against the hand-written incremental model" in report
