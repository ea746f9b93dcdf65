{#- The refresh paths of the ivm materialization: full build and incremental refresh. -#}

{#- Columns of an upstream, after checking that it and its change log exist. -#}
{% macro _ivm_checked_columns(model, up) %}
  {%- set columns = up.get('described_columns') or dbt_ivm._ivm_upstream_columns(up, up.relation) -%}
  {%- if not columns -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': upstream " ~ up.name ~ ' (' ~ up.relation ~
        ') does not exist. Build or load it first.') }}
  {%- endif -%}
  {%- if up.kind == 'change_log' and up.get('feed') not in ('delta', 'ivm', 'diff') -%}
    {%- set log_names = dbt_ivm._ivm_upstream_columns(up, up.change_log) | map(attribute='name') | map('lower') | list -%}
    {%- set missing = [] -%}
    {%- for c in (columns | map(attribute='name') | map('lower') | list) + ['_change_type', '_commit_version'] if c not in log_names -%}
      {%- do missing.append(c) -%}
    {%- endfor -%}
    {%- if missing -%}
      {%- set problem = 'does not exist' if not log_names else 'lacks the columns ' ~ missing | join(', ') -%}
      {{ exceptions.raise_compiler_error("Model '" ~ model.name ~
          "' cannot be maintained incrementally (materialized='ivm'):\n  IVM032 the change log " ~ up.change_log ~
              ' declared for upstream ' ~ up.name ~ ' ' ~ problem ~ ".\n         fix: " ~ dbt_ivm.ivm_restriction_catalog()['IVM032'].fix ~ '.') }}
    {%- endif -%}
  {%- endif -%}
  {%- if up.kind == 'append_only' and up.watermark | lower not in (columns | map(attribute='name') | map('lower') | list) -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': the watermark column '" ~ up.watermark ~
        "' declared for upstream " ~ up.name ~ ' is not a column of ' ~ up.relation ~ '.') }}
  {%- endif -%}
  {{ return(columns) }}
{% endmacro %}

{% macro _ivm_seconds_since(started_at) %}
  {{ return(((modules.datetime.datetime.utcnow() - started_at).total_seconds() * 1000) | round / 1000) }}
{% endmacro %}

{#- A map(...) pair of a row count: the name, the count of the relation (parquet and Delta answer
    count(*) from metadata). -#}
{% macro _ivm_row_count_pair(name, relation) %}
  {{ return(dbt_ivm._ivm_string_literal(name) ~ ', (select count(*) from ' ~ relation ~ ')') }}
{% endmacro %}

