"""The run-time analyzer (the Jinja macros, run by dbt itself) and the Python analyzer
agree on every case of the SQL corpus: same shape, same codes, same positions, same refresh.
The upstream declarations `dbt-ivm` reads from the manifest agree with those the
materialization reads (ivm_upstreams), problems and YAML fixes included."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from dbt_common.events.base_types import EventMsg

from dbt_ivm.analysis import analyze
from dbt_ivm.explain.manifest import read_models
from tests.support import IvmProject
from tests.test_analyzer import CASES, DEFAULT_UPSTREAMS, POSITION_OPTIONAL, expected_refresh, upstreams

MARK = "IVM_ANALYSIS "

# Cases where the Jinja side departs from the rules the corpus states (reported to its
# author). Strict: once the Jinja side follows the rule, the case passes and its entry must go.
JINJA_DEPARTS: dict[str, str] = {}

# Runs dbt_ivm.ivm_analyze on each case, and ivm_upstreams on each ivm model of the project,
# and logs the results as one JSON line.
ANALYZE_CASES_MACRO = (
    """\
{% macro analyze_cases(cases) %}
  {%- set results = {} -%}
  {%- for case in cases -%}
    {%- set ups = [] -%}
    {%- for name in case.upstreams -%}
      {%- set problems = [{'code': case.problems[name], 'fix': 'x'}] if name in case.problems else [] -%}
      {%- do ups.append({'name': name, 'parts': name.split('.'), 'problems': problems}) -%}
    {%- endfor -%}
    {%- set analysis = dbt_ivm.ivm_analyze(case.sql, ups) -%}
    {%- set issues = [] -%}
    {%- for i in analysis.issues -%}{%- do issues.append([i.code, i.position]) -%}{%- endfor -%}
    {%- do results.update({case.name: {'shape': analysis.shape, 'issues': issues,
                                       'refresh': analysis.get('refresh')}}) -%}
  {%- endfor -%}
  {%- set declared = {} -%}
  {%- for node in graph.nodes.values() if node.config.materialized == 'ivm' -%}
    {%- set ups = [] -%}
    {%- for u in dbt_ivm.ivm_upstreams(node) -%}
      {%- set problems = [] -%}
      {%- for p in u.problems -%}{%- do problems.append([p.code, p.fix]) -%}{%- endfor -%}
      {%- set up = {'name': u.name, 'parts': u.parts, 'kind': u.kind, 'feed': u.feed} -%}
      {%- do up.update({'problems': problems}) -%}
      {%- do ups.append(up) -%}
    {%- endfor -%}
    {%- do declared.update({node.name: ups}) -%}
  {%- endfor -%}
  {{ log('"""
    + MARK
    + """' ~ tojson({'cases': results, 'upstreams': declared}), info=true) }}
{% endmacro %}
"""
)


# Upstreams of every kind, and declaration problems, for sources and for models.
SOURCES_YML = """\
version: 2
sources:
  - name: shop
    schema: raw_shop
    tables:
      - {name: orders, meta: {ivm: {unique_key: [order_id], change_log: orders_changes}}}
      - {name: customers, config: {meta: {ivm: {unique_key: customer_id, change_log: raw_log.customers_cdc}}}}
      - {name: views, meta: {ivm: {watermark: loaded_at}}}
      - {name: no_feed}
      - {name: no_key, meta: {ivm: {change_log: no_key_changes}}}
      - {name: keyed, meta: {ivm: {unique_key: [order_id]}}}
models:
  - {name: base, config: {meta: {ivm: {unique_key: [id], change_log: base_changes}}}}
  - {name: undeclared}
"""
UPSTREAM_MODELS = {
    "base": "{{ config(materialized='view') }} select 1 as id",
    "undeclared": "{{ config(materialized='view') }} select 1 as id",
    "source_facts": (
        "{{ config(materialized='ivm') }}\n"
        "select o.order_id from {{ source('shop', 'orders') }} o\n"
        "join {{ source('shop', 'customers') }} c on o.customer_id = c.customer_id\n"
        "join {{ source('shop', 'views') }} v on v.order_id = o.order_id\n"
        "join {{ source('shop', 'no_feed') }} f on f.order_id = o.order_id\n"
        "join {{ source('shop', 'no_key') }} k on k.order_id = o.order_id\n"
        "join {{ source('shop', 'keyed') }} d on d.order_id = o.order_id"
    ),
    "model_facts": (
        "{{ config(materialized='ivm') }}\n"
        "select b.id from {{ ref('base') }} b join {{ ref('undeclared') }} u on u.id = b.id"
    ),
}


@pytest.fixture(scope="module")
def jinja_run(project_factory) -> tuple[dict[str, Any], Path]:
    """One run-operation on a project with the upstream models: what the Jinja side logged."""
    project: IvmProject = project_factory("agreement")
    project.write("macros/analyze_cases.sql", ANALYZE_CASES_MACRO)
    project.write("models/upstreams.yml", SOURCES_YML)
    for name, sql in UPSTREAM_MODELS.items():
        project.write(f"models/{name}.sql", sql)
    cases = [
        {
            "name": c["name"],
            "sql": c["sql"],
            "upstreams": c.get("upstreams", DEFAULT_UPSTREAMS),
            "problems": c.get("problems", {}),
        }
        for c in CASES
    ]
    lines: list[str] = []

    def capture(event: EventMsg) -> None:
        if event.info.name == "JinjaLogInfo" and event.data.msg.startswith(MARK):
            lines.append(event.data.msg[len(MARK) :])

    project.dbt.invoke(
        "run-operation", "analyze_cases", "--args", json.dumps({"cases": cases}), callbacks=[capture]
    )
    assert len(lines) == 1, "the macro logs its results once"
    return json.loads(lines[0]), project.root


@pytest.fixture(scope="module")
def jinja_results(jinja_run: tuple[dict[str, Any], Path]) -> dict[str, Any]:
    return jinja_run[0]["cases"]


def test_upstream_declarations_agree(jinja_run: tuple[dict[str, Any], Path]) -> None:
    logged, root = jinja_run
    # run-operation parsed the project and wrote its manifest, as dbt compile does
    manifest = json.loads((root / "target/manifest.json").read_text())
    python = {
        model.name: [
            {
                "name": u.name,
                "parts": list(u.parts),
                "kind": u.kind,
                "feed": u.feed,
                "problems": [list(p) for p in u.problems],
            }
            for u in model.upstreams
        ]
        for model in read_models(manifest)
    }
    by_name = {model: sorted(ups, key=lambda u: u["name"]) for model, ups in logged["upstreams"].items()}
    assert python == by_name
    codes = {u["name"]: [code for code, _ in u["problems"]] for ups in python.values() for u in ups}
    assert codes == {
        "shop.orders": [],
        "shop.customers": [],
        "shop.views": [],
        "shop.no_feed": ["IVM031"],
        "shop.no_key": ["IVM030"],
        "shop.keyed": [],
        "base": [],
        "undeclared": ["IVM031"],
    }


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=JINJA_DEPARTS[c["name"]]))
        if c["name"] in JINJA_DEPARTS
        else c
        for c in CASES
    ],
    ids=[c["name"] for c in CASES],
)
def test_jinja_and_python_agree(jinja_results: dict[str, Any], case: dict[str, Any]) -> None:
    jinja = jinja_results[case["name"]]
    python = analyze(case["sql"], upstreams(case.get("upstreams", DEFAULT_UPSTREAMS), case.get("problems")))
    assert jinja["shape"] == python.shape == case["shape"]
    assert sorted({code for code, _ in jinja["issues"]}) == list(python.codes) == case["codes"]
    jinja_positions = {
        (code, position) for code, position in jinja["issues"] if code not in POSITION_OPTIONAL
    }
    python_positions = {
        (i.code, f"line {i.line}, column {i.column}")
        for i in python.issues
        if i.code not in POSITION_OPTIONAL and i.line is not None
    }
    # Python leaves a position out only where sqlglot locates no token (see analyzer.py)
    assert python_positions <= jinja_positions
    expected = expected_refresh(case)
    assert jinja["refresh"] == (None if python.refresh is None else asdict(python.refresh))
    assert python.refresh == expected
