{#- materialized='ivm': the first run builds the table; later runs apply only the upstream
    changes since the versions recorded by the last successful refresh. -#}
{% materialization ivm, adapter='spark' %}
  {%- set started_at = modules.datetime.datetime.utcnow() -%}
  {%- set identifier = model['alias'] -%}
  {%- set target_relation = api.Relation.create(identifier=identifier, schema=schema, database=database, type='table') -%}
  {%- set existing = adapter.get_relation(database=database, schema=schema, identifier=identifier) -%}
  {%- set settings = dbt_ivm._ivm_model_settings(model) -%}
  {%- do dbt_ivm._ivm_check_grants(model) -%}
  {%- set upstreams = dbt_ivm.ivm_detect_change_feeds(model, dbt_ivm.ivm_upstreams(model)) -%}
  {%- set analysis = dbt_ivm.ivm_analyze(sql, upstreams) -%}
  {%- set entry = {'refresh_id': invocation_id ~ ':' ~ model.unique_id, 'started_at': started_at} -%}
  {#- a parquet table that ivm models read writes its own change log -#}
  {%- set writes_log = dbt_ivm._ivm_writes_change_log(model, settings) -%}
  {%- do settings.update({'change_log': dbt_ivm._ivm_change_log_relation(target_relation) if writes_log else none}) -%}

  {%- if analysis.issues and settings.on_unsupported != 'full_rebuild' -%}
    {{ exceptions.raise_compiler_error(dbt_ivm._ivm_format_issues(model.name, analysis.issues)) }}
  {%- endif -%}
  {%- if analysis.issues -%}
    {%- set lease = dbt_ivm.ivm_acquire_lease(model, target_relation, entry.refresh_id, settings) -%}
    {%- set codes = analysis.issues | map(attribute='code') | unique | join(', ') -%}
    {%- do entry.update({'path': 'full', 'reason': 'not maintainable (' ~ codes ~ '); ivm_on_unsupported=full_rebuild',
                         'table_version': dbt_ivm._ivm_table_stamp(started_at, none)}) -%}
    {{ log('dbt_ivm: ' ~ model.name ~ ' cannot be maintained incrementally (' ~ codes ~
        '): rebuilding it in full as ivm_on_unsupported=full_rebuild asks', info=true) }}
    {{ run_hooks(pre_hooks) }}
    {%- set definition = dbt_ivm._ivm_checked_definition(analysis.parsed, sql, settings.file_format) -%}
    {%- do dbt_ivm._ivm_build_full(target_relation, existing, sql, definition, settings, entry) -%}
    {%- do dbt_ivm._ivm_free_lease(lease.prefix, lease.generation, entry.refresh_id) -%}
    {%- do dbt_ivm._ivm_apply_grants(target_relation, existing, true) -%}
    {{ run_hooks(post_hooks) }}
    {{ return({'relations': [target_relation]}) }}
  {%- endif -%}

  {%- set used = analysis.parsed.rels | map(attribute='upstream') | unique | sort -%}
  {%- set plan = [] -%}
  {%- set hidden = {} -%}
  {%- for i in used -%}
    {%- set up = upstreams[i] -%}
    {%- do hidden.update({i: up.hidden}) -%}
    {%- do plan.append({'index': i, 'up': up, 'columns': dbt_ivm._ivm_checked_columns(model, up)}) -%}
  {%- endfor -%}
  {#- the row key recorded on the table for ivm models that read it (none: its rows have no identity) -#}
  {%- set row_key = [] -%}
  {%- if analysis.shape == 'join_only' -%}
    {%- set spec = none -%}
    {%- set template = dbt_ivm._ivm_rewrite_template(analysis.parsed, hidden) -%}
    {#- a join's row: one row of each upstream, identified by their keys (not by a watermark) -#}
    {%- for p in plan -%}{%- for h in p.up.hidden -%}{%- do row_key.append(h.name) -%}{%- endfor -%}{%- endfor -%}
    {%- if plan | rejectattr('up.kind', 'equalto', 'change_log') | list or plan | rejectattr('up.hidden') | list -%}
      {%- set row_key = [] -%}
    {%- endif -%}
  {%- else -%}
    {#- an aggregate's rows are its groups: no upstream row keys are carried -#}
    {%- set no_hidden = {} -%}
    {%- for i in used -%}{%- do no_hidden.update({i: []}) -%}{%- endfor -%}
    {%- set spec = dbt_ivm._ivm_aggregate_spec(analysis.parsed, analysis.aggregation, no_hidden) -%}
    {%- do spec.update({'refresh': analysis.refresh}) -%}
    {%- set template = spec.full -%}
    {%- if spec.kind == 'distinct' -%}
      {%- set row_key = 'visible' -%}
    {%- else -%}
      {%- for g in spec.groups -%}{%- do row_key.append(g.name) -%}{%- endfor -%}
    {%- endif -%}
  {%- endif -%}
  {%- set upstream_columns = {} -%}
  {%- for p in plan -%}{%- do upstream_columns.update({p.up.name: dbt_ivm._ivm_columns_signature(p.columns)}) -%}{%- endfor -%}
  {%- do entry.update({'row_key': row_key or none, 'columns': upstream_columns}) -%}
  {%- set declarations = [] -%}
  {%- for p in plan -%}{%- do declarations.append([p.up.name, p.up.kind, p.up.unique_key, p.up.watermark, p.up.change_log | string]) -%}{%- endfor -%}
  {#- layout and comments do not change the definition: hash the significant tokens -#}
  {%- set tk = analysis.parsed.tk -%}
  {%- set words = [] -%}
  {%- for i in tk.sig -%}{%- do words.append(tk.tokens[i].v) -%}{%- endfor -%}
  {#- a changed table layout (partitions, format, properties, location) rebuilds the table -#}
  {%- set layout = tojson(settings.partition_by) ~ (' delta' if settings.file_format == 'delta' else '') ~
      (' ' ~ tojson(settings.tblproperties) if settings.tblproperties else '') ~
      (' ' ~ settings.location_root if settings.location_root else '') -%}
  {%- set definition_hash = local_md5(words | join(' ') ~ tojson(declarations) ~ layout) -%}
  {#- one refresh of a table at a time: the table is written under the lease. The newest lease
      generation is read before the state, so that taking the next one proves the state current -#}
  {%- set lease_top = dbt_ivm._ivm_lease_top(dbt_ivm._ivm_lease_prefix(target_relation.schema, target_relation.identifier)) -%}
  {%- set position = dbt_ivm._ivm_read_position(model, existing, plan, definition_hash, upstream_columns, analysis.parsed.tk, entry) -%}
  {%- if position.unchanged -%}
    {#- nothing to do, and nothing that changes the state to log: no lease needed -#}
    {{ run_hooks(pre_hooks) }}
    {%- do dbt_ivm._ivm_log_unchanged(model, target_relation, position.state, entry) -%}
    {%- do dbt_ivm._ivm_apply_grants(target_relation, existing, false) -%}
    {{ run_hooks(post_hooks) }}
    {{ return({'relations': [target_relation]}) }}
  {%- endif -%}
  {%- set lease = dbt_ivm.ivm_acquire_lease(model, target_relation, entry.refresh_id, settings, lease_top) -%}
  {%- if not lease.fresh -%}
    {#- another refresh ran while this one waited: read the state it left -#}
    {%- set position = dbt_ivm._ivm_read_position(model, existing, plan, definition_hash, upstream_columns, analysis.parsed.tk, entry) -%}
  {%- endif -%}
  {%- set state, versions_to, full_reason = position.state, position.versions_to, position.full_reason -%}

  {#- upstream versions are fixed: changes committed from here on wait for the next run -#}
  {{ run_hooks(pre_hooks) }}

  {%- if not full_reason -%}
    {%- set full_reason = position.upstream_reason -%}
  {%- endif -%}
  {%- if not full_reason and spec is not none and state.repair -%}
    {%- set full_reason = state.repair ~ ': rebuilding, as aggregate states cannot be re-applied by key' -%}
  {%- endif -%}
  {%- if not full_reason -%}
    {%- set full_reason = dbt_ivm._ivm_check_change_feeds(model, plan, state, versions_to, settings) -%}
  {%- endif -%}
  {%- if not full_reason -%}
    {%- set full_reason = position.drift_reason -%}
  {%- endif -%}
  {%- if not full_reason -%}
    {%- set full_reason = dbt_ivm._ivm_refresh_incremental(model, target_relation, template, spec, plan, state, settings, entry) -%}
  {%- endif -%}
  {%- if full_reason -%}
    {%- set relations = {} -%}
    {%- for p in plan -%}
      {%- do relations.update({p.index: dbt_ivm.ivm_snapshot_sql(p.up, p.columns, versions_to[p.up.name])}) -%}
    {%- endfor -%}
    {%- do entry.update({'path': 'full', 'reason': full_reason}) -%}
    {%- set definition = dbt_ivm._ivm_checked_definition(analysis.parsed, sql, settings.file_format) -%}
    {%- do dbt_ivm._ivm_build_full(target_relation, existing, dbt_ivm._ivm_fill_relations(template, relations), definition, settings, entry) -%}
  {%- endif -%}

  {%- do dbt_ivm._ivm_free_lease(lease.prefix, lease.generation, entry.refresh_id) -%}
  {%- do dbt_ivm._ivm_apply_grants(target_relation, existing, entry.path == 'full') -%}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}

{#- The state of a refresh from the refresh log and the upstream versions it reads up to:
    {state, versions_to, full_reason (why rebuild, or none), upstream_reason (an ivm
    upstream's history forces a rebuild, or none), drift_reason (the upstream columns
    changed since the last refresh, or none), unchanged (nothing changed since the last
    successful refresh: a no-op)}. Updates entry (table_version, versions_to,
    definition_hash, watch). Reads only: it runs again when the lease was not taken at once. -#}
{% macro _ivm_read_position(model, existing, plan, definition_hash, upstream_columns, tokens, entry) %}
  {%- set state = dbt_ivm.ivm_read_state(model.unique_id) -%}
  {%- set interrupted = state.get('interrupted') is not none -%}
  {%- if config.get('file_format') == 'delta' and existing is not none and interrupted -%}
    {%- set exact = not dbt_ivm._ivm_read_ahead_upstreams(plan | map(attribute='up') | list) -%}
    {%- set state = dbt_ivm._ivm_delta_resolve_interrupted(existing, state, exact) -%}
  {%- endif -%}
  {%- do entry.update({'table_version': dbt_ivm._ivm_table_stamp(entry.started_at, state)}) -%}
  {#- ivm upstreams stored as parquet: their refresh history since the stored version is read with the versions -#}
  {%- for p in plan if p.up.get('feed') == 'ivm' -%}
    {%- do p.up.update({'after': state.last_success.versions.get(p.up.name) if state.last_success else none, 'history': none}) -%}
  {%- endfor -%}
  {%- set versions_to = dbt_ivm.ivm_current_versions(plan | map(attribute='up') | list) -%}
  {%- do entry.update({'versions_to': versions_to, 'definition_hash': definition_hash, 'watch': plan | map(attribute='up') | list}) -%}
  {%- set full_reason = dbt_ivm._ivm_full_refresh_reason(existing, state, definition_hash) -%}
  {%- do dbt_ivm._ivm_check_versions(model.name, plan, none if full_reason else state.last_success.versions, versions_to) -%}
  {%- set position = {'state': state, 'versions_to': versions_to, 'full_reason': full_reason, 'unchanged': false,
                      'upstream_reason': none, 'drift_reason': none} -%}
  {%- if not full_reason -%}
    {%- do position.update({'upstream_reason': dbt_ivm._ivm_upstream_rebuild_reason(plan, versions_to),
        'drift_reason': dbt_ivm._ivm_schema_drift_reason(model.name, tokens, state.last_success.get('columns') or {}, upstream_columns)}) -%}
    {%- set moved = [] -%}
    {%- for p in plan if versions_to[p.up.name] != state.last_success.versions.get(p.up.name) -%}{%- do moved.append(p.up.name) -%}{%- endfor -%}
    {%- do position.update({'unchanged': not moved and state.repair is none and not interrupted
                                         and position.upstream_reason is none and position.drift_reason is none}) -%}
  {%- endif -%}
  {{ return(position) }}
{% endmacro %}

{#- Log a refresh that found nothing changed since the last successful one (the dbt 'main'
    statement). Taken without the lease, so its row must not count as state: its event is
    'noop:<refresh id>', which ivm_read_state skips. -#}
{% macro _ivm_log_unchanged(model, target, state, entry) %}
  {%- do entry.update({'status': 'success', 'path': 'no-op', 'reason': 'no upstream changes', 'event': 'noop',
                       'table_version': state.last_success.get('table_version'), 'changes_logged': true,
                       'versions_from': state.last_success.versions, 'rows_inserted': 0, 'rows_deleted': 0,
                       'columns': state.last_success.get('columns') or {},
                       'duration_s': dbt_ivm._ivm_seconds_since(entry.started_at)}) -%}
  {%- do dbt_ivm.ivm_log_refresh(model, target, entry, main=true) -%}
  {{ log('dbt_ivm: ' ~ model.name ~ ': no-op (no upstream changes)', info=true) }}
{% endmacro %}
