"""Results files: results.json (everything measured), results.md (tables of medians) and
plot.png (refresh and rebuild time against change size, log scales)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dbt_ivm.benchmark.results import PHASES, BenchResult, Point, Sample, median, percent, points
from dbt_ivm.benchmark.workloads import SMALL_MODEL, SMALL_ROWS, WORKLOADS

JSON_FILE, MARKDOWN_FILE, PLOT_FILE = "results.json", "results.md", "plot.png"


def write_all(result: BenchResult, out: Path, plot: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / JSON_FILE).write_text(json.dumps(asdict(result), indent=1, default=str) + "\n")
    (out / MARKDOWN_FILE).write_text(markdown(result))
    if plot and result.samples:
        write_plot(result, out / PLOT_FILE)


def _s(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _rows(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def markdown(result: BenchResult) -> str:
    config, env = result.config, result.environment
    spark = env.get("spark", {})
    packages = ", ".join(f"{k} {v}" for k, v in env.get("packages", {}).items() if v)
    lines = [
        "# dbt_ivm benchmark: ivm refresh vs rebuild",
        "",
        f"Command: `{config.get('command') or 'run_benchmark(...)'}`"
        + ("" if result.finished else " — **incomplete run** (interrupted or still running)"),
        "",
        f"* Data: TPC-H SF {config['sf']:g}, {_storage(config)}: "
        + ", ".join(f"{n} {c:,}" for n, c in result.base_rows.items())
        + " rows; change batches seeded with "
        + str(config["seed"]),
        f"* Machine: {env.get('cpu')}, {env.get('cores')} cores, {env.get('memory_gib')} GiB; "
        f"{env.get('platform')}; load average at start {env.get('load_average_start')}, "
        f"end {env.get('load_average_end')}",
        f"* Spark: master {spark.get('spark.master')}, driver memory {spark.get('spark.driver.memory')}, "
        f"shuffle partitions {spark.get('spark.sql.shuffle.partitions')}",
        f"* Python {env.get('python')}; {packages}",
        f"* dbt_ivm package: {config.get('package_dir')}"
        + (f" at {env['git']}" if env.get("git") else " (not a git checkout)")
        + f"; run took {_s((result.duration_s or 0) / 60, 1)} min",
        "",
        "Times are wall-clock seconds of `dbt run --select <model>` in the warm process (dbt's own",
        f"start-up included), median of {config['reps']} repetition(s), each on a fresh batch; the",
        "refresh runs first after odd repetitions' batches, the rebuild after even ones'.",
        "*refresh* runs the `ivm` model, *rebuild* the same SQL as `materialized='table'`;",
        "*speed-up* = rebuild / refresh. *in model* is the refresh's own duration from the refresh",
        "log, split into change read / delta / apply / bookkeeping when the log records it.",
        "*changed rows* are the change-log rows a batch wrote (lineitem / orders / customer;",
        "an update writes two), *-/+ rows* what the refresh deleted and inserted in the table.",
        "*check*: after every refresh the table equals its definition view as multisets"
        + (
            " (row counts and sums of 64-bit row hashes are equal: `--check fingerprint`)."
            if config.get("check_method") == "fingerprint"
            else " (the row counts of EXCEPT ALL both ways are 0)."
        ),
        "",
    ]
    lines += _builds(result) + _fixed(result)
    all_points = points(result.samples)
    for name, workload in WORKLOADS.items():
        chosen = [p for p in all_points if p.workload == name]
        if chosen:
            lines += [f"## {workload.title}", "", *_point_table(chosen), ""]
    lines += _profiles(all_points)
    lines += _statements(all_points)
    lines += _hand(all_points)
    lines += _crossovers(all_points)
    if result.catch_up:
        lines += [
            "## Catch-up refreshes",
            "",
            "| workload | batches | refresh s | path | check |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {c.workload} | {c.batches} | {_s(c.refresh_s)} | {c.path} | {c.check} |"
            for c in result.catch_up
        ]
        lines.append("")
    errors = result.errors()
    failed = [c for c in result.checks() if c == "fail"]
    lines += ["## Failures", ""]
    if not errors and not failed:
        lines.append("None: every step succeeded and every correctness check passed.")
    lines += [f"* {e}" for e in errors]
    if failed:
        lines.append(f"* {len(failed)} correctness checks failed (see the check column).")
    return "\n".join(lines) + "\n"


def _storage(config: dict[str, object]) -> str:
    if config.get("file_format") == "delta":
        return "Delta tables (upstreams with change data feed, deletion vectors on)"
    if config.get("capture") == "diff":
        return "parquet (upstreams with change_feed: diff)"
    return "parquet (upstreams with change logs)"


def _usage(p: Point, attribute: str) -> str:
    """Median SQL executions / jobs / thousand rows read / MB shuffled of a point's runs."""
    runs = [getattr(s, attribute) for s in p.samples if getattr(s, attribute)]
    if not runs:
        return ""
    values = [median(r[k] for r in runs) for k in ("executions", "jobs", "read_k_rows", "shuffled_mb")]
    return " / ".join(f"{v:g}" for v in values if v is not None)


