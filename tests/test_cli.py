"""`dbt-ivm explain` and `dbt-ivm check` on small hand-made manifests (tests/manifests.py).
No dbt, no Spark: the command reads target/manifest.json only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dbt_ivm.cli import main
from dbt_ivm.explain.manifest import parse_manifest
from tests.manifests import ManifestBuilder, restriction, shop_manifest

LEGACY_FIX = (
    "declare how changes of shop.legacy are read, e.g. sources: [{name: shop, tables: [{name: legacy, "
    "config: {meta: {ivm: {unique_key: [id], change_log: legacy_changes}}}}]}]  or, for a Delta table with "
    "change data feed, only its key {ivm: {unique_key: [id]}}, or, for an append-only table, "
    "{ivm: {watermark: loaded_at}}, or, for any other table (a seed, a table model, a full reload), "
    "{ivm: {unique_key: [id], change_feed: diff}}"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shop_manifest().write(tmp_path / "target/manifest.json")
    return tmp_path


def explain(project: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["explain", "--project-dir", str(project), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def section(out: str, model: str) -> str:
    """The part of the text report about one model."""
    return next(block for block in out.split("\n\n") if block.startswith(f"{model}  ("))


def row(text: str, label: str) -> list[str]:
    """The cells of the capability table row with this label."""
    line = next(line for line in text.splitlines() if line.strip().startswith(label))
    return [cell.strip() for cell in line.split("  ") if cell.strip()]


# -- explain ----------------------------------------------------------------------------------


def test_explain_classifies_every_ivm_model_and_fails_for_the_broken_ones(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = explain(project, capsys)
    assert code == 1
    assert "plain_view" not in out
    good = section(out, "order_facts")
    assert "class: join-only" in good
    assert row(good, "incremental after inserts") == [
        "incremental after inserts",
        "yes",
        "insert the rows the new upstream rows produce",
    ]
    assert row(good, "incremental after any DML on shop.customers")[1] == "yes"
    bad = section(out, "bad_facts")
    assert "class: not maintainable" in bad
    assert "dbt run: dbt run fails" in bad
    assert "IVM020 outer join: LEFT OUTER JOIN at line 3, column 1 of the compiled SQL" in bad
    assert f"fix: {restriction('IVM020').fix}" in bad
    assert "IVM031 upstream without a change feed: upstream shop.legacy at line 3, column 11" in bad
    assert f"fix: {LEGACY_FIX}" in bad
    assert "no change feed declared" in bad
    assert out.endswith("6 ivm models: 3 incremental, 1 rebuilt in full on every run, 2 failing. "
                        "Change logs themselves (IVM032) are checked at run time.\n")  # fmt: skip


def test_explain_names_the_refresh_of_aggregates(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = explain(project, capsys)
    revenue = section(out, "revenue")
    assert "class: aggregate over joins" in revenue
    assert "merge the new rows into their groups" in revenue
    assert "recompute the groups that changed shop.orders rows leave or enter" in revenue
    visits = section(out, "visit_counts")
    assert "class: recompute-affected-keys" in visits
    assert row(visits, "incremental after any DML on shop.visits")[1:] == [
        "no",
        "append-only upstream (watermark loaded_at): updates and deletes are never read; "
        "declare a change_log and unique_key to absorb them",
    ]


def test_explain_full_rebuild_fallback_and_uncompiled_model(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = explain(project, capsys)
    fallback = section(out, "fallback")
    assert "dbt run: rebuilt in full on every run (ivm_on_unsupported: full_rebuild)" in fallback
    assert "IVM010 non-deterministic function: rand() at line 1, column 20" in fallback
    assert row(fallback, "full rebuild") == [
        "full rebuild",
        "yes",
        "on every run (ivm_on_unsupported: full_rebuild)",
    ]
    assert row(fallback, "incremental after inserts")[1:] == [
        "no",
        "cannot be maintained incrementally: IVM010",
    ]
    fresh = section(out, "fresh")
    assert "class: not compiled" in fresh
    assert "error: no compiled SQL in the manifest: run dbt compile first" in fresh


def test_explain_named_models_only(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = explain(project, capsys, "order_facts", "fallback")
    assert code == 0
    assert [b.split()[0] for b in out.split("\n\n")[:-1]] == ["fallback", "order_facts"]


def test_explain_unknown_model_says_which_exist(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = explain(project, capsys, "orders_fact")
    assert (code, out) == (2, "")
    assert "no ivm model named orders_fact" in err
    assert "order_facts" in err
    assert "run dbt compile if it is new" in err


def test_explain_without_manifest_says_to_compile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = explain(tmp_path, capsys)
    assert code == 2
    assert f"no dbt manifest at {tmp_path / 'target/manifest.json'}: run `dbt compile`" in err


def test_explain_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = explain(project, capsys, "--format", "json")
    document = json.loads(out)
    assert code == 1
    assert document["schema_version"] == 1
    assert document["failing"] == ["bad_facts", "fresh"]
    models = {m["name"]: m for m in document["models"]}
    # sorted by name, upstreams too: the manifest's order differs between machines
    assert list(models) == ["bad_facts", "fallback", "fresh", "order_facts", "revenue", "visit_counts"]
    assert set(models["order_facts"]) == {
        "name", "unique_id", "file", "class", "shape", "outcome", "on_unsupported", "refresh", "key",
        "notes", "upstreams", "capabilities", "restrictions", "errors",
    }  # fmt: skip
    assert models["order_facts"]["refresh"] == {"inserts": "append", "any": "rewrite"}
    assert models["revenue"]["refresh"] == {"inserts": "merge", "any": "recompute"}
    assert models["visit_counts"]["upstreams"] == [
        {
            "name": "shop.visits",
            "relation": "raw.visits",
            "kind": "append_only",
            "unique_key": [],
            "change_log": None,
            "feed": None,
            "watermark": "loaded_at",
        }
    ]
    bad = models["bad_facts"]
    assert (bad["class"], bad["outcome"], bad["refresh"]) == ("not maintainable", "fails", None)
    assert [(r["code"], r["line"], r["column"]) for r in bad["restrictions"]] == [
        ("IVM020", 3, 1),
        ("IVM031", 3, 11),
    ]
    assert bad["restrictions"][1]["fix"] == LEGACY_FIX
    assert [(c["tier"], c["upstream"], c["possible"], c["codes"]) for c in bad["capabilities"]] == [
        ("inserts", None, False, ["IVM020", "IVM031"]),
        ("any_dml", "shop.legacy", False, ["IVM020", "IVM031"]),
        ("any_dml", "shop.orders", False, ["IVM020", "IVM031"]),
        ("full_rebuild", None, True, []),
    ]
    assert models["fallback"]["outcome"] == "full_rebuild_every_run"
    assert models["fresh"]["errors"] == ["no compiled SQL in the manifest: run dbt compile first"]


def test_upstream_declaration_problems_carry_the_yaml_to_add() -> None:
    m = ManifestBuilder()
    keyless = m.source("events", {"change_log": "raw.events_log"})
    m.model("events_facts", "select e.id from raw.events e", [keyless])
    (model,) = parse_manifest(m.manifest()).models
    (upstream,) = model.upstreams
    assert upstream.problems == (
        (
            "IVM030",
            "a change log is netted per row key: add `unique_key: [<key column>, ...]` next to change_log in "
            "sources: [{name: shop, tables: [{name: events, config: {meta: {ivm: {change_log: "
            "raw.events_log, unique_key: [id]}}}}]}]",
        ),
    )


def test_a_key_alone_declares_a_delta_change_feed_checked_at_run_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = ManifestBuilder()
    events = m.source("events", {"unique_key": ["id"]})
    m.model("event_facts", "select e.id from raw.events e", [events])
    m.write(tmp_path / "target/manifest.json")
    (model,) = parse_manifest(json.loads((tmp_path / "target/manifest.json").read_text())).models
    (upstream,) = model.upstreams
    assert (upstream.kind, upstream.feed, upstream.change_log, upstream.problems) == (
        "change_log", "detect", "table_changes(raw.events)", ()
    )  # fmt: skip
    code, out, _ = explain(tmp_path, capsys)
    assert code == 0
    assert (
        "Delta change data feed table_changes(raw.events), row key id (checked at run time: "
        "a Delta table with delta.enableChangeDataFeed=true, else IVM031)"
    ) in out


def test_diff_capture_declaration_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = ManifestBuilder()
    events = m.source("events", {"unique_key": ["id"], "change_feed": "diff"})
    m.model("event_facts", "select e.id from raw.events e", [events])
    m.write(tmp_path / "target/manifest.json")
    (model,) = parse_manifest(json.loads((tmp_path / "target/manifest.json").read_text())).models
    (upstream,) = model.upstreams
    assert (upstream.kind, upstream.feed, upstream.problems) == ("change_log", "diff", ())
    code, out, _ = explain(tmp_path, capsys)
    assert code == 0
    assert "diff capture, row key id: each run compares the table with the model's last snapshot of it" in out
    assert "__ivm_snap__event_facts__events__v<version>" in out


def test_an_unknown_change_feed_fails_naming_the_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = ManifestBuilder()
    events = m.source("events", {"unique_key": ["id"], "change_feed": "cdc"})
    m.model("event_facts", "select e.id from raw.events e", [events])
    m.write(tmp_path / "target/manifest.json")
    code, out, err = explain(tmp_path, capsys)
    assert code != 0
    assert "declares change_feed 'cdc': write change_feed: delta" in out + err


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("ivm_on_change_feed_error", "retry", "must be 'fail' or 'rebuild', got 'retry'."),
        ("ivm_rebuild_above", 0, "ivm_rebuild_above must be a positive number"),
        ("ivm_rebuild_above", True, "or false to never rebuild for size, got 'True'."),
        ("ivm_rebuild_above", "high", "got 'high'."),
        ("ivm_compact_log_above", 0, "ivm_compact_log_above must be a whole number of refresh log"),
        ("ivm_compact_log_above", 2.5, "or false to never compact the model's refresh log history"),
        ("ivm_compact_log_above", True, "got 'True'."),
    ],
)
def test_invalid_refresh_settings_fail_like_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, value: object, message: str
) -> None:
    m = ManifestBuilder()
    orders = m.source("orders", {"unique_key": ["order_id"], "change_log": "orders_changes"})
    m.model("typo", "select o.order_id from raw.orders o", [orders], **{setting: value})
    m.write(tmp_path / "target/manifest.json")
    code, out, _ = explain(tmp_path, capsys)
    assert code == 1
    (line,) = [line for line in out.splitlines() if line.strip().startswith("error: Model 'typo': ")]
    assert setting in line and message in line


def test_invalid_settings_fail_with_the_run_time_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = ManifestBuilder()
    orders = m.source("orders", {"unique_key": ["order_id"], "change_log": "orders_changes"})
    m.model("typo", "select o.order_id from raw.orders o", [orders], ivm_on_unsupported="rebuild")
    m.write(tmp_path / "target/manifest.json")
    code, out, _ = explain(tmp_path, capsys)
    assert code == 1
    assert "error: Model 'typo': ivm_on_unsupported must be 'error' or 'full_rebuild', got 'rebuild'." in out


def test_explain_reads_the_package_keys_from_config_meta(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`+meta: {ivm_...}` in dbt_project.yml, `config: {meta: {...}}` in YAML and
    `config(meta={...})` reach the manifest as config.meta: explain reads the keys there as
    the run does, before a top-level key of the same name (the form dbt >= 1.10 warns about)."""
    m = ManifestBuilder()
    orders = m.source("orders", {"unique_key": ["order_id"], "change_log": "orders_changes"})
    unmaintainable = "select o.order_id, rand() as r from raw.orders o"
    m.model("from_meta", unmaintainable, [orders], meta={"ivm_on_unsupported": "full_rebuild"})
    m.model("top_level", unmaintainable, [orders], ivm_on_unsupported="full_rebuild")
    both = {"ivm_on_unsupported": "full_rebuild", "meta": {"ivm_on_unsupported": "error"}}
    m.model("meta_wins", unmaintainable, [orders], **both)
    m.model("bad_meta", "select o.order_id from raw.orders o", [orders], meta={"ivm_lease_wait": -1})
    m.write(tmp_path / "target/manifest.json")
    code, out, _ = explain(tmp_path, capsys, "--format", "json")
    assert code == 1
    models = {m["name"]: m for m in json.loads(out)["models"]}
    outcomes = {name: (m["on_unsupported"], m["outcome"]) for name, m in models.items() if name != "bad_meta"}
    assert outcomes == {
        "from_meta": ("full_rebuild", "full_rebuild_every_run"),
        "top_level": ("full_rebuild", "full_rebuild_every_run"),
        "meta_wins": ("error", "fails"),
    }
    assert models["bad_meta"]["errors"] == [
        "Model 'bad_meta': ivm_lease_wait must be a number of seconds (0: do not wait), got '-1'."
    ]