{#- Build (or rebuild) the table from build_sql and keep the plain definition (from
    _ivm_checked_definition) as a view. entry.row_key (column names, or 'visible' for all columns of the definition) is
    recorded as the table property dbt_ivm.row_key, for ivm models that read this one. sized: row counts
    (_ivm_row_count_pair) read with the table's and logged with it as the sizes the cost estimate uses;
    the upstreams' counts this run's change count read (entry.sizes) are kept, the table's replaced. -#}
{% macro _ivm_build_full(target, existing, build_sql, definition, settings, entry, sized=[]) %}
  {%- do entry.update({'status': 'started'}) -%}
  {%- set existing_is_delta = settings.get('file_format') == 'delta' and dbt_ivm._ivm_is_delta_table(existing) -%}
  {%- if settings.get('file_format') == 'delta' -%}
    {%- do entry.update({'table_version': dbt_ivm._ivm_delta_table_version(existing) if existing_is_delta else -1}) -%}
  {%- endif -%}
  {%- do dbt_ivm.ivm_log_refresh(model, target, entry) -%}
  {{ log('dbt_ivm: ' ~ model.name ~ ': building in full (' ~ entry.reason ~ ')', info=true) }}
  {%- set definition_view = dbt_ivm._ivm_definition_view(target) -%}
  {%- do run_query('create or replace view ' ~ definition_view ~ ' as ' ~ definition.sql) -%}
  {%- set row_key = definition.columns if entry.get('row_key') == 'visible' else entry.get('row_key') -%}
  {%- set properties = {} -%}
  {%- if settings.get('file_format') == 'delta' -%}
    {#- deletion vectors where a refresh deletes a few rows of a large table by key (joins,
        keyed slices): a MERGE then writes only which rows went. Small aggregate tables
        without them: a MERGE whose source reads the table is several times slower with
        them. The change data feed only when ivm models read the table: recording it
        makes every MERGE write the images of the rows it changes. -#}
    {%- do properties.update({'delta.enableDeletionVectors': 'true' if settings.get('row_level') else 'false',
                              'delta.enableChangeDataFeed': 'true' if dbt_ivm._ivm_has_ivm_dependents(model) else 'false'}) -%}
  {%- endif -%}
  {%- do properties.update(settings.tblproperties) -%}
  {%- if row_key -%}{%- do properties.update({'dbt_ivm.row_key': row_key | join(',')}) -%}{%- endif -%}
  {%- if settings.get('file_format') == 'delta' -%}
    {%- do dbt_ivm._ivm_delta_build(target, existing, existing_is_delta, build_sql, settings.partition_by, properties,
        settings.location) -%}
    {%- do dbt_ivm._ivm_add_contract_constraints(model, target) -%}
  {%- elif settings.partition_by -%}
    {%- if existing is not none -%}{%- do adapter.drop_relation(existing) -%}{%- endif -%}
    {%- call statement('main') -%}
      create table {{ target }} using parquet
      options (partitionOverwriteMode 'dynamic')
      partitioned by ({{ dbt_ivm._ivm_quote_all(settings.partition_by) | join(', ') }})
      {{ dbt_ivm._ivm_tblproperties(properties) }}
      as {{ build_sql }}
    {%- endcall -%}
  {%- else -%}
    {%- do dbt_ivm.ivm_build_generation(target, existing, build_sql, properties, settings.location) -%}
  {%- endif -%}
  {%- do dbt_ivm._ivm_persist_docs(target, model, settings.persist_docs) -%}
  {#- the scratch table an incremental refresh left (dbt's relation cache knows it): a later
      one may store the table in another format, and Delta cannot replace a parquet table -#}
  {%- set scratch = dbt_ivm._ivm_keys_table(target) -%}
  {%- if adapter.get_relation(database=scratch.database, schema=scratch.schema, identifier=scratch.identifier) is not none -%}
    {%- do adapter.drop_relation(scratch) -%}
  {%- endif -%}
  {%- if settings.get('change_log') -%}
    {%- do dbt_ivm.ivm_create_change_log(target, settings.change_log) -%}
    {%- do entry.update({'changes_logged': true}) -%}
  {%- endif -%}
  {#- the model's unique_key holds (the keyed path slices by it; ivm models reading this one net by it) -#}
  {%- set unique = entry.get('check_unique') -%}
  {%- set dup_sql = '(select count(*) from (select 1 from ' ~ target ~ ' group by ' ~ dbt_ivm._ivm_quote_all(unique) | join(', ')
      ~ ' having count(*) > 1))' if unique else '0' -%}
  {%- set counted = run_query('select count(*), ' ~ dup_sql ~ (', to_json(map(' ~ sized | join(', ') ~ '))' if sized else '')
      ~ ' from ' ~ target).rows[0] -%}
  {%- set rows = counted[0] -%}
  {%- if sized or entry.get('sizes') -%}
    {%- set sizes = {} -%}
    {%- do sizes.update(entry.get('sizes') or {}) -%}
    {%- do sizes.update(fromjson(counted[2]) if sized else {}) -%}
    {%- do sizes.update({'.': rows | int}) -%}
    {%- do entry.update({'sizes': sizes}) -%}
  {%- endif -%}
  {%- if counted[1] > 0 -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': unique_key (" ~ unique | join(', ') ~ ') is not unique: ' ~
        counted[1] ~ ' key value(s) have more than one row. Fix the model so that its key names one row, or set unique_key '
        'to the columns that do (dbt_ivm recomputes slices by it, and ivm models that read this one net changes by it).') }}
  {%- endif -%}
  {%- set columns = entry.get('columns') or {} -%}
  {%- do columns.update({'.': dbt_ivm._ivm_columns_signature(adapter.get_columns_in_relation(target))}) -%}
  {%- set advanced = dbt_ivm._ivm_logs_advanced_sql(entry.get('watch', []), entry.get('versions_to', {})) -%}
  {%- do entry.update({'status': 'success', 'rows_inserted': rows, 'rows_deleted': 0, 'columns': columns, 'logs_advanced': false,
                       'sql': {'logs_advanced': advanced} if advanced else {},
                       'duration_s': dbt_ivm._ivm_seconds_since(entry.started_at)}) -%}
  {%- do dbt_ivm.ivm_log_refresh(model, target, entry) -%}
  {{ log('dbt_ivm: ' ~ model.name ~ ': full build (' ~ entry.reason ~ '), ' ~ rows ~ ' rows', info=true) }}
{% endmacro %}

