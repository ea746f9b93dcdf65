{#- Apply (Patch) for parquet and other file tables without row-level DML.
    * insert-only change: append the new rows.
    * unpartitioned table: it lives in one of two generation directories
      (<name>__ivm_g1 / <name>__ivm_g2, an external table). A rewrite writes the new
      content to the other directory while readers keep using the current one, then
      switches the table to it with one metastore update (ALTER TABLE ... SET LOCATION).
      A path being read is never overwritten; the previous generation stays on disk
      until the next rewrite replaces it.
    * partitioned table: dynamic partition overwrite of the affected partitions only,
      then the partitions left empty are dropped. -#}

{% macro ivm_apply_append(target, columns, insert_view) %}
  {{ return(adapter.dispatch('ivm_apply_append', 'dbt_ivm')(target, columns, insert_view)) }}
{% endmacro %}

{% macro default__ivm_apply_append(target, columns, insert_view) %}
  {%- set cols = dbt_ivm._ivm_quote_all(columns) | join(', ') -%}
  {%- call statement('main') -%}
    insert into {{ target }} select {{ cols }} from {{ insert_view }}
  {%- endcall -%}
{% endmacro %}

{#- Rows of the table outside the changed slices, plus the inserted rows. -#}
{% macro _ivm_patched_rows_sql(target, columns, insert_view, predicates, extra_filter) %}
  {%- set cols = dbt_ivm._ivm_quote_all(columns) | list -%}
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

{#- described: the rows of the table's DESCRIBE TABLE EXTENDED when the caller read them (else
    read here). Returns the location the table left (the previous generation, kept on disk
    until the next rewrite). -#}
{% macro ivm_apply_rewrite(target, columns, insert_view, predicates, described=none) %}
  {{ return(adapter.dispatch('ivm_apply_rewrite', 'dbt_ivm')(target, columns, insert_view, predicates, described)) }}
{% endmacro %}

{% macro default__ivm_apply_rewrite(target, columns, insert_view, predicates, described=none) %}
  {%- set previous = dbt_ivm._ivm_table_location(target, described) -%}
  {%- set next_location = dbt_ivm._ivm_next_generation(target, target, described=described) -%}
  {%- call statement('main') -%}
    insert overwrite directory '{{ next_location }}' using parquet
    {{ dbt_ivm._ivm_patched_rows_sql(target, columns, insert_view, predicates, none) }}
  {%- endcall -%}
  {#- Spark's SET LOCATION refreshes the table's cached metadata and data itself -#}
  {%- do run_query('alter table ' ~ target ~ " set location '" ~ next_location ~ "'") -%}
  {{ return(previous) }}
{% endmacro %}

{#- Build an unpartitioned table into its next generation directory, then (re)create the
    table there: the old table serves reads until the moment it is replaced. The
    directories are <location>__ivm_g1 and __ivm_g2 (location: <location_root>/<table> when
    the model sets location_root), else beside the schema's tables. -#}
{% macro ivm_build_generation(target, existing, build_sql, properties={}, location=none) %}
  {{ return(adapter.dispatch('ivm_build_generation', 'dbt_ivm')(target, existing, build_sql, properties, location)) }}
{% endmacro %}

{% macro default__ivm_build_generation(target, existing, build_sql, properties={}, location=none) %}
  {%- set next_location = dbt_ivm._ivm_next_generation(target, existing, location) -%}
  {%- call statement('main') -%}
    insert overwrite directory '{{ next_location }}' using parquet
    {{ build_sql }}
  {%- endcall -%}
  {%- if existing is not none -%}{%- do adapter.drop_relation(existing) -%}{%- endif -%}
  {%- do run_query('create table ' ~ target ~ " using parquet location '" ~ next_location ~ "' " ~ dbt_ivm._ivm_tblproperties(properties)) -%}
{% endmacro %}

{#- The generation directory a table is not using now (beside location when given: a
    changed location_root moves the table there, never onto the directory it reads).
    described: the DESCRIBE TABLE EXTENDED rows of existing, when already read. -#}
{% macro _ivm_next_generation(target, existing, location=none, described=none) %}
  {%- set current = dbt_ivm._ivm_table_location(existing, described) if existing is not none and existing.type == 'table' else '' -%}
  {%- set m = modules.re.match('^(.*)__ivm_g([12])$', current) -%}
  {%- set generation = '__ivm_g' ~ ('2' if m and m.group(2) == '1' else '1') -%}
  {%- if location -%}
    {{ return(location ~ generation) }}
  {%- elif m -%}
    {{ return(m.group(1) ~ generation) }}
  {%- endif -%}
  {%- set schema_location = dbt_ivm._ivm_describe_value('describe schema extended ' ~ target.schema, 'Location') -%}
  {{ return(schema_location.rstrip('/') ~ '/' ~ target.identifier ~ generation) }}
{% endmacro %}

{#- in_affected: condition on __ivm_v selecting the affected partitions; emptied: partition
    specs to drop after the overwrite. -#}
{% macro ivm_apply_partition_rewrite(target, columns, insert_view, predicates, in_affected, emptied) %}
  {{ return(adapter.dispatch('ivm_apply_partition_rewrite', 'dbt_ivm')(target, columns, insert_view, predicates, in_affected, emptied)) }}
{% endmacro %}

{% macro default__ivm_apply_partition_rewrite(target, columns, insert_view, predicates, in_affected, emptied) %}
  {#- the table is created with the option partitionOverwriteMode=dynamic, which wins over
      the session setting: only the partitions written to are replaced -#}
  {%- call statement('main') -%}
    insert overwrite table {{ target }}
    {{ dbt_ivm._ivm_patched_rows_sql(target, columns, insert_view, predicates, in_affected) }}
  {%- endcall -%}
  {%- for spec in emptied -%}
    {%- do run_query('alter table ' ~ target ~ ' drop if exists partition (' ~ spec ~ ')') -%}
  {%- endfor -%}
{% endmacro %}

{% macro _ivm_table_location(relation, described=none) %}
  {{ return(dbt_ivm._ivm_describe_value('describe table extended ' ~ relation, 'Location', described)) }}
{% endmacro %}

{#- The value of one row of a DESCRIBE ... EXTENDED result (rows: that result, when already read). -#}
{% macro _ivm_describe_value(statement, name, rows=none) %}
  {%- for row in (rows if rows is not none else run_query(statement).rows) -%}
    {%- if row[0] | lower == name | lower -%}{{ return(row[1]) }}{%- endif -%}
  {%- endfor -%}
  {{ exceptions.raise_compiler_error('dbt_ivm: `' ~ statement ~ '` returned no ' ~ name ~ ' row') }}
{% endmacro %}

{#- Partitioned table: overwrite only the partitions that lose or gain rows, then drop the
    ones left empty (dynamic overwrite never empties a partition). The rows to insert are
    cached first (read twice: their partitions, then the overwrite). Returns {'deleted',
    'inserted'}: the rows the affected partitions lose, and the rows written into them. -#}
{% macro _ivm_rewrite_partitions(target, target_columns, insert_view, predicates, partition_by) %}
  {%- set cached = '__ivm_' ~ modules.re.sub('[^A-Za-z0-9_]', '_', target.identifier) ~ '_ins' -%}
  {#- a temporary view cached on first read: the change it holds is evaluated once -#}
  {%- do run_query('cache lazy table ' ~ cached ~ ' as select * from ' ~ insert_view ~ ' __ivm_i') -%}
  {%- set insert_view = cached -%}
  {%- set pcols = dbt_ivm._ivm_quote_all(partition_by) -%}
  {%- set columns = target_columns | map(attribute='name') | list -%}
  {%- set types = {} -%}
  {%- for c in target_columns -%}{%- do types.update({c.name | lower: c.data_type}) -%}{%- endfor -%}
  {%- set as_text = [] -%}
  {%- for c in pcols -%}{%- do as_text.append('cast(__ivm_v.' ~ c ~ ' as string)') -%}{%- endfor -%}
  {#- one statement: the partitions that lose rows (their rows, and those they lose), then those that gain (the rows they gain) -#}
  {%- set parts = as_text | join(', ') -%}
  {%- set found = run_query('select ' ~ parts ~ ', count(*), count_if(' ~ predicates.flag ~ '), false from ' ~ target ~ ' __ivm_v '
      ~ predicates.joins | join(' ') ~ ' group by ' ~ parts ~ ' having count_if(' ~ predicates.flag ~ ') > 0'
      ~ ' union all select ' ~ parts ~ ', count(*), cast(null as bigint), true from ' ~ insert_view ~ ' __ivm_v group by ' ~ parts).rows -%}
  {%- set n = pcols | length -%}
  {%- set losing = found | rejectattr(n + 2) | list -%}
  {%- set gaining = found | selectattr(n + 2) | list -%}
  {%- set gained = [] -%}
  {%- set ns = namespace(deleted=0, inserted=0) -%}
  {%- for r in gaining -%}
    {%- do gained.append(tojson(r[:n] | list)) -%}
    {%- set ns.inserted = ns.inserted + r[n] -%}
  {%- endfor -%}
  {%- set affected = {} -%}
  {%- set emptied = [] -%}
  {%- for r in (losing | list) + (gaining | list) -%}
    {%- set values = r[:n] | list -%}
    {%- do affected.update({tojson(values): values}) -%}
  {%- endfor -%}
  {%- for r in losing -%}
    {%- set ns.deleted = ns.deleted + r[n + 1] -%}
    {%- if r[n] == r[n + 1] and tojson(r[:n] | list) not in gained -%}
      {%- set spec = [] -%}
      {%- for c in pcols -%}{%- do spec.append(c ~ ' = ' ~
          (dbt_ivm._ivm_string_literal(r[loop.index0]) if r[loop.index0] is not none else 'null')) -%}{%- endfor -%}
      {%- do emptied.append(spec | join(', ')) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if not affected -%}
    {#- the changed keys have no rows in the table and nothing is inserted -#}
    {%- call statement('main') -%}select 'no rows affected' as dbt_ivm_refresh{%- endcall -%}
    {%- do run_query('drop view ' ~ cached) -%}
    {{ return({'deleted': 0, 'inserted': 0}) }}
  {%- endif -%}
  {%- set in_affected = [] -%}
  {%- for values in affected.values() -%}
    {%- set match = [] -%}
    {%- for c in partition_by -%}
      {%- do match.append('__ivm_v.' ~ dbt_ivm._ivm_quote(c) ~ ' <=> ' ~ dbt_ivm._ivm_typed_literals([values[loop.index0]], types[c])[0]) -%}
    {%- endfor -%}
    {%- do in_affected.append('(' ~ match | join(' and ') ~ ')') -%}
  {%- endfor -%}
  {%- do dbt_ivm.ivm_apply_partition_rewrite(target, columns, insert_view, predicates, '(' ~ in_affected | join(' or ') ~ ')', emptied) -%}
  {%- do run_query('drop view ' ~ cached) -%}
  {{ return({'deleted': ns.deleted, 'inserted': ns.inserted}) }}
{% endmacro %}