# -- check (the pre-commit hook) ------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose dbt project lives in dbt/, named by .dbt-checkpoint.yaml."""
    manifest = shop_manifest()
    manifest.write(tmp_path / "dbt/target/manifest.json")
    manifest.write_model_files(tmp_path / "dbt")
    (tmp_path / ".dbt-checkpoint.yaml").write_text("version: 1\ndbt-project-dir: dbt\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["check", *args])
    return code, capsys.readouterr().out.splitlines()


def test_check_reports_each_restriction_of_a_changed_model(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = check(
        capsys, "dbt/models/order_facts.sql", "dbt/models/bad_facts.sql", "dbt/seeds/x.csv", "README.md"
    )
    assert code == 1
    assert lines == [
        "dbt/models/bad_facts.sql: IVM020 outer join: LEFT OUTER JOIN at line 3, column 1 of the compiled "
        f"SQL; fix: {restriction('IVM020').fix}",
        "dbt/models/bad_facts.sql: IVM031 upstream without a change feed: upstream shop.legacy at line 3, "
        f"column 11 of the compiled SQL; fix: {LEGACY_FIX}",
    ]


def test_check_passes_maintainable_models_and_full_rebuild_fallbacks(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = ["dbt/models/order_facts.sql", "dbt/models/revenue.sql", "dbt/models/fallback.sql"]
    assert check(capsys, *files) == (0, [])


def test_check_exclude(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check(capsys, "dbt/models/bad_facts.sql", "--exclude", "bad_") == (0, [])


def test_check_asks_to_compile_uncompiled_or_edited_models(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edited = repo / "dbt/models/order_facts.sql"
    edited.write_text(edited.read_text() + "left join raw.legacy l on l.order_id = o.order_id\n")
    code, lines = check(capsys, "dbt/models/fresh.sql", "dbt/models/order_facts.sql")
    assert code == 1
    assert lines == [
        "dbt/models/fresh.sql: no compiled SQL in the manifest: run dbt compile first",
        "dbt/models/order_facts.sql: changed since dbt/target/manifest.json was written: "
        "run dbt compile first",
    ]


def test_check_without_config_uses_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = shop_manifest()
    manifest.write(tmp_path / "target/manifest.json")
    manifest.write_model_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, lines = check(capsys, "models/bad_facts.sql")
    assert code == 1
    assert lines[0].startswith("models/bad_facts.sql: IVM020 outer join: LEFT OUTER JOIN at line 3, column 1")


# -- packaging --------------------------------------------------------------------------------


def test_console_script_runs_without_dbt_or_spark(project: Path) -> None:
    """The hook installs sqlglot and pyyaml only: the command must not import dbt or pyspark."""
    probe = (
        "import sys\n"
        "from dbt_ivm.cli import main\n"
        f"code = main(['explain', '--project-dir', {str(project)!r}, 'order_facts'])\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'dbt', 'pyspark', 'py4j'})\n"
        "print('LOADED', loaded, code)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines()[-1] == "LOADED [] 0"
    script = Path(sys.executable).parent / "dbt-ivm"
    installed = subprocess.run(
        [str(script), "explain", "--project-dir", str(project), "bad_facts"], capture_output=True, text=True
    )
    assert installed.returncode == 1
    assert "IVM020 outer join" in installed.stdout


def test_the_yaml_a_fix_suggests_is_valid() -> None:
    suggested = LEGACY_FIX.split("e.g. ", 1)[1].split("  or,", 1)[0]
    table = yaml.safe_load(suggested)["sources"][0]["tables"][0]
    assert table["config"]["meta"]["ivm"] == {"unique_key": ["id"], "change_log": "legacy_changes"}


def test_explain_shows_the_slice_key_and_the_dropped_order_by(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mart on the keyed path: the slice key (unique_key from the model's config), each
    upstream's refresh in slices, and the ORDER BY the analysis leaves out."""
    m = ManifestBuilder()
    orders = m.source("orders", {"unique_key": ["order_id"], "change_log": "orders_changes"})
    customers = m.source("customers", {"unique_key": ["customer_id"], "change_log": "customers_changes"})
    m.model(
        "customer_orders",
        "with totals as (select customer_id, count(*) as n from raw.orders group by customer_id)\n"
        "select c.customer_id, coalesce(t.n, 0) as n\nfrom raw.customers c\n"
        "left join totals t on c.customer_id = t.customer_id\norder by c.customer_id",
        [orders, customers],
        unique_key="customer_id",
    )
    m.write(tmp_path / "target/manifest.json")
    code, out, _ = explain(tmp_path, capsys)
    assert code == 0, out
    text = section(out, "customer_orders")
    assert "  slice key: customer_id (keyed recompute)" in text
    assert "  note: ORDER BY at line 5, column 1 dropped: a table keeps no order" in text
    slices = "recompute the slices of customer_id that changed shop.orders rows touch, from the definition"
    assert slices in text
