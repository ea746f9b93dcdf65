"""The run-time analyzer (the Jinja macros, run by dbt itself) and the Python analyzer
agree on every case of the SQL corpus: same shape, same codes, same positions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dbt_common.events.base_types import EventMsg

from dbt_ivm.analysis import analyze
from tests.support import IvmProject
from tests.test_analyzer import CASES, DEFAULT_UPSTREAMS, POSITION_OPTIONAL, upstreams

MARK = "IVM_ANALYSIS "

# Runs dbt_ivm.ivm_analyze on each case and logs the results as one JSON line.
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
    {%- do results.update({case.name: {'shape': analysis.shape, 'issues': issues}}) -%}
  {%- endfor -%}
  {{ log('"""
    + MARK
    + """' ~ tojson(results), info=true) }}
{% endmacro %}
"""
)


@pytest.fixture(scope="module")
def jinja_results(project_factory) -> dict[str, Any]:
    project: IvmProject = project_factory("agreement")
    project.write("macros/analyze_cases.sql", ANALYZE_CASES_MACRO)
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
    return json.loads(lines[0])


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
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
