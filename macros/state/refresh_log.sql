{#- The refresh log: one append-only table per state schema. Each refresh writes a
    'started' row before it changes the table and a 'success' row after; the stored
    upstream versions of a model are the versions_to of its latest 'success' row. A
    'started' row with nothing after it marks an interrupted refresh, and a 'success' row
    with logs_advanced marks a refresh during which an upstream change log advanced: in
    both cases the next run re-applies by key (idempotent) instead of appending. -#}

{% macro ivm_refresh_log_relation() %}
  {%- set state_schema = var('dbt_ivm_state_schema', none) or target.schema -%}
  {{ return(api.Relation.create(schema=state_schema, identifier='__ivm_refresh_log', type='table')) }}
{% endmacro %}

{% macro ivm_ensure_refresh_log() %}
  {{ return(adapter.dispatch('ivm_ensure_refresh_log', 'dbt_ivm')()) }}
{% endmacro %}

{% macro default__ivm_ensure_refresh_log() %}
  {%- set log = dbt_ivm.ivm_refresh_log_relation() -%}
  {%- do run_query('create schema if not exists ' ~ log.without_identifier()) -%}
  {%- do run_query('create table if not exists ' ~ log ~ ' (' ~ dbt_ivm.ivm_refresh_log_columns() | join(', ') ~ ', model string)
      using parquet partitioned by (model) options (partitionOverwriteMode \'dynamic\')') -%}
  {#- a log created by an older version of the package gains the columns added since -#}
  {%- set have = adapter.get_columns_in_relation(log) | map(attribute='name') | map('lower') | list -%}
  {%- set missing = [] -%}
  {%- for c in dbt_ivm.ivm_refresh_log_columns() if c.split(' ')[0] not in have -%}{%- do missing.append(c) -%}{%- endfor -%}
  {%- if missing -%}
    {%- do run_query('alter table ' ~ log ~ ' add columns (' ~ missing | join(', ') ~ ')') -%}
  {%- endif -%}
  {{ return(log) }}
{% endmacro %}

{#- Columns of the refresh log before the partition column `model`. -#}
{% macro ivm_refresh_log_columns() %}
  {{ return(['refresh_id string', 'relation string', 'status string', 'path string', 'reason string',
             'started_at timestamp', 'logged_at timestamp', 'duration_s double',
             'versions_from map<string, string>', 'versions_to map<string, string>', 'change_rows map<string, bigint>',
             'rows_deleted bigint', 'rows_inserted bigint', 'logs_advanced boolean', 'definition_hash string', 'message string',
             'phase_s map<string, double>']) }}
{% endmacro %}

{#- Create the refresh log once per invocation (on-run-start), before models run in parallel. -#}
{% macro ivm_on_run_start() %}
  {%- if execute and graph.nodes.values() | selectattr('config.materialized', 'equalto', 'ivm') | list -%}
    {%- do dbt_ivm.ivm_ensure_refresh_log() -%}
  {%- endif -%}
{% endmacro %}

{#- {'last_success': row dict or none, 'repair': why the next run must re-apply by key, or none,
    'interrupted' (only after an interrupted refresh): its refresh_id, versions and definition_hash,
    'interrupted_all': every refresh interrupted since the last success, oldest first}. -#}
{% macro ivm_read_state(model_id) %}
  {{ return(adapter.dispatch('ivm_read_state', 'dbt_ivm')(model_id)) }}
{% endmacro %}

{% macro default__ivm_read_state(model_id) %}
  {%- set log = dbt_ivm.ivm_refresh_log_relation() -%}
  {%- set m = dbt_ivm.ivm_string_literal(model_id) -%}
  {%- set rows = run_query('select status, to_json(versions_to), definition_hash, logs_advanced, refresh_id from ' ~ log ~ ' where model = ' ~ m ~ '
      and logged_at >= coalesce((select max(logged_at) from ' ~ log ~ ' where model = ' ~ m ~ " and status = 'success'), timestamp'1970-01-01')
      order by logged_at").rows -%}
  {%- set state = {'last_success': none, 'repair': none} -%}
  {%- for r in rows -%}
    {%- if r[0] == 'success' -%}
      {%- do state.update({'last_success': {'versions': fromjson(r[1]) if r[1] else {}, 'definition_hash': r[2], 'logs_advanced': r[3]},
                           'repair': 'an upstream change log advanced during the last refresh' if r[3] else none}) -%}
    {%- elif r[0] == 'started' -%}
      {#- several refreshes may have been interrupted since the last success: any of them may be the one that committed last -#}
      {%- set interrupted = {'refresh_id': r[4], 'versions': fromjson(r[1]) if r[1] else {}, 'definition_hash': r[2]} -%}
      {%- do state.update({'repair': 'the last refresh was interrupted', 'interrupted': interrupted,
                           'interrupted_all': state.get('interrupted_all', []) + [interrupted]}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(state) }}
{% endmacro %}

{#- Append one row. entry: refresh_id, status, path, reason, started_at, duration_s,
    versions_from, versions_to, change_rows, rows_deleted, rows_inserted, logs_advanced, definition_hash, message. -#}
{% macro ivm_log_refresh(model, relation, entry) %}
  {{ return(adapter.dispatch('ivm_log_refresh', 'dbt_ivm')(model, relation, entry)) }}
{% endmacro %}

{% macro default__ivm_log_refresh(model, relation, entry) %}
  {%- set log = dbt_ivm.ivm_refresh_log_relation() -%}
  {%- set model_id = dbt_ivm.ivm_string_literal(model.unique_id) -%}
  {%- set values = [
      dbt_ivm.ivm_string_literal(entry.refresh_id), dbt_ivm.ivm_string_literal(relation | string),
      dbt_ivm.ivm_string_literal(entry.status), dbt_ivm.ivm_string_literal(entry.path), dbt_ivm.ivm_string_literal(entry.get('reason')),
      "timestamp'" ~ entry.started_at ~ "'", 'current_timestamp()', entry.get('duration_s', 'null') | string,
      dbt_ivm.ivm_map_literal(entry.get('versions_from', {}), 'string'), dbt_ivm.ivm_map_literal(entry.get('versions_to', {}), 'string'),
      dbt_ivm.ivm_map_literal(entry.get('change_rows', {}), 'bigint'),
      entry.get('rows_deleted', 'null') | string, entry.get('rows_inserted', 'null') | string,
      'true' if entry.get('logs_advanced') else 'false',
      dbt_ivm.ivm_string_literal(entry.get('definition_hash')), dbt_ivm.ivm_string_literal(entry.get('message')),
      dbt_ivm.ivm_map_literal(entry.get('phase_s', {}), 'double'), model_id] -%}
  {#- rewrite this model's partition only: concurrent refreshes of other models write
      other partitions, each staged in its own directory -#}
  {%- do run_query('insert overwrite table ' ~ log ~ ' select * from ' ~ log ~ ' where model = ' ~ model_id ~ ' union all select ' ~ values | join(', ')) -%}
{% endmacro %}

{% macro ivm_string_literal(value) %}
  {%- if value is none -%}{{ return('cast(null as string)') }}{%- endif -%}
  {{ return("'" ~ (value | string).replace('\\', '\\\\').replace("'", "\\'") ~ "'") }}
{% endmacro %}

{% macro ivm_map_literal(values, value_type) %}
  {%- set args = [] -%}
  {%- for k, v in values.items() -%}
    {%- do args.append(dbt_ivm.ivm_string_literal(k)) -%}
    {%- do args.append('cast(' ~ (dbt_ivm.ivm_string_literal(v) if value_type == 'string' or v is none else v) ~ ' as ' ~ value_type ~ ')') -%}
  {%- endfor -%}
  {{ return('cast(map(' ~ args | join(', ') ~ ') as map<string, ' ~ value_type ~ '>)') }}
{% endmacro %}
