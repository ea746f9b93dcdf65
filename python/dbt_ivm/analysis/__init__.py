"""Python side of the model analyzer: the same rules as the run-time Jinja analyzer
(macros/analysis), on sqlglot's AST."""

from dbt_ivm.analysis.analyzer import analyze
from dbt_ivm.analysis.catalog import CATALOG, Restriction
from dbt_ivm.analysis.model import Analysis, Issue, Refresh, Shape, Upstream

__all__ = ["CATALOG", "Analysis", "Issue", "Refresh", "Restriction", "Shape", "Upstream", "analyze"]
