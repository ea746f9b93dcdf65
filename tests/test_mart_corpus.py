"""The package's own corpus of realistic mart models (tests/corpus/mart_models.yml), run
through the analysis macros without Spark: each model's outcome is the one the corpus
states, at least 90% of the models are maintained incrementally, every refused one says why
with a restriction code, and the README's table of outcomes is the one generated here.

After the corpus or the analysis changes, rewrite the README table with

    UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_mart_corpus.py
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbt_ivm.explain.analysis import Analysis, analyze
from tests.manifests import package_runtime

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CORPUS = ROOT / "tests/corpus/mart_models.yml"
MODELS: list[dict[str, Any]] = yaml.safe_load(CORPUS.read_text())["models"]
START, END = "<!-- mart-corpus:start -->\n", "<!-- mart-corpus:end -->"
MIN_MODELS = 30
MIN_MAINTAINED = 0.9
PATHS = {
    "join_only": "join-only",
    "aggregate": "aggregate",
    "aggregate_over_joins": "aggregate over joins",
    "distinct": "distinct",
}


@functools.cache
def analysis(name: str) -> Analysis:
    """The analysis of the corpus model `name`, as `dbt run` would analyze it."""
    model = next(m for m in MODELS if m["name"] == name)
    upstreams = [{"name": n, "parts": n.split("."), "problems": []} for n in model["upstreams"]]
    return analyze(package_runtime(), model["sql"], upstreams, model.get("unique_key"))


def outcome(result: Analysis) -> str:
    """How the model is maintained (its path), or the codes it is refused with."""
    if result.refresh is None:
        codes = ", ".join(result.codes)
        first = result.issues[0].construct if result.issues else "no issue"
        return f"refused: {codes} ({first})"
    if result.shape == "keyed":
        return "keyed by " + ", ".join(result.key)
    return PATHS.get(result.shape, result.shape)


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def corpus_table() -> str:
    """The README's section: an intro sentence and one table row per model."""
    maintained = sum(analysis(m["name"]).refresh is not None for m in MODELS)
    percent = 100 * maintained // len(MODELS)
    lines = [
        f"The package's corpus of realistic mart models (`tests/corpus/mart_models.yml`): "
        f"{len(MODELS)} models, {maintained} maintained incrementally ({percent}%), "
        "the others refused with the restriction codes that say why.",
        "",
        "| model | pattern | outcome |",
        "| --- | --- | --- |",
    ]
    lines += [
        f"| {m['name']} | {cell(m['pattern'])} | {cell(outcome(analysis(m['name'])))} |" for m in MODELS
    ]
    return "\n".join(lines)


@pytest.mark.parametrize("model", MODELS, ids=[m["name"] for m in MODELS])
def test_mart_model(model: dict[str, Any]) -> None:
    result = analysis(model["name"])
    expect = model["expect"]
    if "codes" in expect:
        assert (result.refresh, list(result.codes)) == (None, expect["codes"]), result.issues
    else:
        assert (result.shape, result.codes) == (expect["shape"], ()), result.issues
        assert result.refresh is not None


def test_mart_corpus_is_well_formed() -> None:
    names = [m["name"] for m in MODELS]
    assert len(MODELS) >= MIN_MODELS
    assert len(set(names)) == len(names)
    for model in MODELS:
        assert set(model) <= {"name", "pattern", "sql", "upstreams", "unique_key", "expect"}, model["name"]
        assert model["pattern"] and model["upstreams"], model["name"]
        assert len(model["expect"]) == 1 and set(model["expect"]) <= {"shape", "codes"}, model["name"]
        codes = model["expect"].get("codes")
        assert codes is None or (codes and codes == sorted(set(codes))), model["name"]


def test_mart_corpus_is_mostly_maintained() -> None:
    refused = [m["name"] for m in MODELS if analysis(m["name"]).refresh is None]
    assert [n for n in refused if not analysis(n).codes] == [], "a refused model must say why"
    maintained = len(MODELS) - len(refused)
    assert maintained >= MIN_MAINTAINED * len(MODELS), (
        f"{maintained} of {len(MODELS)} mart models maintained; refused: {', '.join(refused)}"
    )


def test_readme_mart_corpus_table_is_generated() -> None:
    text = README.read_text()
    before, rest = text.split(START)
    table, after = rest.split(END)
    expected = corpus_table() + "\n"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        README.write_text(before + START + expected + END + after)
        table = expected
    assert table == expected, "README mart corpus table is stale: regenerate it (see this file's docstring)"