{#- persist_docs after a build (a rebuilt table has lost its comments): the model's
    description as the table comment, column descriptions through dbt's own persist_docs
    (dbt-spark writes them on Delta tables only, as for its table materialization). -#}
{% macro _ivm_persist_docs(target, model, docs) %}
  {%- if docs.relation and model.description -%}
    {%- do run_query('comment on table ' ~ target ~ ' is ' ~ dbt_ivm._ivm_string_literal(model.description)) -%}
  {%- endif -%}
  {%- if docs.columns -%}
    {%- do persist_docs(target, model, for_relation=false) -%}
  {%- endif -%}
{% endmacro %}

{#- grants through dbt's apply_grants, on every run as dbt's incremental materialization
    does (a rebuilt table starts without them). Checked before any work: open-source Spark
    SQL has no GRANT statement. -#}
{% macro _ivm_check_grants(model) %}
  {%- if config.get('grants') and adapter.type() == 'spark' -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': grants are set, but open-source Spark SQL has no "
        ~ 'GRANT statement (they apply on Databricks, through dbt-databricks). Remove grants from this model.') }}
  {%- endif -%}
{% endmacro %}

{% macro _ivm_apply_grants(target, existing, full) %}
  {%- set grant_config = config.get('grants') -%}
  {%- if grant_config -%}
    {%- do apply_grants(target, grant_config, should_revoke(existing, full_refresh_mode=full)) -%}
  {%- endif -%}
{% endmacro %}

