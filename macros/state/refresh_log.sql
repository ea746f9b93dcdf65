{#- The refresh log: one append-only table per state schema. Each refresh writes a
    'started' row before it changes the table and a 'success' row after; the stored
    upstream versions of a model are the versions_to of its latest 'success' row (a run
    that finds nothing changed writes nothing; rows of event 'noop:<refresh id>', written by
    earlier versions of the package, are not state). A
    'started' row with nothing after it marks an interrupted refresh, and a 'success' row
    with logs_advanced marks a refresh during which an upstream change log advanced: in
    both cases the next run re-applies by key (idempotent) instead of appending.
    Each row is its own partition (model, event), written by a dynamic partition overwrite
    that adds that one partition: no row is ever rewritten (a reader never sees a file
    vanish, a kill loses no history), and concurrent appends are staged apart. -#}

{% macro ivm_refresh_log_relation() %}
  {%- set state_schema = var('dbt_ivm_state_schema', none) or target.schema -%}
  {{ return(api.Relation.create(schema=state_schema, identifier='__ivm_refresh_log', type='table')) }}
{% endmacro %}

{% macro ivm_ensure_refresh_log() %}
  {{ return(adapter.dispatch('ivm_ensure_refresh_log', 'dbt_ivm')()) }}
{% endmacro %}

{% macro default__ivm_ensure_refresh_log() %}
  {%- set log = dbt_ivm.ivm_refresh_log_relation() -%}
  {#- asked of dbt's relation cache first: describing a missing table makes Spark log an error -#}
  {%- set found = adapter.get_relation(database=log.database, schema=log.schema, identifier=log.identifier) -%}
  {#- its columns from dbt's listing of the schema when that shows every one (the usual case:
      no statement), else described -#}
  {%- set listed = dbt_ivm._ivm_listing_columns(found.information, nested=true) if found is not none else none -%}
  {%- set have = (listed or []) | map(attribute='name') | map('lower') | list -%}
  {%- if 'event' not in have or dbt_ivm._ivm_refresh_log_missing(have) -%}
    {%- set have = (adapter.get_columns_in_relation(log) if found else []) | map(attribute='name') | map('lower') | list -%}
  {%- endif -%}
  {%- if have and 'event' not in have -%}
    {#- a log of an older version of the package (one partition per model, rewritten on
        every append): moved into the append-only layout, one partition per row -#}
    {%- set old = log.incorporate(path={'identifier': '__ivm_refresh_log_before_events'}) -%}
    {%- do run_query('alter table ' ~ log ~ ' rename to ' ~ old) -%}
    {%- do dbt_ivm._ivm_create_refresh_log(log) -%}
    {%- set columns = [] -%}
    {%- for c in dbt_ivm._ivm_refresh_log_columns() -%}
      {%- do columns.append(c.split(' ')[0] if c.split(' ')[0] in have else 'cast(null as ' ~ c.split(' ', 1)[1] ~ ')') -%}
    {%- endfor -%}
    {%- do run_query('insert overwrite table ' ~ log ~ ' select ' ~ columns | join(', ') ~ ", model, concat(status, ':', refresh_id) from " ~ old) -%}
    {%- do run_query('drop table ' ~ old) -%}
  {%- elif not have -%}
    {%- do run_query('create schema if not exists ' ~ log.without_identifier()) -%}
    {%- do dbt_ivm._ivm_create_refresh_log(log) -%}
    {#- a log dropped outside dbt_ivm took with it the 'success' rows that free the leases
        their refreshes took: free those (not this invocation's own) -#}
    {%- do dbt_ivm._ivm_free_taken_leases(dbt_ivm.ivm_lease_generations('__ivm_lease__*'), false) -%}
  {%- else -%}
    {#- a log created by an older version of the package gains the columns added since -#}
    {%- set missing = dbt_ivm._ivm_refresh_log_missing(have) -%}
    {%- if missing -%}
      {%- do run_query('alter table ' ~ log ~ ' add columns (' ~ missing | join(', ') ~ ')') -%}
    {%- endif -%}
  {%- endif -%}
  {{ return(log) }}
{% endmacro %}

{% macro _ivm_create_refresh_log(log) %}
  {%- do run_query('create table if not exists ' ~ log ~ ' (' ~ dbt_ivm._ivm_refresh_log_columns() | join(', ') ~ ', model string, event string)
      using parquet partitioned by (model, event) options (partitionOverwriteMode \'dynamic\')') -%}
{% endmacro %}

{#- The refresh log's columns (name and type) that `have` (lower-case names) lacks. -#}
{% macro _ivm_refresh_log_missing(have) %}
  {%- set missing = [] -%}
  {%- for c in dbt_ivm._ivm_refresh_log_columns() if c.split(' ')[0] not in have -%}{%- do missing.append(c) -%}{%- endfor -%}
  {{ return(missing) }}
{% endmacro %}

{#- Columns of the refresh log before its partition columns `model` and `event`. -#}
{% macro _ivm_refresh_log_columns() %}
  {{ return(['refresh_id string', 'relation string', 'status string', 'path string', 'reason string',
             'started_at timestamp', 'logged_at timestamp', 'duration_s double',
             'versions_from map<string, string>', 'versions_to map<string, string>', 'change_rows map<string, bigint>',
             'rows_deleted bigint', 'rows_inserted bigint', 'logs_advanced boolean', 'definition_hash string', 'message string',
             'phase_s map<string, double>', 'table_version bigint', 'changes_logged boolean', 'columns map<string, string>',
             'lease_generation bigint', 'sizes map<string, bigint>']) }}
{% endmacro %}

{#- Create the refresh log once per invocation (on-run-start), before models run in parallel. -#}
{% macro ivm_on_run_start() %}
  {%- if execute and graph.nodes.values() | selectattr('config.materialized', 'equalto', 'ivm') | list -%}
    {%- do dbt_ivm.ivm_ensure_refresh_log() -%}
  {%- endif -%}
{% endmacro %}

{#- {'last_success': row dict or none, 'repair': why the next run must re-apply by key, or none,
    'table_version': the highest table_version logged since (and including) the last success,
    'interrupted' (only after an interrupted refresh): its refresh_id, versions, definition_hash,
    table_version, logged_at and path, 'resume_full': the refresh_id of the latest interrupted
    full build (a kill does not turn a rebuild that was asked for into an incremental
    re-apply), 'interrupted_all': every refresh interrupted since the last
    success, oldest first; 'history': the model's partitions older than its last success
    (_ivm_compact_history folds them); last_success: versions, definition_hash, logs_advanced, table_version,
    logged_at (Spark's time of the log row), columns and lease_generation (see ivm_log_refresh)}. table_version is, for a parquet table, the
    stamp of the refresh's change-log rows (_ivm_table_stamp); for a Delta table, in 'started'
    rows, the table's Delta version before the refresh's write. -#}
{% macro ivm_read_state(model_id) %}
  {{ return(adapter.dispatch('ivm_read_state', 'dbt_ivm')(model_id)) }}
{% endmacro %}

{% macro default__ivm_read_state(model_id) %}
  {{ return(dbt_ivm._ivm_state_from_rows(dbt_ivm._ivm_main_rows(dbt_ivm._ivm_state_sql(model_id)))) }}
{% endmacro %}

{#- The rows of a query run as dbt's 'main' statement. The state read is every refresh's
    first: a run that finds nothing changed sends no other statement to report on. -#}
{% macro _ivm_main_rows(sql) %}
  {%- call statement('main', fetch_result=true) -%}{{ sql }}{%- endcall -%}
  {{ return(load_result('main').table.rows) }}
{% endmacro %}

{#- ivm_read_state and ivm_current_versions(upstreams) in one query, for upstreams whose
    versions are read without the stored ones (not ivm or diff upstreams, see
    _ivm_read_position): {'state', 'versions'}. -#}
{% macro ivm_read_state_and_versions(model_id, upstreams) %}
  {{ return(adapter.dispatch('ivm_read_state_and_versions', 'dbt_ivm')(model_id, upstreams)) }}
{% endmacro %}

{% macro default__ivm_read_state_and_versions(model_id, upstreams) %}
  {%- set read = dbt_ivm._ivm_versions_read(upstreams) -%}
  {%- if not read.columns -%}
    {#- Delta upstreams only: their versions came from their histories -#}
    {{ return({'state': dbt_ivm.ivm_read_state(model_id), 'versions': read.versions}) }}
  {%- endif -%}
  {#- the version columns (uncorrelated scalar subqueries, evaluated once) on every state
      row; without state rows, on one row whose state columns are NULL -#}
  {%- set rows = dbt_ivm._ivm_main_rows('select ' ~ (read.columns + ['__ivm_s.*']) | join(', ') ~ ' from (select 1) __ivm_one left join ('
      ~ dbt_ivm._ivm_state_sql(model_id) ~ ') __ivm_s on true') -%}
  {%- do dbt_ivm._ivm_versions_from_row(read, rows[0]) -%}
  {%- set n = read.columns | length -%}
  {%- set state_rows = [] -%}
  {%- for r in rows if r[n] is not none -%}{%- do state_rows.append(r[n:]) -%}{%- endfor -%}
  {{ return({'state': dbt_ivm._ivm_state_from_rows(state_rows), 'versions': read.versions}) }}
{% endmacro %}

{#- The refresh log rows of a model that make its state, unordered: its latest 'success'
    row and every row logged after it (rows of event 'noop:...' are not state). The
    latest success is found by a window over the same read: one scan of the model's
    partitions, not two (each of its refreshes adds two, so this read grows with them, until
    a refresh compacts them: the last column lists the partitions that hold only history). -#}
{% macro _ivm_state_sql(model_id) %}
  {%- set log = dbt_ivm.ivm_refresh_log_relation() -%}
  {%- set m = dbt_ivm._ivm_string_literal(model_id) -%}
  {{ return('select status, to_json(versions_to) as versions_to, definition_hash, logs_advanced, refresh_id, table_version, logged_at, '
      ~ 'path, to_json(columns) as columns, lease_generation, to_json(sizes) as sizes, to_json(__ivm_history) as history '
      ~ 'from (select *, collect_set(case when logged_at < __ivm_last then event end) over () as __ivm_history '
      ~ 'from (select *, ' ~ dbt_ivm._ivm_last_success('()') ~ ' as __ivm_last '
      ~ 'from ' ~ log ~ ' where model = ' ~ m ~ " and event not like 'noop:%')) where logged_at >= coalesce(__ivm_last, timestamp'1970-01-01')") }}
{% endmacro %}

{#- When a model's latest 'success' row was logged, as a window over its log rows (`over`:
    the window, '()' for the rows of one model): the line between its state and its history. -#}
{% macro _ivm_last_success(over) %}
  {{ return("max(case when status = 'success' and event not like 'noop:%' then logged_at end) over " ~ over) }}
{% endmacro %}

{#- The state (see ivm_read_state) from the rows of _ivm_state_sql, in any order: they are
    taken oldest first (sorted here, which spares the query a sort of its own). -#}
{% macro _ivm_state_from_rows(rows) %}
  {%- set state = {'last_success': none, 'repair': none, 'table_version': none,
                   'history': fromjson(rows[0][11]) if rows and rows[0][11] else []} -%}
  {%- for r in rows | sort(attribute='6') -%}
    {%- if r[5] is not none and (state.table_version is none or r[5] > state.table_version) -%}
      {%- do state.update({'table_version': r[5]}) -%}
    {%- endif -%}
    {%- if r[0] == 'success' -%}
      {%- do state.update({'last_success': {'versions': fromjson(r[1]) if r[1] else {}, 'definition_hash': r[2], 'logs_advanced': r[3],
                                            'table_version': r[5], 'logged_at': r[6], 'columns': fromjson(r[8]) if r[8] else {},
                                            'lease_generation': r[9], 'sizes': fromjson(r[10]) if r[10] else {}},
                           'repair': 'an upstream change log advanced during the last refresh' if r[3] else none}) -%}
    {%- elif r[0] == 'started' -%}
      {#- several refreshes may have been interrupted since the last success -#}
      {%- set interrupted = {'refresh_id': r[4], 'versions': fromjson(r[1]) if r[1] else {}, 'definition_hash': r[2],
                             'table_version': r[5], 'logged_at': r[6], 'path': r[7]} -%}
      {%- do state.update({'repair': 'the last refresh was interrupted', 'interrupted': interrupted,
                           'interrupted_all': state.get('interrupted_all', []) + [interrupted]}) -%}
      {%- if r[7] == 'full' -%}{%- do state.update({'resume_full': r[4]}) -%}{%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(state) }}
{% endmacro %}

{#- Append one row (as dbt's 'main' statement when main). entry: refresh_id, status, event
    (the event's kind, default the status; 'noop' rows are not state, see ivm_read_state), path, reason, started_at, duration_s,
    versions_from, versions_to, change_rows, rows_deleted, rows_inserted, logs_advanced, definition_hash, message,
    table_version (the refresh's stamp, see _ivm_table_stamp), changes_logged (it wrote its own change log),
    columns (_ivm_columns_signature of every upstream by name and of the table as '.'), lease_generation (the
    refresh lease generation a 'success' row frees, see macros/state/lease.sql), sizes (the row counts of the
    upstreams by name and of the table as '.' that a parquet refresh's cost estimate used, or that a full build
    counted for the next one), sql (column name ->
    a SQL expression that replaces the entry's value: counts only Spark knows when the row is written). -#}
{% macro ivm_log_refresh(model, relation, entry, main=false) %}
  {{ return(adapter.dispatch('ivm_log_refresh', 'dbt_ivm')(model, relation, entry, main)) }}
{% endmacro %}

{% macro default__ivm_log_refresh(model, relation, entry, main=false) %}
  {%- set log = dbt_ivm.ivm_refresh_log_relation() -%}
  {%- set model_id = dbt_ivm._ivm_string_literal(model.unique_id) -%}
  {%- set values = [
      dbt_ivm._ivm_string_literal(entry.refresh_id), dbt_ivm._ivm_string_literal(relation | string),
      dbt_ivm._ivm_string_literal(entry.status), dbt_ivm._ivm_string_literal(entry.path), dbt_ivm._ivm_string_literal(entry.get('reason')),
      "timestamp'" ~ entry.started_at ~ "'", 'current_timestamp()', entry.get('duration_s', 'null') | string,
      dbt_ivm._ivm_map_literal(entry.get('versions_from', {}), 'string'), dbt_ivm._ivm_map_literal(entry.get('versions_to', {}), 'string'),
      dbt_ivm._ivm_map_literal(entry.get('change_rows', {}), 'bigint'),
      entry.get('rows_deleted', 'null') | string, entry.get('rows_inserted', 'null') | string,
      'true' if entry.get('logs_advanced') else 'false',
      dbt_ivm._ivm_string_literal(entry.get('definition_hash')), dbt_ivm._ivm_string_literal(entry.get('message')),
      dbt_ivm._ivm_map_literal(entry.get('phase_s', {}), 'double'),
      'cast(' ~ (entry.get('table_version') if entry.get('table_version') is not none else 'null') ~ ' as bigint)',
      'true' if entry.get('changes_logged') else 'false', dbt_ivm._ivm_map_literal(entry.get('columns', {}), 'string'),
      'cast(' ~ (entry.get('lease_generation') if entry.get('lease_generation') is not none else 'null') ~ ' as bigint)',
      dbt_ivm._ivm_map_literal(entry.get('sizes', {}), 'bigint'), model_id,
      dbt_ivm._ivm_string_literal(entry.get('event', entry.status) ~ ':' ~ entry.refresh_id)] -%}
  {#- values only Spark knows (counts of a parquet write): SQL expressions, evaluated as the row is written -#}
  {%- set computed = entry.get('sql', {}) -%}
  {%- set row = [] -%}
  {%- for c in dbt_ivm._ivm_refresh_log_columns() + ['model', 'event'] -%}
    {%- set name = c.split(' ')[0] -%}
    {%- do row.append('(' ~ computed[name] ~ ')' if name in computed else values[loop.index0]) -%}
  {%- endfor -%}
  {%- set values = row -%}
  {#- a dynamic partition overwrite that adds this row's own partition: an append, staged
      in a directory of its own (a plain INSERT INTO stages in the table's shared
      _temporary directory, which concurrent appends delete under each other) -#}
  {%- if main -%}
    {%- call statement('main') -%}insert overwrite table {{ log }} select {{ values | join(', ') }}{%- endcall -%}
  {%- else -%}
    {%- do run_query('insert overwrite table ' ~ log ~ ' select ' ~ values | join(', ')) -%}
  {%- endif -%}
{% endmacro %}

{#- Merge the log rows older than each model's latest 'success' row into one partition per
    model (the history is kept, in fewer files). A refresh does this for its own model when
    the model's history exceeds ivm_compact_log_above partitions (_ivm_compact_history); the
    operation does it for every model at once. Run it when no refresh is running:
    dbt run-operation dbt_ivm.ivm_compact_refresh_log -#}
{% macro ivm_compact_refresh_log() %}
  {{ return(adapter.dispatch('ivm_compact_refresh_log', 'dbt_ivm')()) }}
{% endmacro %}

{% macro default__ivm_compact_refresh_log() %}
  {%- set log_table = dbt_ivm.ivm_ensure_refresh_log() -%}
  {%- set old = run_query('select model, event, count(*) from (select model, event, logged_at, '
      ~ dbt_ivm._ivm_last_success('(partition by model)') ~ ' as last_success from ' ~ log_table
      ~ ') group by model, event having max(logged_at) < max(last_success) order by model, event').rows -%}
  {#- no-op rows logged without the lease are not state (see ivm_read_state): compacted apart, still marked 'noop:' -#}
  {%- for model, events in old | groupby(0) -%}
    {%- for noop in (true, false) -%}
      {%- set group = [] -%}
      {%- for e in events if e[1].startswith('noop:') == noop -%}{%- do group.append(e) -%}{%- endfor -%}
      {%- if group | length > 1 -%}
        {%- do dbt_ivm._ivm_compact_partitions(model, group | map(attribute=1) | list, ('noop:' if noop else '') ~ 'compacted:' ~ invocation_id) -%}
        {{ log('dbt_ivm: compacted ' ~ group | map(attribute=2) | sum ~ ' refresh log rows of ' ~ model ~ ' (' ~ group | length ~
            ' partitions) into one', info=true) }}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
{% endmacro %}

{#- A refresh holding its model's lease folds the model's history (state.history: the
    partitions older than its last success) into one partition when there are more than
    `above` of them, so that every later state read opens a few files, not two per refresh. -#}
{% macro _ivm_compact_history(model, state, above, entry) %}
  {%- set history = state.get('history') or [] -%}
  {%- if above and history | length > above -%}
    {%- set started = modules.datetime.datetime.utcnow() -%}
    {%- do dbt_ivm._ivm_compact_partitions(model.unique_id, history, 'compacted:' ~ entry.refresh_id) -%}
    {{ log('dbt_ivm: ' ~ model.name ~ ': compacted ' ~ history | length ~ ' refresh log partitions of its history into one in '
        ~ dbt_ivm._ivm_seconds_since(started) ~ ' s', info=true) }}
  {%- endif -%}
{% endmacro %}

{#- Rewrite the log partitions (model, event) of `events` as one partition (model, into), then
    drop them. A copy of a row that an interrupted compaction left in two partitions is
    written once: a row is its refresh, status and time. -#}
{% macro _ivm_compact_partitions(model, events, into) %}
  {%- set log_table = dbt_ivm.ivm_refresh_log_relation() -%}
  {%- set columns = [] -%}
  {%- for c in dbt_ivm._ivm_refresh_log_columns() -%}{%- do columns.append(c.split(' ')[0]) -%}{%- endfor -%}
  {%- set names = [] -%}
  {%- for e in events -%}{%- do names.append(dbt_ivm._ivm_string_literal(e)) -%}{%- endfor -%}
  {%- set m = dbt_ivm._ivm_string_literal(model) -%}
  {%- do run_query('insert overwrite table ' ~ log_table ~ ' select ' ~ columns | join(', ') ~ ', model, ' ~ dbt_ivm._ivm_string_literal(into)
      ~ ' from (select *, row_number() over (partition by refresh_id, status, logged_at order by event) as __ivm_copy from ' ~ log_table
      ~ ' where model = ' ~ m ~ ' and event in (' ~ names | join(', ') ~ ')) where __ivm_copy = 1') -%}
  {%- set specs = [] -%}
  {%- for n in names -%}{%- do specs.append('partition (model = ' ~ m ~ ', event = ' ~ n ~ ')') -%}{%- endfor -%}
  {%- do run_query('alter table ' ~ log_table ~ ' drop if exists ' ~ specs | join(', ')) -%}
{% endmacro %}

{#- A SQL string literal of value. `${` is written `$\{`: Spark substitutes variables such as
    ${env:HOME} even inside string literals, and reads `\{` back as `{`. -#}
{% macro _ivm_string_literal(value) %}
  {%- if value is none -%}{{ return('cast(null as string)') }}{%- endif -%}
  {{ return("'" ~ (value | string).replace('\\', '\\\\').replace("'", "\\'").replace('${', '$\\{') ~ "'") }}
{% endmacro %}

{% macro _ivm_map_literal(values, value_type) %}
  {%- set args = [] -%}
  {%- for k, v in values.items() -%}
    {%- do args.append(dbt_ivm._ivm_string_literal(k)) -%}
    {%- do args.append('cast(' ~ (dbt_ivm._ivm_string_literal(v) if value_type == 'string' or v is none else v) ~ ' as ' ~ value_type ~ ')') -%}
  {%- endfor -%}
  {{ return('cast(map(' ~ args | join(', ') ~ ') as map<string, ' ~ value_type ~ '>)') }}
{% endmacro %}
