"""`dbt-ivm explain` and `dbt-ivm check`: the analyzer applied to the ivm models of a dbt
manifest. Imports neither dbt nor Spark, so the pre-commit hook installs in seconds."""
