"""Benchmark settings and the command line that sets them."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dbt_ivm.benchmark.changes import KINDS, LOCALITIES
from dbt_ivm.benchmark.upstreams import FORMATS
from dbt_ivm.benchmark.workloads import WORKLOADS

DEFAULT_SIZES_PERCENT: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0)
# on top of dbt_ivm.spark.SPARK_CONF (local[2], 4 shuffle partitions, UTC)
# the UI serves the profile of each run (executions, jobs, bytes read; benchmark/profile.py)
BENCH_SPARK_CONF: dict[str, str] = {
    "spark.driver.memory": "4g",
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "true",
}
# on Delta: new tables get deletion vectors, as on Databricks, so that a MERGE or DELETE
# marks rows instead of rewriting their files
DELTA_BENCH_CONF: dict[str, str] = {
    "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true"
}


@dataclass(frozen=True)
class BenchConfig:
    sf: float = 0.1
    workloads: tuple[str, ...] = tuple(WORKLOADS)
    fractions: tuple[float, ...] = tuple(p / 100 for p in DEFAULT_SIZES_PERCENT)
    kinds: tuple[str, ...] = KINDS
    localities: tuple[str, ...] = LOCALITIES
    reps: int = 3
    out: Path = Path("benchmark_results/sf0.1")
    work_dir: Path = Path("benchmark_results/tmp")
    schema: str = "bench"
    seed: int = 5
    check: bool = True
    # exact: EXCEPT ALL both ways; fingerprint: row count and sum of row hashes (large tables)
    check_method: str = "exact"
    spark_conf: dict[str, str] = field(default_factory=lambda: dict(BENCH_SPARK_CONF))
    command: str = ""
    # the dbt package under test; None: this source checkout
    package_dir: Path | None = None
    # how the ivm models read the upstreams' changes: their change logs, or diff capture
    capture: str = "change_log"
    # storage of upstreams and models: parquet (change logs) or delta (change data feed)
    file_format: str = "parquet"
    # False: ivm_rebuild_above false, every size measures the incremental path; True: the
    # package's defaults choose (size rule, and on parquet the cost estimate)
    package_defaults: bool = False
    # the workloads measured on insert-only batches (empty: all); the others catch up at the end
    insert_workloads: tuple[str, ...] = ()

    def measures(self, workload: str, kind: str) -> bool:
        """Whether a workload is measured on batches of this kind."""
        return kind != "insert" or not self.insert_workloads or workload in self.insert_workloads

    @property
    def raw_schema(self) -> str:
        return f"{self.schema}_raw"


def _names(text: str, allowed: Sequence[str], what: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{what}: choose from {', '.join(allowed)}; got {text!r}")
    return names


def _percents(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(p.strip().rstrip("%")) / 100 for p in text.split(",") if p.strip())
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"sizes: percentages like 0.01,0.1,1,10; got {text!r}") from error
    if not values or any(not 0 < v <= 1 for v in values):
        raise argparse.ArgumentTypeError(f"sizes: percentages in (0, 100]; got {text!r}")
    return values


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--spark-conf wants KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def parse_args(argv: Sequence[str] | None, prog: str = "python -m dbt_ivm.benchmark") -> BenchConfig:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Refresh vs rebuild of dbt_ivm models on TPC-H data, on the embedded Spark.",
    )
    parser.add_argument(
        "--sf", type=float, default=0.1, help="TPC-H scale factor (default 0.1; 1 is ~6M lineitems)"
    )
    parser.add_argument(
        "--workloads",
        type=lambda t: _names(t, tuple(WORKLOADS), "workloads"),
        default=tuple(WORKLOADS),
        help=f"comma-separated, from {','.join(WORKLOADS)} (default all; w3p: W3 partitioned by month; "
        "w4: customers mart, keyed recompute; w5: orders x customer, row keys of one column; "
        "w6: orders with their latest line, keyed recompute of a window joined on its partition)",
    )
    parser.add_argument(
        "--sizes",
        type=_percents,
        default=tuple(p / 100 for p in DEFAULT_SIZES_PERCENT),
        help="change sizes in percent of lineitem/orders rows (default 0.01,0.1,1,10)",
    )
    parser.add_argument(
        "--kinds",
        type=lambda t: _names(t, KINDS, "kinds"),
        default=KINDS,
        help=f"comma-separated, from {','.join(KINDS)} (default all)",
    )
    parser.add_argument(
        "--insert-workloads",
        type=lambda t: _names(t, tuple(WORKLOADS), "insert workloads"),
        default=(),
        help="the workloads measured on insert-only batches (default: all of --workloads); the "
        "others catch up after the last batch",
    )
    parser.add_argument(
        "--localities",
        type=lambda t: _names(t, LOCALITIES, "localities"),
        default=LOCALITIES,
        help="uniform: changes anywhere; recent: on the latest order dates, w3p only (default both)",
    )
    parser.add_argument("--reps", type=int, default=3, help="repetitions per point; the report shows medians")
    parser.add_argument(
        "--out", type=Path, default=None, help="results folder (default benchmark_results/sf<SF>)"
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path("benchmark_results/tmp"),
        help="TPC-H parquet cache, Spark warehouse, dbt project (default benchmark_results/tmp)",
    )
    parser.add_argument(
        "--schema", default="bench", help="schema of the models; upstreams go to <schema>_raw"
    )
    parser.add_argument("--seed", type=int, default=5, help="seed of the change batches")
    parser.add_argument(
        "--capture",
        choices=("change_log", "diff"),
        default="change_log",
        help="change_log: the upstreams declare their change logs (default); diff: they declare "
        "change_feed: diff and dbt_ivm compares each table with its snapshot",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="parquet",
        help="parquet: upstreams with change logs, models copy-on-write (default); delta: upstreams "
        "with Delta's change data feed, models as Delta tables (MERGE), plus W3's hand-written "
        "incremental twin",
    )
    parser.add_argument(
        "--package-defaults",
        action="store_true",
        help="leave ivm_rebuild_above at its default, so that the refresh may choose a rebuild (size "
        "rule; on parquet the cost estimate): what a user gets. Default: off, every size measures "
        "the incremental path",
    )
    parser.add_argument("--no-check", action="store_true", help="skip the table == definition check")
    parser.add_argument(
        "--check",
        choices=("exact", "fingerprint"),
        default="exact",
        help="exact: EXCEPT ALL both ways (default); fingerprint: row counts and sums of 64-bit "
        "row hashes, one scan per side, for SF 1 and above",
    )
    parser.add_argument(
        "--spark-conf",
        type=_conf,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting",
    )
    parser.add_argument(
        "--package-dir",
        type=Path,
        default=None,
        help="the dbt_ivm package to benchmark (default: this checkout), e.g. a `git archive` of a commit",
    )
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    if args.format == "delta" and args.capture == "diff":
        parser.error("--capture diff is for upstreams without a change feed; Delta upstreams have one")
    return BenchConfig(
        sf=args.sf,
        workloads=args.workloads,
        fractions=args.sizes,
        kinds=args.kinds,
        localities=args.localities,
        reps=args.reps,
        out=args.out or Path(f"benchmark_results/sf{args.sf:g}{'-delta' if args.format == 'delta' else ''}"),
        work_dir=args.work_dir,
        schema=args.schema,
        seed=args.seed,
        check=not args.no_check,
        check_method=args.check,
        spark_conf={
            **BENCH_SPARK_CONF,
            **(DELTA_BENCH_CONF if args.format == "delta" else {}),
            **dict(args.spark_conf),
        },
        command=" ".join([prog, *(argv if argv is not None else [])]),
        package_dir=args.package_dir,
        capture=args.capture,
        file_format=args.format,
        package_defaults=args.package_defaults,
        insert_workloads=args.insert_workloads,
    )
