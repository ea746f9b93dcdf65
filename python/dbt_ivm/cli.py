"""The `dbt-ivm` command: `explain` the ivm models of a compiled dbt project, or `check`
changed model files (the pre-commit hook). Reads target/manifest.json only: it runs the package's
own macros from it (dbt_ivm.macro_runtime) and needs neither dbt nor Spark.

Exit codes: 0 every model checked builds and refreshes (or is rebuilt in full because it
asks for it), 1 some model would fail at `dbt run`, 2 the command could not run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from dbt_ivm.explain.checkpoint import check_files
from dbt_ivm.explain.manifest import ManifestError, load_manifest
from dbt_ivm.explain.render import render_json, render_text
from dbt_ivm.explain.report import explain_model

OK, FAILING, ERROR = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "explain":
            return _explain(args)
        return _check(args)
    except ManifestError as error:
        print(f"dbt-ivm {args.command}: {error}", file=sys.stderr)
        return ERROR


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dbt-ivm", description="Explain which ivm models dbt_ivm can refresh incrementally, and why not."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    explain = commands.add_parser(
        "explain", help="report, for every ivm model (or the ones named), what a refresh can do"
    )
    explain.add_argument("models", nargs="*", metavar="MODEL", help="model names (default: every ivm model)")
    explain.add_argument("--project-dir", default=".", type=Path, help="the dbt project (default: .)")
    explain.add_argument(
        "--manifest",
        default=Path("target/manifest.json"),
        type=Path,
        help="manifest written by `dbt compile`, relative to --project-dir (default: target/manifest.json)",
    )
    explain.add_argument("--format", choices=("text", "json"), default="text")
    check = commands.add_parser("check", help="pre-commit hook: check the changed model files")
    check.add_argument("filenames", nargs="*", metavar="FILES", help="changed files (pre-commit passes them)")
    check.add_argument(
        "--manifest",
        default=Path("target/manifest.json"),
        type=Path,
        help="manifest, relative to the config's dbt-project-dir (default: target/manifest.json)",
    )
    check.add_argument(
        "--config", default=Path(".dbt-checkpoint.yaml"), type=Path, help="dbt-checkpoint's config file"
    )
    check.add_argument(
        "--exclude", default=None, help="skip files whose path matches this regular expression"
    )
    return parser


def _explain(args: argparse.Namespace) -> int:
    path = args.manifest if args.manifest.is_absolute() else args.project_dir / args.manifest
    manifest = load_manifest(path)
    models = manifest.models
    if args.models:
        known = {m.name for m in models}
        unknown = [name for name in args.models if name not in known]
        if unknown:
            raise ManifestError(
                f"no ivm model named {', '.join(unknown)} in {path} "
                f"(ivm models: {', '.join(sorted(known)) or 'none'}); run dbt compile if it is new"
            )
        models = tuple(m for m in models if m.name in args.models)
    reports = [explain_model(model, manifest.runtime) for model in models]
    if args.format == "json":
        sys.stdout.write(render_json(reports, str(path)))
    else:
        sys.stdout.write(render_text(reports))
    return FAILING if any(r.fails for r in reports) else OK


def _check(args: argparse.Namespace) -> int:
    result = check_files(args.filenames, args.manifest, args.config, args.exclude)
    for line in result.lines:
        print(line)
    return FAILING if result.failed else OK


if __name__ == "__main__":
    sys.exit(main())
