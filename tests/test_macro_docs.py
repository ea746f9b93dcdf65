"""Every macro, test and materialization of the package is documented in a .yml file of
its own macros/ folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

MACROS = Path(__file__).resolve().parents[1] / "macros"
OPENERS = {"{% macro ": "", "{% test ": "test_", "{% materialization ": "materialization_"}


def defined(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in folder.glob("*.sql"):
        for line in path.read_text().splitlines():
            for opener, prefix in OPENERS.items():
                if line.startswith(opener):
                    name = line[len(opener) :].split("(")[0].split(",")[0].strip()
                    if prefix == "materialization_":
                        name = f"{name}_spark"
                    # default__ implementations are documented through their dispatcher
                    if not name.startswith("default__"):
                        names.add(prefix + name)
    return names


def documented(folder: Path) -> dict[str, str]:
    docs: dict[str, str] = {}
    for path in folder.glob("*.yml"):
        for entry in yaml.safe_load(path.read_text()).get("macros", []):
            docs[entry["name"]] = entry.get("description", "")
    return docs


@pytest.mark.parametrize("folder", sorted(p.name for p in MACROS.iterdir() if p.is_dir()))
def test_every_macro_is_documented(folder: str) -> None:
    docs = documented(MACROS / folder)
    missing = sorted(defined(MACROS / folder) - set(docs))
    assert not missing, f"macros/{folder}: undocumented {missing}"
    assert all(text.strip() for text in docs.values()), f"macros/{folder}: empty description"


def test_no_macro_line_is_over_150_characters() -> None:
    long = [
        f"{path.relative_to(MACROS)}:{number}"
        for path in sorted(MACROS.rglob("*.sql"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if len(line) > 150
    ]
    assert not long, f"macro lines over 150 characters: {long}"
