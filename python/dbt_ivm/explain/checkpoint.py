"""`dbt-ivm check FILES...`: the explain rules as a pre-commit hook, with dbt-checkpoint's
conventions: the changed files pre-commit passes are matched to the models of the manifest
(by their original_file_path under the dbt project directory), `--config` names
.dbt-checkpoint.yaml whose `dbt-project-dir` says where the dbt project is (the manifest
path is relative to it), and every problem is one `<file>: <reason>` line. Files that are
not ivm models in the manifest are skipped."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dbt_ivm.explain.manifest import IvmModel, ManifestError, load_manifest
from dbt_ivm.explain.report import explain_model
from dbt_ivm.macro_runtime import Runtime


@dataclass(frozen=True)
class CheckResult:
    lines: tuple[str, ...]
    checked: int  # ivm models among the files

    @property
    def failed(self) -> bool:
        return bool(self.lines)


def project_dir_from_config(config: Path) -> Path:
    """dbt-checkpoint's `dbt-project-dir` (default: the current directory)."""
    try:
        data: Any = yaml.safe_load(config.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Path(".")
    except (OSError, yaml.YAMLError) as error:
        raise ManifestError(f"cannot read {config}: {error}") from None
    if data is None:
        return Path(".")
    if not isinstance(data, Mapping):
        raise ManifestError(f"{config} must be a YAML mapping such as `version: 1` / `dbt-project-dir: .`")
    return Path(str(data.get("dbt-project-dir") or "."))


def check_files(
    files: Iterable[str], manifest: Path, config: Path, exclude: str | None = None
) -> CheckResult:
    project_dir = project_dir_from_config(config)
    manifest_path = manifest if manifest.is_absolute() else project_dir / manifest
    loaded = load_manifest(manifest_path)
    models = {(project_dir / m.file).resolve(): m for m in loaded.models}
    skip = re.compile(exclude) if exclude else None
    lines: list[str] = []
    checked = 0
    for file in files:
        if skip is not None and skip.search(file):
            continue
        model = models.get(Path(file).resolve())
        if model is None:
            continue
        checked += 1
        lines += _problems(file, model, manifest_path, loaded.runtime)
    return CheckResult(tuple(lines), checked)


def _problems(file: str, model: IvmModel, manifest: Path, runtime: Runtime) -> list[str]:
    text = _read(file)
    # dbt keeps the file stripped as raw_code; a difference means the manifest's compiled SQL is stale
    if model.raw_sql is not None and text is not None and text.strip() != model.raw_sql.strip():
        return [f"{file}: changed since {manifest} was written: run dbt compile first"]
    report = explain_model(model, runtime)
    lines = [f"{file}: {error}" for error in report.errors]
    if report.outcome == "fails":
        lines += [
            f"{file}: {r.code} {r.what}: {r.construct} at {r.where}; fix: {r.fix}"
            for r in report.restrictions
        ]
    return lines


def _read(file: str) -> str | None:
    try:
        return Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
