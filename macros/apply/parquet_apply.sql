{#- Apply (Patch) for parquet and other file tables without row-level DML.
    * insert-only change: append the new rows.
    * otherwise, unpartitioned: write the new content to the table's other generation
      directory and switch the table to it with one metastore update
      (ALTER TABLE ... SET LOCATION); a path being read is never overwritten.
    * otherwise, partitioned: dynamic partition overwrite of the affected partitions
      only, then drop the partitions left empty. -#}

{% macro ivm_apply_append(target, columns, insert_view) %}
  {{ return(adapter.dispatch('ivm_apply_append', 'dbt_ivm')(target, columns, insert_view)) }}
{% endmacro %}

{% macro default__ivm_apply_append(target, columns, insert_view) %}
  {%- set cols = dbt_ivm.ivm_quote_all(columns) | join(', ') -%}
  {%- call statement('main') -%}
    insert into {{ target }} select {{ cols }} from {{ insert_view }}
  {%- endcall -%}
{% endmacro %}

{#- Rows of the table outside the changed slices, plus the inserted rows. -#}
{% macro ivm_patched_rows_sql(target, columns, insert_view, predicates, extra_filter) %}
  {%- set cols = dbt_ivm.ivm_quote_all(columns) | list -%}
  {%- set kept = [] -%}
  {%- for c in cols -%}{%- do kept.append('__ivm_v.' ~ c) -%}{%- endfor -%}
  {%- set sql -%}
select {{ kept | join(', ') }} from {{ target }} __ivm_v
  {{ predicates.joins | join('\n  ') }}
where not {{ predicates.flag }}{% if extra_filter %} and {{ extra_filter }}{% endif %}
union all
select {{ cols | join(', ') }} from {{ insert_view }}
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}

{% macro ivm_apply_rewrite(target, columns, insert_view, predicates) %}
  {{ return(adapter.dispatch('ivm_apply_rewrite', 'dbt_ivm')(target, columns, insert_view, predicates)) }}
{% endmacro %}

{% macro default__ivm_apply_rewrite(target, columns, insert_view, predicates) %}
  {%- set location = dbt_ivm.ivm_table_location(target) -%}
  {%- set m = modules.re.match('^(.*)__ivm_g([12])$', location) -%}
  {%- set base = m.group(1) if m else location -%}
  {%- set next_location = base ~ '__ivm_g' ~ ('2' if m and m.group(2) == '1' else '1') -%}
  {%- call statement('main') -%}
    insert overwrite directory '{{ next_location }}' using parquet
    {{ dbt_ivm.ivm_patched_rows_sql(target, columns, insert_view, predicates, none) }}
  {%- endcall -%}
  {%- do run_query('alter table ' ~ target ~ " set location '" ~ next_location ~ "'") -%}
  {%- do run_query('refresh table ' ~ target) -%}
  {%- if not m -%}
    {#- first switch: the original directory is no longer read; free its space -#}
    {%- do run_query("insert overwrite directory '" ~ location ~ "' using parquet select * from " ~ target ~ ' where false') -%}
  {%- endif -%}
{% endmacro %}

{#- partition_by: list of partition columns; affected: list of partition value rows. -#}
{% macro ivm_apply_partition_rewrite(target, columns, insert_view, predicates, partition_by, affected_view, emptied) %}
  {{ return(adapter.dispatch('ivm_apply_partition_rewrite', 'dbt_ivm')(target, columns, insert_view, predicates, partition_by, affected_view, emptied)) }}
{% endmacro %}

{% macro default__ivm_apply_partition_rewrite(target, columns, insert_view, predicates, partition_by, affected_view, emptied) %}
  {%- set match = [] -%}
  {%- for c in partition_by -%}{%- do match.append('__ivm_a.' ~ dbt_ivm.ivm_quote(c) ~ ' <=> __ivm_v.' ~ dbt_ivm.ivm_quote(c)) -%}{%- endfor -%}
  {%- set in_affected = 'exists (select 1 from ' ~ affected_view ~ ' __ivm_a where ' ~ match | join(' and ') ~ ')' -%}
  {%- set previous = run_query('set spark.sql.sources.partitionOverwriteMode').rows[0][1] -%}
  {%- do run_query('set spark.sql.sources.partitionOverwriteMode=dynamic') -%}
  {%- call statement('main') -%}
    insert overwrite table {{ target }}
    {{ dbt_ivm.ivm_patched_rows_sql(target, columns, insert_view, predicates, in_affected) }}
  {%- endcall -%}
  {%- do run_query('set spark.sql.sources.partitionOverwriteMode=' ~ previous) -%}
  {%- for spec in emptied -%}
    {%- do run_query('alter table ' ~ target ~ ' drop if exists partition (' ~ spec ~ ')') -%}
  {%- endfor -%}
{% endmacro %}

{% macro ivm_table_location(relation) %}
  {%- for row in run_query('describe table extended ' ~ relation).rows -%}
    {%- if row[0] == 'Location' -%}{{ return(row[1]) }}{%- endif -%}
  {%- endfor -%}
  {{ exceptions.raise_compiler_error('dbt_ivm: cannot find the location of ' ~ relation ~ ' in DESCRIBE TABLE EXTENDED') }}
{% endmacro %}