def _profiles(all_points: list[Point]) -> list[str]:
    """What Spark did in each refresh and rebuild, where the UI recorded it."""
    chosen = [p for p in all_points if any(s.refresh_profile for s in p.samples)]
    if not chosen:
        return []
    lines = [
        "## Where the time goes",
        "",
        "What Spark recorded during each `dbt run` (its UI's REST API, medians): SQL executions",
        "(one per statement that runs a query or a command, more for a MERGE or a cached view),",
        "jobs, thousands of rows read from storage (all scans, caches excluded) and MB shuffled.",
        "The refresh's split by phase is in the tables above.",
        "",
        "| workload | locality | kind | size | refresh: executions / jobs / k rows read / MB shuffled "
        "| rebuild: executions / jobs / k rows read / MB shuffled |",
        "|---|---|---|---|---|---|",
    ]
    for p in sorted(chosen, key=lambda p: (p.workload, p.locality, p.kind, p.fraction)):
        lines.append(
            f"| {p.workload} | {p.locality} | {p.kind} | {percent(p.fraction)} "
            f"| {_usage(p, 'refresh_profile')} | {_usage(p, 'rebuild_profile')} |"
        )
    return [*lines, ""]


def _statements(all_points: list[Point]) -> list[str]:
    """Each workload's refresh at its first point whose refreshes the UI recorded, statement
    by statement: the repetition whose refresh took the median time among them."""
    lines: list[str] = []
    for name in WORKLOADS:
        ours = [p for p in all_points if p.workload == name]
        for p in sorted(ours, key=lambda p: (p.fraction, p.locality, p.kind)):
            runs = sorted((s for s in p.samples if _sent(s)), key=lambda s: s.refresh_s or 0.0)
            if runs:
                lines += _statement_table(p, runs[(len(runs) - 1) // 2])
                break
    if not lines:
        return []
    return [
        "## Statements of a refresh",
        "",
        "Every statement dbt sent during one `dbt run` of the ivm model, in order (its hooks",
        "included): the seconds until the next statement was sent, and the SQL executions Spark",
        "submitted meanwhile, their jobs and the thousands of rows their stages read.",
        "",
        *lines,
    ]


def _sent(sample: Sample) -> list[dict[str, Any]]:
    return list((sample.refresh_profile or {}).get("statements") or [])


def _statement_table(p: Point, sample: Sample) -> list[str]:
    lines = [
        f"### {p.workload}, {p.locality} {p.kind} {percent(p.fraction)}, repetition {sample.rep}: "
        f"refresh {_s(sample.refresh_s)} s ({sample.path or 'failed'})",
        "",
        "| # | statement | s | executions | jobs | k rows read |",
        "|---|---|---|---|---|---|",
    ]
    for i, row in enumerate(_sent(sample), start=1):
        sql = str(row["sql"]).replace("`", "").replace("|", "\\|")
        cost = f"{row['s']:.2f} | {row['executions']} | {row['jobs']} | {row['read_k_rows']:g}"
        lines.append(f"| {i} | {sql} | {cost} |")
    return [*lines, ""]


def _hand(all_points: list[Point]) -> list[str]:
    """The ivm refresh against the hand-written incremental model, where one ran."""
    chosen = [p for p in all_points if p.med("hand_s") is not None]
    if not chosen:
        return []
    lines = [
        "## Against the hand-written incremental model",
        "",
        "The same SQL as a dbt `incremental` model with `incremental_strategy='merge'`, `unique_key`",
        "and an `is_incremental()` filter on `updated_at`: what a dbt user writes today. It runs",
        "after the ivm refresh on the same batch. *wrong rows* count its differences from the",
        "definition after the batch (extra / missing / stale values), accumulated over the batches",
        "so far: it never sees a delete.",
        "",
        "| workload | kind | size | ivm refresh s | hand-written s | ivm / hand-written "
        "| hand-written wrong rows | ivm check |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in sorted(chosen, key=lambda p: (p.workload, p.kind, p.fraction)):
        refresh, hand = p.med("refresh_s"), p.med("hand_s")
        ratio = f"{refresh / hand:.2f}" if refresh and hand else ""
        last = max(p.samples, key=lambda s: s.rep).hand_wrong or {}
        wrong = " / ".join(f"{last.get(k, 0):,}" for k in ("extra", "missing", "stale")) if last else ""
        lines.append(
            f"| {p.workload} | {p.kind} | {percent(p.fraction)} | {_s(refresh)} | {_s(hand)} | {ratio} "
            f"| {wrong} | {p.check} |"
        )
    return [*lines, ""]


def crossover(chosen: list[Point]) -> str:
    """Where rebuilding starts to win, over the measured sizes of one workload, locality and
    kind: the first size whose median refresh is not faster than the rebuild."""
    ordered = sorted((p for p in chosen if p.ratio is not None), key=lambda p: p.fraction)
    if not ordered:
        return "not measured"
    sizes = ", ".join(f"{percent(p.fraction)} {p.ratio:.1f}x" for p in ordered)
    losing = [p for p in ordered if p.ratio <= 1]
    if not losing:
        return f"refresh faster at every measured size ({sizes})"
    first = losing[0]
    if first is ordered[0]:
        return f"rebuild at least as fast from the smallest size on ({sizes})"
    previous = ordered[ordered.index(first) - 1]
    return f"between {percent(previous.fraction)} and {percent(first.fraction)} ({sizes})"


def _crossovers(all_points: list[Point]) -> list[str]:
    groups: dict[tuple[str, str, str], list[Point]] = {}
    for p in all_points:
        groups.setdefault((p.workload, p.locality, p.kind), []).append(p)
    measured = {k: v for k, v in groups.items() if len({p.fraction for p in v}) > 1}
    if not measured:
        return []
    lines = [
        "## Crossover",
        "",
        "Where a rebuild becomes at least as fast as the refresh (speed-up <= 1x), by change size.",
        "",
        "| workload | locality | kind | crossover (size speed-up, ...) |",
        "|---|---|---|---|",
    ]
    for (workload, locality, kind), chosen in sorted(measured.items()):
        lines.append(f"| {workload} | {locality} | {kind} | {crossover(chosen)} |")
    return [*lines, ""]


def _builds(result: BenchResult) -> list[str]:
    lines = [
        "## First builds",
        "",
        "| workload | ivm build s | table build s | rows | check |",
        "|---|---|---|---|---|",
    ]
    for name, b in result.builds.items():
        check = b["check"] if not b.get("error") else f"FAILED: {b['error']}"
        lines.append(f"| {name} | {_s(b['ivm_s'])} | {_s(b['table_s'])} | {_rows(b.get('rows'))} | {check} |")
    return [*lines, ""]


def _fixed(result: BenchResult) -> list[str]:
    fixed = result.fixed_cost
    if not fixed.view_s:
        return []
    view = median(fixed.view_s)
    lines = [
        "## Fixed cost",
        "",
        "`dbt run --select <model>` when nothing changed upstream (an ivm no-op refresh) against",
        "`dbt run` of a plain view model, median seconds.",
        "",
        "| model | no-op refresh s | view s | no-op / view | paths |",
        "|---|---|---|---|---|",
    ]
    for name, values in fixed.noop_s.items():
        noop = median(values)
        ratio = f"{noop / view:.1f}" if noop and view else ""
        paths = ",".join(sorted(set(fixed.noop_paths.get(name, []))))
        lines.append(f"| {name}_ivm | {_s(noop)} | {_s(view)} | {ratio} | {paths} |")
    if fixed.small_s:
        small = median(fixed.small_s)
        paths = ",".join(sorted(set(fixed.small_paths)))
        lines += [
            "",
            f"`dbt run` of `{SMALL_MODEL}` ({SMALL_ROWS} rows of customer) after one customer row",
            f"was updated: {_s(small)} s, {small / view:.1f}x the view model's run (paths: {paths}).",
        ]
    return [*lines, ""]


def _point_table(chosen: list[Point]) -> list[str]:
    lines = [
        "| locality | kind | size | changed rows | rebuild s | refresh s | speed-up | in model s "
        "| changes / delta / apply / bookkeeping s | -/+ rows | path | check |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in sorted(chosen, key=lambda p: (p.locality, p.kind, p.fraction)):
        changed = " / ".join(_rows(p.batch_rows(t)) or "0" for t in ("lineitem", "orders", "customer"))
        phases = " / ".join(_s(p.phase(k)) for k in PHASES) if any(p.phase(k) for k in PHASES) else ""
        ratio = f"{p.ratio:.1f}x" if p.ratio else ""
        moved = (
            f"-{_rows(p.med('rows_deleted'))} +{_rows(p.med('rows_inserted'))}"
            if p.med("rows_inserted") is not None
            else ""
        )
        check = p.check + (" (errors)" if any(s.errors for s in p.samples) else "")
        lines.append(
            f"| {p.locality} | {p.kind} | {percent(p.fraction)} | {changed} | {_s(p.med('rebuild_s'))} "
            f"| {_s(p.med('refresh_s'))} | {ratio} | {_s(p.med('refresh_log_s'))} | {phases} | {moved} "
            f"| {p.paths} | {check} |"
        )
    return lines


def write_plot(result: BenchResult, path: Path) -> None:
    """One panel per workload and change locality: refresh (solid) and rebuild (dashed)
    seconds per change kind against the change size."""
    # the bench extra; imported here so that the rest of the report works without it
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    series: dict[tuple[str, str], list[Point]] = {}
    for p in points(result.samples):
        series.setdefault((p.workload, p.locality), []).append(p)
    panels = sorted(series, key=lambda k: (k[0], k[1] != "uniform", k[1]))
    columns = min(2, len(panels))
    rows = (len(panels) + columns - 1) // columns
    figure = Figure(figsize=(6.5 * columns, 4.5 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    colors = {"insert": "tab:green", "delete": "tab:red", "update": "tab:blue", "mixed": "tab:purple"}
    for ax, key in zip(axes[: len(panels)], panels, strict=True):
        for kind in sorted({p.kind for p in series[key]}):
            line = sorted((p for p in series[key] if p.kind == kind), key=lambda p: p.fraction)
            x = [p.fraction * 100 for p in line]
            color = colors.get(kind, "tab:gray")
            ax.plot(x, [p.med("refresh_s") for p in line], "o-", color=color, label=f"refresh, {kind}")
            ax.plot(
                x, [p.med("rebuild_s") for p in line], "s--", color=color, alpha=0.5, label=f"rebuild, {kind}"
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("change size, % of lineitem / orders rows")
        ax.set_ylabel("dbt run wall time, s")
        ax.set_title(f"{key[0]} ({key[1]} changes)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    figure.suptitle(f"dbt_ivm refresh vs rebuild, TPC-H SF {result.config['sf']:g}")
    figure.savefig(path, dpi=110)
