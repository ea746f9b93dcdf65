"""The quick-start demo runs end to end on a copy of integration_tests/ (CI guards it):
on Delta Lake, as `make demo` runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbt_ivm import demo
from tests.support import copy_integration_project

MODELS = ("order_facts", "line_facts", "customer_page_views", "revenue_by_region", "sku_sales")


def test_demo_on_delta_builds_refreshes_and_tests(
    spark, delta, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = copy_integration_project(tmp_path)
    assert demo.main(["--project-dir", str(project)]) == 0
    out = capsys.readouterr().out
    # the upstreams are Delta tables with change data feed, changed with Delta DML
    assert "USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')" in out
    assert "MERGE INTO analytics_raw.order_lines" in out
    for model in MODELS:
        assert spark.sql(f"describe detail analytics.{model}").first().format == "delta", model
    # every refresh that changed an ivm table is one commit: the aggregate's a MERGE, the
    # join's (its changed keys listed) a REPLACE WHERE; orders 100 and 101 go, 101, 105 and 107 come
    history = out[out.index("==> Delta commits") : out.index("==> Refresh log")]
    assert history.count(": MERGE") == 1, history
    assert history.count(": WRITE (replaced: deleted 2, inserted 3)") == 1, history
    log = out[out.index("==> Refresh log") :]
    for model in MODELS:
        lines = [line.split() for line in log.splitlines() if line.startswith(model)]
        # the run in between found nothing changed: a no-op writes no row
        assert [line[1] for line in lines] == ["full", "incremental"], lines
    # the Delta upstreams were read through their change feeds
    assert "shop.orders" in log