{#- TBLPROPERTIES clause of a CREATE TABLE (empty without properties). -#}
{% macro _ivm_tblproperties(properties) %}
  {%- set items = [] -%}
  {%- for k, v in properties | dictsort -%}
    {%- do items.append(dbt_ivm._ivm_string_literal(k) ~ ' = ' ~ dbt_ivm._ivm_string_literal(v)) -%}
  {%- endfor -%}
  {{ return('tblproperties (' ~ items | join(', ') ~ ')' if items else '') }}
{% endmacro %}

{#- The version stamp of a refresh attempt of this table: its start time in epoch
    milliseconds, above every stamp logged before (state.table_version), so it grows with
    every attempt and is never reused. An ivm table stored as parquet stamps its own change
    log rows with it (_commit_version) and logs it as the refresh's table_version. -#}
{% macro _ivm_table_stamp(started_at, state) %}
  {%- set ms = ((started_at - modules.datetime.datetime(1970, 1, 1)).total_seconds() * 1000) | round | int -%}
  {%- set last = (state or {}).get('table_version') -%}
  {{ return([ms, (last + 1) if last is not none else 0] | max) }}
{% endmacro %}

{#- (Re)create the empty change log of an ivm table stored as parquet (its columns, hidden
    ones included, plus _change_type, _commit_version, _commit_timestamp). Rows logged
    before a full build are useless to readers, who rebuild after it. -#}
{% macro ivm_create_change_log(target, log) %}
  {{ return(adapter.dispatch('ivm_create_change_log', 'dbt_ivm')(target, log)) }}
{% endmacro %}

{% macro default__ivm_create_change_log(target, log) %}
  {%- do run_query('drop table if exists ' ~ log) -%}
  {%- do run_query(dbt_ivm._ivm_change_log_ddl(target, log, false)) -%}
{% endmacro %}

{% macro _ivm_change_log_ddl(target, log, if_not_exists) %}
  {{ return('create table ' ~ ('if not exists ' if if_not_exists else '') ~ log ~ ' using parquet as select *, cast(null as string) as _change_type, '
            ~ 'cast(null as bigint) as _commit_version, cast(null as timestamp) as _commit_timestamp from ' ~ target ~ ' where false') }}
{% endmacro %}

{#- Before an incremental apply to an ivm table stored as parquet that has ivm dependents:
    append to its change log the rows the apply removes ('delete', read from the current
    table with the stage's delete predicates) and the rows it adds ('insert'), all with
    _commit_version = stamp. Written before the table: an attempt that stops in between
    leaves a 'started' refresh-log row, and readers then rebuild. -#}
{% macro ivm_append_change_log(target, log, columns, stage, stamp) %}
  {{ return(adapter.dispatch('ivm_append_change_log', 'dbt_ivm')(target, log, columns, stage, stamp)) }}
{% endmacro %}

{% macro default__ivm_append_change_log(target, log, columns, stage, stamp) %}
  {%- do run_query(dbt_ivm._ivm_change_log_ddl(target, log, true)) -%}
  {%- set cols = dbt_ivm._ivm_quote_all(columns) | list -%}
  {%- set kept = [] -%}
  {%- for c in cols -%}{%- do kept.append('__ivm_v.' ~ c) -%}{%- endfor -%}
  {%- set tail = ', cast(' ~ stamp ~ ' as bigint), current_timestamp()' -%}
  {%- set parts = [] -%}
  {%- if stage.rewrite -%}
    {%- do parts.append('select ' ~ kept | join(', ') ~ ", 'delete'" ~ tail ~ ' from ' ~ target ~ ' __ivm_v '
                        ~ stage.predicates.joins | join(' ') ~ ' where ' ~ stage.predicates.flag) -%}
  {%- endif -%}
  {%- do parts.append('select ' ~ cols | join(', ') ~ ", 'insert'" ~ tail ~ ' from ' ~ stage.insert_view) -%}
  {%- do run_query('insert into ' ~ log ~ ' (' ~ (cols + ['_change_type', '_commit_version', '_commit_timestamp']) | join(', ') ~ ') '
                   ~ parts | join(' union all ')) -%}
{% endmacro %}

{% macro _ivm_definition_view(relation) %}
  {{ return(api.Relation.create(database=relation.database, schema=relation.schema, identifier='__ivm_def__' ~ relation.identifier, type='view')) }}
{% endmacro %}

{#- Apply the changes since the stored versions. inputs: see _ivm_refresh_inputs (spec:
    none for a join-only view, else the aggregate or keyed spec). Returns none, or the reason to rebuild the table in full
    instead: the change is larger than ivm_rebuild_above of the upstreams, or on parquet
    the cost estimate (_ivm_parquet_cost) finds a rebuild cheaper.
    Statements: one query counts the netted change of every changed upstream (and checks
    it, see _ivm_change_problem_sql); the apply reads the change sets inline, in one
    statement on Delta (whose metrics give the rows deleted and inserted) and in one write
    plus a metastore switch on parquet (whose counts the refresh log row computes). -#}
{% macro _ivm_refresh_incremental(model, target, inputs, state, settings, entry, listed=none) %}
  {%- set template, spec, plan = inputs.template, inputs.spec, inputs.plan -%}
  {%- set versions_from = state.last_success.versions -%}
  {%- set counters = [] -%}
  {%- set delta = settings.file_format == 'delta' -%}
  {#- the diff capture's seconds and scan (see _ivm_capture_diffs), if any, stay in the log row -#}
  {%- set phases = entry.get('phase_s') or {} -%}
  {%- set clock = namespace(t=modules.datetime.datetime.utcnow()) -%}
  {%- for p in plan -%}
    {%- set after = versions_from.get(p.up.name) -%}
    {%- do p.update({'from': after, 'to': entry.versions_to[p.up.name], 'change_view': none, 'old': 0, 'has_new': false,
                     'broadcast': false, 'ranges': {}, 'ids': none, 'id_types': none, 'by_ids': {},
                     'change_bound': none, 'inline_lists': false}) -%}
    {%- do p.update({'changed': p['from'] != p.to}) -%}
    {%- do p.update({'ranged': dbt_ivm._ivm_range_columns(p, plan, inputs.edges) if p.changed else {}}) -%}
    {%- if p.changed and p.up.kind == 'change_log' -%}
      {%- set with_before = spec is not none -%}
      {%- do p.update({'change_view': '(' ~ dbt_ivm.ivm_netted_changes_sql(p.up, p.columns, after, p.to, with_before) ~ ')'}) -%}
      {#- a range column that is a row key column is listed from the row keys: one read of the change less -#}
      {%- do dbt_ivm._ivm_key_listing(p) -%}
      {#- a join lists every changed row key, an aggregate those that carry its range columns -#}
      {%- do p.update({'lists_ids': spec is none or p.by_ids | length > 0, 'row_columns': dbt_ivm._ivm_listable_row_columns(p.columns)}) -%}
      {%- set own = {} -%}
      {%- for col, r in p.ranged.items() if col not in p.by_ids -%}{%- do own.update({col: r}) -%}{%- endfor -%}
      {#- a small change's rows, collected in the same pass; its key lists then come from them -#}
      {%- set rows = dbt_ivm._ivm_changed_rows_sql(p, with_before) -%}
      {#- rows known to be listed (not merely counted to be few, see _ivm_change_gate) -#}
      {%- set sure = rows and p.change_bound is not none -%}
      {%- do counters.append('(select named_struct(\'rows\', count(*), \'old\', count_if(__ivm_old), \'new\', count_if(__ivm_new), '
          ~ '\'problem\', min(__ivm_problem), \'problems\', count(__ivm_problem), \'ranges\', '
          ~ dbt_ivm._ivm_key_ranges_sql(p.ranged, '__ivm_new', with_before) ~ ', \'keys\', '
          ~ dbt_ivm._ivm_key_sets_sql({} if sure else own, p.change_view ~ ' __ivm_s', 'true', '__ivm_new', with_before, p.inline_lists)
          ~ ', \'ids\', ' ~ (dbt_ivm._ivm_changed_ids_sql(p, p.inline_lists) if p.lists_ids and not sure else 'cast(null as string)')
          ~ ', \'rows_listed\', ' ~ (rows or 'cast(null as string)')
          ~ ') from ' ~ dbt_ivm._ivm_change_size_sql(p) ~ ' __ivm_c)') -%}
    {%- elif p.changed -%}
      {#- the same struct type as a change log's counter: array() needs one element type -#}
      {%- do counters.append('(select named_struct(\'rows\', count(*), \'old\', 0L, \'new\', count(*), '
          ~ '\'problem\', cast(null as string), \'problems\', 0L, \'ranges\', ' ~ dbt_ivm._ivm_key_ranges_sql(p.ranged, 'true', false)
          ~ ', \'keys\', ' ~ dbt_ivm._ivm_key_sets_sql(p.ranged, p.up.relation ~ ' __ivm_s', dbt_ivm._ivm_watermark_window(p), 'true', false)
          ~ ', \'ids\', cast(null as string), \'rows_listed\', cast(null as string)'
          ~ ') from ' ~ p.up.relation ~ ' where ' ~ dbt_ivm._ivm_watermark_window(p) ~ ')') -%}
    {%- endif -%}
  {%- endfor -%}
  {#- on parquet, a rebuild that the row counts of the last refresh already show cheaper is
      chosen before the change is computed, by the estimate at its most favourable to the
      refresh: every upstream whose version moved counts as changed, and a join-only view
      rewrites its table only when a change log holds old images (deletes, update
      preimages) after its stored version (netting cancels them only for rows inserted since) -#}
  {%- set known = (state.last_success or {}).get('sizes') or {} -%}
  {%- set unknown = plan | map(attribute='up.name') | reject('in', known) | list -%}
  {%- if settings.rebuild_above and not delta and '.' in known and not unknown -%}
    {%- set moved = {} -%}
    {%- set deleting = [] -%}
    {%- for p in plan if p.changed -%}
      {%- do moved.update({p.up.name: 1}) -%}
      {%- set old = p.up.get('last_old_image') -%}
      {%- if old is not none and (p['from'] is none or old | int > p['from'] | int) -%}{%- do deleting.append(p.up.name) -%}{%- endif -%}
    {%- endfor -%}
    {%- set costly = dbt_ivm._ivm_parquet_cost(plan, moved, known, spec, spec is not none or state.repair or deleting | length > 0,
        settings.partition_by | length > 0) -%}
    {%- if costly -%}
      {#- the full build counts the sizes afresh -#}
      {%- do entry.update({'versions_from': versions_from}) -%}
      {%- set why = ('; deletes or updates in the change log of ' ~ deleting | join(', ')) if spec is none and deleting else '' -%}
      {{ return(costly ~ ' (row counts of the last refresh' ~ why ~ '; the change was not computed)') }}
    {%- endif -%}
  {%- endif -%}
  {%- set changed = plan | selectattr('changed') | list -%}
  {%- set change_rows = {} -%}
  {%- set nv = namespace(rows=0, old=0, base=0) -%}
  {%- set sizes = {} -%}
  {%- set sized = [] -%}
  {%- for p in plan if settings.rebuild_above and (p.changed or not delta) -%}
    {%- do sized.append(dbt_ivm._ivm_row_count_pair(p.up.name, p.up.relation)) -%}
  {%- endfor -%}
  {#- on parquet the table's, from which the refresh log row counts what a write added (a Delta
      write's own metrics count it) -#}
  {%- if not delta -%}{%- do sized.append(dbt_ivm._ivm_row_count_pair('.', target)) -%}{%- endif -%}
  {%- if counters or sized -%}
    {#- row counts in the same query (parquet and Delta answer count(*) from metadata): of the
        changed upstreams for the rebuild threshold; on parquet of every upstream for the
        cost estimate, and of the table -#}
    {%- set answer = run_query('select to_json(array(' ~ counters | join(', ') ~ '))'
        ~ (', to_json(map(' ~ sized | join(', ') ~ '))' if sized else '')).rows[0] -%}
    {%- do sizes.update(fromjson(answer[1]) if sized else {}) -%}
    {%- if not delta and settings.rebuild_above -%}{%- do entry.update({'sizes': sizes}) -%}{%- endif -%}
    {%- for c in fromjson(answer[0]) -%}
      {%- set p = changed[loop.index0] -%}
      {%- if c.get('problem') -%}
        {%- set more = (' (and ' ~ (c.problems - 1) ~ ' more key(s))') if c.problems > 1 else '' -%}
        {{ exceptions.raise_compiler_error(dbt_ivm._ivm_change_data_error(model.name, c.problem[:6], p.up.name,
            'In ' ~ (p.up.change_log or p.up.relation) ~ ', versions after ' ~ (p['from'] if p['from'] is not none else 'the start')
            ~ ' up to ' ~ p.to ~ ': ' ~ c.problem[7:] ~ more ~ '.')) }}
      {%- endif -%}
      {#- a small change set is read from here on as the literal rows the count fetched -#}
      {%- set listed = dbt_ivm._ivm_listed_change(c.get('rows_listed'), p, spec is not none) -%}
      {%- do p.update({'has_new': c.new > 0, 'old': c.old, 'broadcast': c.rows <= dbt_ivm._ivm_broadcast_rows(),
                       'ids': dbt_ivm._ivm_changed_id_literals(listed.ids if listed and p.lists_ids else c.get('ids'), p)}) -%}
      {%- do p.update({'ranges': dbt_ivm._ivm_key_range_literals(c.ranges, p.ranged, (listed.sets if listed else c.get('keys')) or {}, p)}) -%}
      {%- if listed -%}{%- do p.update({'change_view': listed.view}) -%}{%- endif -%}
      {%- do change_rows.update({p.up.name: c.rows}) -%}
      {%- set nv.rows = nv.rows + c.rows -%}
      {%- set nv.old = nv.old + c.old -%}
      {%- set nv.base = nv.base + sizes.get(p.up.name, 0) -%}
    {%- endfor -%}
  {%- endif -%}
  {%- do entry.update({'versions_from': versions_from, 'change_rows': change_rows}) -%}
  {%- do dbt_ivm._ivm_lap(phases, 'changes', clock, model.name ~ ': read ' ~ nv.rows ~ ' changed rows of ' ~
      changed | length ~ ' upstream(s)') -%}

  {%- if settings.rebuild_above and nv.rows > 0 and nv.rows > settings.rebuild_above * nv.base -%}
    {%- set share = (100.0 * nv.rows / [nv.base, 1] | max) | round(1) -%}
    {{ return(nv.rows ~ ' changed rows = ' ~ share ~ '% of the ' ~ nv.base ~
        ' rows of the changed upstreams, above ivm_rebuild_above=' ~ settings.rebuild_above ~ ': rebuilding is cheaper') }}
  {%- endif -%}

  {%- if nv.rows == 0 and not state.repair -%}
    {#- dbt's 'main' result is the state read's, restated as a no-op's by _ivm_report_noop -#}
    {%- set reason = 'no upstream changes' if not changed else 'upstream changes cancel out' -%}
    {%- do dbt_ivm._ivm_lap(phases, 'bookkeeping', clock) -%}
    {%- do entry.update({'table_version': (state.last_success or {}).get('table_version'), 'changes_logged': true}) -%}
    {%- do entry.columns.update({'.': (state.last_success.get('columns') or {}).get('.')}) -%}
    {%- do entry.update({'status': 'success', 'path': 'no-op', 'reason': reason, 'rows_inserted': 0, 'rows_deleted': 0,
        'phase_s': phases, 'duration_s': dbt_ivm._ivm_seconds_since(entry.started_at)}) -%}
    {%- do dbt_ivm.ivm_log_refresh(model, target, entry) -%}
    {{ log('dbt_ivm: ' ~ model.name ~ ': no-op (' ~ reason ~ ')', info=true) }}
    {%- do dbt_ivm._ivm_report_noop() -%}
    {{ return(none) }}
  {%- endif -%}

  {%- if settings.rebuild_above and not delta -%}
    {%- set costly = dbt_ivm._ivm_parquet_cost(plan, change_rows, sizes, spec, spec is not none or nv.old > 0 or state.repair,
        settings.partition_by | length > 0) -%}
    {%- if costly -%}{{ return(costly) }}{%- endif -%}
  {%- endif -%}

  {#- described once: its columns here, its location for a parquet rewrite, its properties on
      Delta; on parquet usually read already, with the lease -#}
  {%- set stored = (state.last_success.get('columns') or {}).get('.') -%}
  {%- set described = dbt_ivm._ivm_listed_as_described(listed, stored) -%}
  {%- if described is none -%}{%- set described = run_query('describe extended ' ~ target).rows -%}{%- endif -%}
  {%- set target_columns = dbt_ivm._ivm_described_columns(described) -%}
  {%- set columns = target_columns | map(attribute='name') | list -%}
  {%- set table_columns = dbt_ivm._ivm_columns_signature(target_columns) -%}
  {%- if stored is not none and stored != table_columns -%}
    {{ return('the columns of the table changed outside dbt_ivm since the last refresh (' ~ stored ~ ' -> ' ~ table_columns ~ ')') }}
  {%- endif -%}
  {%- do entry.columns.update({'.': table_columns}) -%}
  {%- if delta -%}{%- do dbt_ivm._ivm_delta_feed_for_dependents(model, target, described) -%}{%- endif -%}
  {%- set rewrite = nv.old > 0 or state.repair is not none -%}
  {%- if delta and spec is none and nv.old > 0 and not state.repair -%}{%- do dbt_ivm._ivm_delta_key_boxes(plan) -%}{%- endif -%}
  {#- few changed rows: a recompute lists the keys they touch in its SQL (_ivm_affected_keys) -#}
  {%- set few = nv.rows <= dbt_ivm._ivm_key_list_max() -%}
  {%- if spec is none -%}
    {%- set stage = dbt_ivm._ivm_stage_join_changes(target, template, plan, state, rewrite, inputs.edges) -%}
  {%- elif spec.kind == 'keyed' -%}
    {%- set stage = dbt_ivm._ivm_stage_keyed_changes(spec, target, target_columns, plan, settings.file_format, few) -%}
  {%- else -%}
    {%- set stage = dbt_ivm._ivm_stage_aggregate_changes(spec, target, target_columns, plan, nv.old > 0,
        settings.partition_by | length > 0, inputs.edges, not delta, few, nv.rows) -%}
  {%- endif -%}
  {%- set steps = [] -%}
  {%- for p in changed if change_rows[p.up.name] > 0 or state.repair -%}
    {%- set does = (['DEL'] if p.old > 0 or state.repair else []) + (['INS'] if p.has_new else []) -%}
    {%- do steps.append(p.up.name ~ ': ' ~ (does | join('+') or 'none')) -%}
  {%- endfor -%}
  {%- do entry.update({'message': (steps | sort + ([entry.message] if entry.get('message') else [])) | join('; ')}) -%}
  {%- set reason = ((state.repair ~ ', re-applying by key; ') if state.repair else '') ~ stage.reason -%}
  {%- do dbt_ivm._ivm_lap(phases, 'delta', clock, model.name ~ ': planned the change (' ~ stage.reason ~ ')') -%}
  {%- do entry.update({'status': 'started', 'path': 'incremental', 'reason': reason, 'changes_logged': settings.get('change_log') is not none}) -%}
  {%- if delta -%}
    {#- an incremental refresh of a delta model: its table is Delta (the definition hash
        covers the format, so a former parquet table was rebuilt) -#}
    {%- do entry.update({'table_version': dbt_ivm._ivm_delta_table_version(target)}) -%}
  {%- endif -%}
  {%- do dbt_ivm.ivm_log_refresh(model, target, entry) -%}
  {%- if settings.get('change_log') -%}
    {%- do dbt_ivm.ivm_append_change_log(target, settings.change_log, columns, stage, entry.table_version) -%}
  {%- endif -%}
  {%- do dbt_ivm._ivm_lap(phases, 'bookkeeping', clock) -%}

  {%- set counted = {} -%}
  {%- do entry.update({'sql': {}}) -%}
  {%- if delta -%}
    {%- set rows = dbt_ivm.ivm_apply_delta(target, target_columns, stage, plan, state.repair is not none, entry.table_version) -%}
    {%- if rows.inserted is not none -%}
      {%- do counted.update({'rows_deleted': rows.deleted, 'rows_inserted': rows.inserted}) -%}
    {%- endif -%}
  {%- elif not stage.rewrite -%}
    {%- do dbt_ivm.ivm_apply_append(target, columns, stage.insert_view) -%}
    {#- the log row counts what it added -#}
    {%- do counted.update({'rows_deleted': 0}) -%}
    {%- do entry.sql.update({'rows_inserted': '(select count(*) from ' ~ target ~ ') - ' ~ sizes['.']}) -%}
  {%- elif settings.partition_by -%}
    {%- set rows = dbt_ivm._ivm_rewrite_partitions(target, target_columns, stage.insert_view, stage.predicates, settings.partition_by) -%}
    {%- do counted.update({'rows_deleted': rows.deleted, 'rows_inserted': rows.inserted}) -%}
  {%- else -%}
    {%- set previous = dbt_ivm.ivm_apply_rewrite(target, columns, stage.insert_view, stage.predicates, described) -%}
    {%- if stage.get('counts') -%}
      {%- do entry.sql.update(stage.counts) -%}
    {%- else -%}
      {#- the rows the rewrite left out, counted in the generation it replaced (kept on disk until the next rewrite) -#}
      {%- set deleted = '(select count(*) from parquet.`' ~ previous ~ '` __ivm_v ' ~ stage.predicates.joins | join(' ')
          ~ ' where ' ~ stage.predicates.flag ~ ')' -%}
      {%- do entry.sql.update({'rows_deleted': deleted,
                               'rows_inserted': '(select count(*) from ' ~ target ~ ') - ' ~ sizes['.'] ~ ' + ' ~ deleted}) -%}
    {%- endif -%}
  {%- endif -%}
  {%- do dbt_ivm._ivm_lap(phases, 'apply', clock, model.name ~ ': applied' ~ (' -' ~ counted.rows_deleted ~ ' +' ~ counted.rows_inserted
      ~ ' rows' if 'rows_inserted' in counted else ' (rows counted in the refresh log)')) -%}
  {%- set advanced = dbt_ivm._ivm_logs_advanced_sql(plan | map(attribute='up') | list, entry.versions_to) if stage.reads_upstreams else none -%}
  {%- if advanced -%}{%- do entry.sql.update({'logs_advanced': advanced}) -%}{%- endif -%}
  {%- do entry.update(counted) -%}
  {%- do entry.update({'status': 'success', 'logs_advanced': false, 'phase_s': phases,
                       'duration_s': dbt_ivm._ivm_seconds_since(entry.started_at)}) -%}
  {#- the refresh's last write: it frees the lease (see macros/state/lease.sql) -#}
  {%- do dbt_ivm.ivm_log_refresh(model, target, entry) -%}
  {{ log('dbt_ivm: ' ~ model.name ~ ': incremental (' ~ reason ~ ')' ~ (', -' ~ counted.rows_deleted ~ ' +' ~ counted.rows_inserted
      ~ ' rows' if 'rows_inserted' in counted else '') ~ ' in ' ~ entry.duration_s ~ ' s', info=true) }}
  {{ return(none) }}
{% endmacro %}

{#- The most netted changed rows of one upstream that a refresh asks Spark to broadcast in
    its joins (a larger change is joined as Spark plans it). -#}
{#- The rows a DESCRIBE TABLE EXTENDED of the table would return (its columns, then its
    details: Location, Provider, ...), from the information text of its SHOW TABLE EXTENDED
    row (listed), when that gives every column and they are the ones the last refresh
    recorded (stored: their signature); else none, and the caller describes the table. The
    listing names some types less exactly than DESCRIBE (a varchar as string), so only a
    match is taken; and only details one per line, each key once (a table comment can span
    lines). -#}
{% macro _ivm_listed_as_described(listed, stored) %}
  {%- set columns = dbt_ivm._ivm_listing_columns(listed) if listed else none -%}
  {%- if columns is none or stored is none or dbt_ivm._ivm_columns_signature(columns) != stored -%}{{ return(none) }}{%- endif -%}
  {%- set details = [] -%}
  {%- set keys = [] -%}
  {%- for line in listed.split('\nSchema: root\n', 1)[0].split('\n') -%}
    {%- set detail = line.split(': ', 1) -%}
    {%- if detail | length < 2 or detail[0] in keys -%}{{ return(none) }}{%- endif -%}
    {%- do keys.append(detail[0]) -%}
    {%- do details.append(detail + ['']) -%}
  {%- endfor -%}
  {%- set rows = [] -%}
  {%- for c in columns -%}{%- do rows.append([c.name, c.data_type, none]) -%}{%- endfor -%}
  {{ return(rows + [['', '', ''], ['# Detailed Table Information', '', '']] + details) }}
{% endmacro %}

{% macro _ivm_broadcast_rows() %}
  {{ return(200000) }}
{% endmacro %}

{#- A Delta ivm table that other ivm models read records its change data feed (they read
    its changes through it). The full build sets it; a table built before its first ivm
    dependent appeared gets it here, before the refresh's write, once. -#}
{% macro _ivm_delta_feed_for_dependents(model, target, described) %}
  {%- if dbt_ivm._ivm_has_ivm_dependents(model)
        and dbt_ivm._ivm_table_info(described).properties.get('delta.enableChangeDataFeed', '') | lower != 'true' -%}
    {%- do run_query('alter table ' ~ target ~ " set tblproperties ('delta.enableChangeDataFeed' = 'true')") -%}
    {{ log('dbt_ivm: ' ~ model.name ~ ': turned on the change data feed of ' ~ target ~ ' for the ivm models that read it', info=true) }}
  {%- endif -%}
{% endmacro %}

{#- Add the seconds since clock.t to phases[name] and restart the clock; with a message, log
    the phase's progress line (a long refresh is never silent between dbt's START and OK). -#}
{% macro _ivm_lap(phases, name, clock, message=none) %}
  {%- set now = modules.datetime.datetime.utcnow() -%}
  {%- set seconds = ((now - clock.t).total_seconds() * 1000) | round / 1000 -%}
  {%- do phases.update({name: ((phases.get(name, 0) + seconds) * 1000) | round / 1000}) -%}
  {%- set clock.t = now -%}
  {%- if message -%}{{ log('dbt_ivm: ' ~ message ~ ' in ' ~ seconds ~ ' s', info=true) }}{%- endif -%}
{% endmacro %}

