"""Function names the analyzer looks for, the same lists as macros/analysis/sql_parser.sql
(ivm_nondeterministic_functions, ivm_generator_functions, ivm_aggregate_functions); a test
compares them. Names are matched as written in the SQL, lower-cased."""

from __future__ import annotations

from typing import Final

NONDETERMINISTIC: Final = frozenset(
    {
        "rand", "random", "randn", "uuid", "shuffle", "now", "current_timestamp", "current_date",
        "localtimestamp", "current_timezone", "unix_timestamp", "monotonically_increasing_id",
        "spark_partition_id", "input_file_name", "input_file_block_start", "input_file_block_length",
        "randstr", "uniform", "try_reflect", "reflect", "java_method",
    }
)  # fmt: skip

# Spark accepts these without parentheses; the Jinja side flags the bare word too.
BARE_NONDETERMINISTIC: Final = frozenset({"current_timestamp", "current_date", "localtimestamp"})

GENERATORS: Final = frozenset(
    {
        "explode", "explode_outer", "posexplode", "posexplode_outer", "inline", "inline_outer",
        "stack", "json_tuple", "range",
    }
)  # fmt: skip

AGGREGATES: Final = frozenset(
    {
        "count", "sum", "avg", "mean", "min", "max", "count_if", "collect_list", "collect_set",
        "array_agg", "first", "first_value", "last", "last_value", "any_value", "any", "some",
        "every", "bool_and", "bool_or", "stddev", "stddev_pop", "stddev_samp", "std", "variance",
        "var_pop", "var_samp", "approx_count_distinct", "approx_percentile", "percentile",
        "percentile_approx", "percentile_cont", "percentile_disc", "median", "mode", "max_by",
        "min_by", "corr", "covar_pop", "covar_samp", "kurtosis", "skewness", "bit_and", "bit_or",
        "bit_xor", "regr_count", "regr_avgx", "regr_avgy", "regr_slope", "regr_intercept",
        "regr_r2", "regr_sxx", "regr_sxy", "regr_syy", "histogram_numeric", "string_agg",
        "listagg", "count_min_sketch", "hll_sketch_agg", "hll_union_agg", "try_sum", "try_avg",
        "product",
    }
)  # fmt: skip

# Words that are never a column reference (ivm_non_column_words).
NON_COLUMN_WORDS: Final = frozenset(
    {
        "null", "true", "false", "and", "or", "not", "is", "as", "in", "like", "between", "case",
        "when", "then", "else", "end", "cast", "interval", "int", "integer", "bigint", "smallint",
        "tinyint", "string", "varchar", "char", "double", "float", "real", "decimal", "numeric",
        "date", "timestamp", "timestamp_ntz", "boolean", "binary", "long", "short", "byte",
    }
)  # fmt: skip

# How a refresh maintains an aggregate: from signed per-group deltas, by least/greatest
# after inserts, or by recomputing the affected groups.
ADDITIVE_AGGREGATES: Final = frozenset({"count", "count_if", "sum", "avg", "mean"})
EXTREMUM_AGGREGATES: Final = frozenset({"min", "max"})

# Words that start a clause of a query block (ivm_clause_keywords).
CLAUSE_KEYWORDS: Final = frozenset(
    {
        "from", "where", "group", "having", "order", "limit", "window", "qualify", "sort", "cluster",
        "distribute", "union", "intersect", "except", "minus", "lateral", "offset",
    }
)  # fmt: skip
