{#- The refresh paths of the ivm materialization: full build and incremental refresh. -#}

{#- Model config keys, validated. -#}
{% macro ivm_model_settings(model) %}
  {%- set on_unsupported = config.get('ivm_on_unsupported', 'error') -%}
  {%- if on_unsupported not in ('error', 'full_rebuild') -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': ivm_on_unsupported must be 'error' or 'full_rebuild', got '" ~ on_unsupported ~ "'.") }}
  {%- endif -%}
  {%- set file_format = config.get('file_format') or 'parquet' -%}
  {%- if file_format != 'parquet' -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': materialized='ivm' stores tables as parquet in this version; file_format='" ~ file_format ~ "' is not supported yet. Remove file_format or set it to 'parquet'.") }}
  {%- endif -%}
  {%- set partition_by = config.get('partition_by') -%}
  {%- set partition_by = [partition_by] if partition_by is string else (partition_by or []) -%}
  {{ return({'on_unsupported': on_unsupported, 'partition_by': partition_by | map('lower') | list}) }}
{% endmacro %}

{#- Columns of an upstream, after checking that it and its change log exist. -#}
{% macro ivm_checked_columns(model, up) %}
  {%- set columns = adapter.get_columns_in_relation(up.relation) -%}
  {%- if not columns -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': upstream " ~ up.name ~ ' (' ~ up.relation ~ ') does not exist. Build or load it first.') }}
  {%- endif -%}
  {%- if up.kind == 'change_log' -%}
    {%- set log_names = adapter.get_columns_in_relation(up.change_log) | map(attribute='name') | map('lower') | list -%}
    {%- set missing = [] -%}
    {%- for c in (columns | map(attribute='name') | map('lower') | list) + ['_change_type', '_commit_version'] if c not in log_names -%}
      {%- do missing.append(c) -%}
    {%- endfor -%}
    {%- if missing -%}
      {%- set problem = 'does not exist' if not log_names else 'lacks the columns ' ~ missing | join(', ') -%}
      {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "' cannot be maintained incrementally (materialized='ivm'):\n  IVM032 the change log " ~ up.change_log ~ ' declared for upstream ' ~ up.name ~ ' ' ~ problem ~ ".\n         fix: " ~ dbt_ivm.ivm_restriction_catalog()['IVM032'].fix ~ '.') }}
    {%- endif -%}
  {%- endif -%}
  {%- if up.kind == 'append_only' and up.watermark | lower not in (columns | map(attribute='name') | map('lower') | list) -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': the watermark column '" ~ up.watermark ~ "' declared for upstream " ~ up.name ~ ' is not a column of ' ~ up.relation ~ '.') }}
  {%- endif -%}
  {{ return(columns) }}
{% endmacro %}

{% macro ivm_full_refresh_reason(existing, state, definition_hash) %}
  {%- if should_full_refresh() -%}{{ return('--full-refresh requested') }}{%- endif -%}
  {%- if existing is none -%}{{ return('first build') }}{%- endif -%}
  {%- if existing.type != 'table' -%}{{ return('replacing a ' ~ existing.type) }}{%- endif -%}
  {%- if state.last_success is none -%}{{ return('no refresh recorded for this table') }}{%- endif -%}
  {%- if state.last_success.definition_hash != definition_hash -%}{{ return('model SQL or upstream declarations changed') }}{%- endif -%}
  {{ return(none) }}
{% endmacro %}

{% macro ivm_seconds_since(started_at) %}
  {{ return(((modules.datetime.datetime.utcnow() - started_at).total_seconds() * 1000) | round / 1000) }}
{% endmacro %}

{#- Build (or rebuild) the table from build_sql and keep the plain definition as a view. -#}
{% macro ivm_build_full(target, existing, build_sql, definition_sql, settings, entry) %}
  {%- do entry.update({'status': 'started'}) -%}
  {%- do dbt_ivm.ivm_log_refresh(model, target, entry) -%}
  {%- if existing is not none -%}{%- do adapter.drop_relation(existing) -%}{%- endif -%}
  {%- call statement('main') -%}
    create table {{ target }} using parquet
    {% if settings.partition_by %}partitioned by ({{ dbt_ivm.ivm_quote_all(settings.partition_by) | join(', ') }}){% endif %}
    as {{ build_sql }}
  {%- endcall -%}
  {%- set definition_view = dbt_ivm.ivm_definition_view(target) -%}
  {%- do run_query('create or replace view ' ~ definition_view ~ ' as ' ~ definition_sql) -%}
  {%- set rows = run_query('select count(*) from ' ~ target).rows[0][0] -%}
  {%- do entry.update({'status': 'success', 'rows_inserted': rows, 'rows_deleted': 0, 'duration_s': dbt_ivm.ivm_seconds_since(entry.started_at)}) -%}
  {%- do dbt_ivm.ivm_log_refresh(model, target, entry) -%}
  {{ log('dbt_ivm: ' ~ model.name ~ ': full build (' ~ entry.reason ~ '), ' ~ rows ~ ' rows', info=true) }}
{% endmacro %}

{% macro ivm_definition_view(relation) %}
  {{ return(api.Relation.create(database=relation.database, schema=relation.schema, identifier='__ivm_def__' ~ relation.identifier, type='view')) }}
{% endmacro %}

{#- Apply the changes since the stored versions. -#}
{% macro ivm_refresh_incremental(model, target, template, plan, state, settings, entry) %}
  {%- set versions_from = state.last_success.versions -%}
  {%- set prefix = '__ivm_' ~ modules.re.sub('[^A-Za-z0-9_]', '_', target.identifier) -%}
  {%- set temp_views = [] -%}
  {%- set change_rows = {} -%}
  {%- set nv = namespace(any_change=false, any_old=false) -%}
  {%- for p in plan -%}
    {%- set after = versions_from.get(p.up.name) -%}
    {%- do p.update({'from': after, 'to': entry.versions_to[p.up.name], 'change_view': none, 'has_new': false}) -%}
    {%- do p.update({'changed': p['from'] != p.to}) -%}
    {%- if p.changed and p.up.kind == 'change_log' -%}
      {%- set view = prefix ~ '_chg_' ~ p.up.short -%}
      {%- do temp_views.append(view) -%}
      {%- do run_query('cache table ' ~ view ~ ' as ' ~ dbt_ivm.ivm_netted_changes_sql(p.up, p.columns, after, p.to)) -%}
      {%- set counts = run_query('select count(*), count_if(__ivm_old), count_if(__ivm_new) from ' ~ view).rows[0] -%}
      {%- do p.update({'change_view': view, 'has_new': counts[2] > 0}) -%}
      {%- do change_rows.update({p.up.name: counts[0]}) -%}
      {%- if counts[1] > 0 -%}{%- set nv.any_old = true -%}{%- endif -%}
      {%- if counts[0] > 0 -%}{%- set nv.any_change = true -%}{%- endif -%}
    {%- elif p.changed -%}
      {%- set n = run_query('select count(*) from ' ~ p.up.relation ~ ' where ' ~ dbt_ivm.ivm_watermark_window(p)).rows[0][0] -%}
      {%- do p.update({'has_new': n > 0}) -%}
      {%- do change_rows.update({p.up.name: n}) -%}
      {%- if n > 0 -%}{%- set nv.any_change = true -%}{%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- do entry.update({'versions_from': versions_from, 'change_rows': change_rows}) -%}

  {%- if not nv.any_change and not state.interrupted -%}
    {%- call statement('main') -%}select 'no changes' as dbt_ivm_refresh{%- endcall -%}
    {%- set reason = 'no upstream changes' if change_rows | length == 0 else 'upstream changes cancel out' -%}
    {%- do entry.update({'status': 'success', 'path': 'no-op', 'reason': reason, 'rows_inserted': 0, 'rows_deleted': 0, 'duration_s': dbt_ivm.ivm_seconds_since(entry.started_at)}) -%}
    {%- do dbt_ivm.ivm_log_refresh(model, target, entry) -%}
    {%- do dbt_ivm.ivm_drop_temp_views(temp_views) -%}
    {{ log('dbt_ivm: ' ~ model.name ~ ': no-op (' ~ reason ~ ')', info=true) }}
    {{ return(none) }}
  {%- endif -%}

  {%- set columns = adapter.get_columns_in_relation(target) | map(attribute='name') | list -%}
  {%- set insert_view = prefix ~ '_ins' -%}
  {%- do temp_views.append(insert_view) -%}
  {%- set insert_sql = dbt_ivm.ivm_join_insert_sql(template, plan) -%}
  {%- if insert_sql -%}
    {%- do run_query('cache table ' ~ insert_view ~ ' as ' ~ insert_sql) -%}
  {%- else -%}
    {%- do run_query('create or replace temporary view ' ~ insert_view ~ ' as select * from ' ~ target ~ ' where false') -%}
  {%- endif -%}
  {%- set rows_inserted = run_query('select count(*) from ' ~ insert_view).rows[0][0] if insert_sql else 0 -%}
  {%- set rewrite = nv.any_old or state.interrupted -%}
  {%- set reason = ('repairing an interrupted refresh; ' if state.interrupted else '') ~ ('deletes or updates: rewrite' if rewrite else 'insert-only: append') -%}
  {%- do entry.update({'status': 'started', 'path': 'incremental', 'reason': reason}) -%}
  {%- do dbt_ivm.ivm_log_refresh(model, target, entry) -%}

  {%- if not rewrite -%}
    {%- do dbt_ivm.ivm_apply_append(target, columns, insert_view) -%}
    {%- set rows_deleted = 0 -%}
  {%- else -%}
    {%- set predicates = dbt_ivm.ivm_join_delete_predicates(plan, '__ivm_v') -%}
    {%- if settings.partition_by -%}
      {%- set rows_deleted = dbt_ivm.ivm_rewrite_partitions(target, columns, insert_view, predicates, settings.partition_by, prefix, temp_views) -%}
    {%- else -%}
      {%- set rows_deleted = run_query('select count(*) from ' ~ target ~ ' __ivm_v ' ~ predicates.joins | join(' ') ~ ' where ' ~ predicates.flag).rows[0][0] -%}
      {%- do dbt_ivm.ivm_apply_rewrite(target, columns, insert_view, predicates) -%}
    {%- endif -%}
  {%- endif -%}
  {%- do dbt_ivm.ivm_drop_temp_views(temp_views) -%}
  {%- do entry.update({'status': 'success', 'rows_inserted': rows_inserted, 'rows_deleted': rows_deleted, 'duration_s': dbt_ivm.ivm_seconds_since(entry.started_at)}) -%}
  {%- do dbt_ivm.ivm_log_refresh(model, target, entry) -%}
  {{ log('dbt_ivm: ' ~ model.name ~ ': incremental (' ~ reason ~ '), -' ~ rows_deleted ~ ' +' ~ rows_inserted ~ ' rows in ' ~ entry.duration_s ~ ' s', info=true) }}
{% endmacro %}

{#- Partitioned table: overwrite only the partitions that lose or gain rows. Returns the
    number of rows deleted. -#}
{% macro ivm_rewrite_partitions(target, columns, insert_view, predicates, partition_by, prefix, temp_views) %}
  {%- set pcols = dbt_ivm.ivm_quote_all(partition_by) | list -%}
  {%- set affected_view = prefix ~ '_parts' -%}
  {%- do temp_views.append(affected_view) -%}
  {%- set vcols = [] -%}
  {%- for c in pcols -%}{%- do vcols.append('__ivm_v.' ~ c) -%}{%- endfor -%}
  {%- set match_di = [] -%}
  {%- for c in pcols -%}{%- do match_di.append('d.' ~ c ~ ' <=> i.' ~ c) -%}{%- endfor -%}
  {%- set pick = [] -%}
  {%- for c in pcols -%}{%- do pick.append('case when d.__ivm_deleted is not null then d.' ~ c ~ ' else i.' ~ c ~ ' end as ' ~ c) -%}{%- endfor -%}
  {%- do run_query('cache table ' ~ affected_view ~ ' as with deleted as (select ' ~ vcols | join(', ') ~ ', count(*) as __ivm_deleted from ' ~ target ~ ' __ivm_v ' ~ predicates.joins | join(' ') ~ ' where ' ~ predicates.flag ~ ' group by ' ~ vcols | join(', ') ~ '), inserted as (select ' ~ pcols | join(', ') ~ ', count(*) as __ivm_inserted from ' ~ insert_view ~ ' group by ' ~ pcols | join(', ') ~ ') select ' ~ pick | join(', ') ~ ', coalesce(d.__ivm_deleted, 0) as __ivm_deleted, coalesce(i.__ivm_inserted, 0) as __ivm_inserted from deleted d full outer join inserted i on ' ~ match_di | join(' and ')) -%}
  {%- set match_a = [] -%}
  {%- for c in pcols -%}{%- do match_a.append('a.' ~ c ~ ' <=> t.' ~ c) -%}{%- endfor -%}
  {%- set tcols = [] -%}
  {%- for c in pcols -%}{%- do tcols.append('a.' ~ c) -%}{%- endfor -%}
  {%- set rows = run_query('select ' ~ tcols | join(', ') ~ ', a.__ivm_deleted, a.__ivm_inserted, (select count(*) from ' ~ target ~ ' t where ' ~ match_a | join(' and ') ~ ') as __ivm_total from ' ~ affected_view ~ ' a').rows -%}
  {%- set emptied = [] -%}
  {%- set ns = namespace(deleted=0) -%}
  {%- for r in rows -%}
    {%- set n = pcols | length -%}
    {%- set ns.deleted = ns.deleted + r[n] -%}
    {%- if r[n + 2] - r[n] + r[n + 1] == 0 -%}
      {%- set spec = [] -%}
      {%- for c in pcols -%}{%- do spec.append(c ~ ' = ' ~ dbt_ivm.ivm_partition_literal(r[loop.index0])) -%}{%- endfor -%}
      {%- do emptied.append(spec | join(', ')) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- do dbt_ivm.ivm_apply_partition_rewrite(target, columns, insert_view, predicates, partition_by, affected_view, emptied) -%}
  {{ return(ns.deleted) }}
{% endmacro %}

{% macro ivm_partition_literal(value) %}
  {%- if value is none -%}{{ return('null') }}{%- endif -%}
  {%- if value is sameas true or value is sameas false -%}{{ return(value | string | lower) }}{%- endif -%}
  {{ return(dbt_ivm.ivm_string_literal(value | string)) }}
{% endmacro %}

{#- Views are dropped newest first: a cached view is resolved when uncached, so the views
    it reads must still exist. -#}
{% macro ivm_drop_temp_views(names) %}
  {%- for name in names | reverse -%}
    {%- do run_query('uncache table if exists ' ~ name) -%}
    {%- do run_query('drop view if exists ' ~ name) -%}
  {%- endfor -%}
{% endmacro %}
