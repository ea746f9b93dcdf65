"""dbt_ivm: incremental view maintenance for dbt-spark (Python helpers and CLI)."""

__version__ = "0.1.0"
