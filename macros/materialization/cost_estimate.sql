{#- The rebuild-or-refresh choice on parquet, from the sizes the refresh knows before it
    computes anything. Parquet has no index and no row-level DML: every delta term of a
    changed upstream reads the other upstreams in full, the keyed path's recompute reads
    every upstream once more, and a rewrite reads and writes the whole unpartitioned table.
    A rebuild reads every upstream once and writes the table. Both are counted in rows read
    plus rows written.

    Returns none (refresh), or the reason to rebuild with its numbers. change_rows maps each
    changed upstream to its netted changed rows; sizes maps each upstream's name and '.'
    (the table) to its row count. A partitioned table rewrites only the partitions the change touches,
    which is not known before the change is computed: its rewrite is not counted. -#}
{% macro _ivm_parquet_cost(plan, change_rows, sizes, spec, rewrite, partitioned) %}
  {%- set n = namespace(upstreams=0, terms=0) -%}
  {%- for p in plan -%}
    {%- set n.upstreams = n.upstreams + sizes[p.up.name] -%}
  {%- endfor -%}
  {%- for p in plan if change_rows.get(p.up.name, 0) > 0 -%}
    {%- set n.terms = n.terms + n.upstreams - sizes[p.up.name] -%}
  {%- endfor -%}
  {%- if spec is not none and spec.kind == 'keyed' -%}
    {%- set n.terms = n.terms + n.upstreams -%}
  {%- endif -%}
  {%- set table = sizes['.'] -%}
  {%- set rewritten = 2 * table if rewrite and not partitioned else 0 -%}
  {%- set refresh = n.terms + rewritten -%}
  {%- set rebuild = n.upstreams + table -%}
  {%- if refresh <= rebuild -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set parts = [n.terms ~ ' upstream rows read by the delta terms'] -%}
  {%- if rewritten -%}
    {%- do parts.append(rewritten ~ ' for rewriting the ' ~ table ~ '-row table') -%}
  {%- endif -%}
  {{ return('cost estimate on parquet: the refresh would read and write about ' ~ refresh ~ ' rows ('
      ~ parts | join(', ') ~ '), a rebuild about ' ~ rebuild ~ ' (' ~ n.upstreams ~ ' upstream rows read once, '
      ~ table ~ ' written): rebuilding is cheaper') }}
{% endmacro %}
