{#- materialized='ivm': the first run builds the table; later runs apply only the upstream
    changes since the versions recorded by the last successful refresh. Validate, plan,
    run the plan's path, log (the refresh log rows are written by the paths). -#}
{% materialization ivm, adapter='spark' %}
  {%- set started_at = modules.datetime.datetime.utcnow() -%}
  {%- set identifier = model['alias'] -%}
  {%- set target_relation = api.Relation.create(identifier=identifier, schema=schema, database=database, type='table') -%}
  {%- set existing = adapter.get_relation(database=database, schema=schema, identifier=identifier) -%}

  {#- validate: settings, upstream declarations, the SQL -#}
  {%- set settings = dbt_ivm._ivm_model_settings(model) -%}
  {%- do dbt_ivm._ivm_check_grants(model) -%}
  {#- --empty / --sample: dbt rendered the upstreams as subqueries that hide rows; the
      definition is checked with them as written, and nothing is refreshed or recorded -#}
  {%- set hidden = dbt_ivm._ivm_hidden_upstream_rows(model, sql) -%}
  {#- a model rebuilt when it cannot be maintained finds the feeds before its analysis -#}
  {%- set upstreams = dbt_ivm.ivm_detect_change_feeds(model, dbt_ivm.ivm_upstreams(model), settings.on_unsupported != 'full_rebuild',
      hidden is not none) -%}
  {%- set analysis = dbt_ivm.ivm_analyze(hidden.definition_sql if hidden else sql, upstreams, settings.unique_key) -%}
  {%- if analysis.issues and settings.on_unsupported != 'full_rebuild' -%}
    {{ exceptions.raise_compiler_error(dbt_ivm._ivm_format_issues(model.name, analysis.issues)) }}
  {%- endif -%}
  {%- if hidden -%}
    {{ return(dbt_ivm._ivm_run_with_hidden_rows(model, target_relation, existing, sql, hidden)) }}
  {%- endif -%}
  {#- a parquet table that ivm models read writes its own change log -#}
  {%- set writes_log = dbt_ivm._ivm_writes_change_log(model, settings) -%}
  {%- do settings.update({'change_log': dbt_ivm._ivm_change_log_relation(target_relation) if writes_log else none}) -%}
  {%- set entry = {'refresh_id': invocation_id ~ ':' ~ model.unique_id, 'started_at': started_at} -%}
  {%- set inputs = none if analysis.issues else dbt_ivm._ivm_refresh_inputs(model, analysis, upstreams, settings, entry) -%}

  {#- with the package's hooks off (var dbt_ivm_hooks) nothing has created the refresh log and its schema -#}
  {%- if not var('dbt_ivm_hooks', true) -%}{%- do dbt_ivm.ivm_ensure_refresh_log() -%}{%- endif -%}
  {#- plan: no-op, full build or incremental refresh, and why; takes the lease unless a no-op -#}
  {%- set refresh = dbt_ivm._ivm_plan_refresh(model, target_relation, existing, analysis, inputs, settings, entry) -%}
  {%- if refresh.path != 'no-op' and inputs is not none -%}
    {%- do dbt_ivm._ivm_capture_diffs(model, inputs.plan, refresh.versions_to, entry) -%}
  {%- endif -%}
  {{ run_hooks(pre_hooks) }}

  {#- execute -#}
  {%- if refresh.path == 'no-op' -%}
    {%- do dbt_ivm._ivm_log_unchanged(model, entry) -%}
  {%- else -%}
    {%- set full_reason = refresh.reason -%}
    {%- if refresh.path == 'incremental' -%}
      {#- none, or why this change is better rebuilt (its size) -#}
      {#- the table as the lease's read-back listed it, unless a pre-hook may have changed it since -#}
      {%- set listed = refresh.lease.get('listed') if not pre_hooks else none -%}
      {%- set full_reason = dbt_ivm._ivm_refresh_incremental(model, target_relation, inputs, refresh.state, settings, entry,
          listed) -%}
    {%- endif -%}
    {%- if full_reason -%}
      {%- do dbt_ivm._ivm_refresh_full(target_relation, existing, sql, analysis, inputs, refresh.versions_to, full_reason,
          settings, entry) -%}
    {%- endif -%}
    {%- if inputs is not none -%}{%- do dbt_ivm._ivm_drop_stale_snapshots(inputs.plan, refresh.versions_to) -%}{%- endif -%}
    {#- the 'success' row freed the lease, unless work followed it -#}
    {%- if entry.lease_generation is none -%}
      {%- do dbt_ivm._ivm_free_lease(refresh.lease.prefix, refresh.lease.generation, entry.refresh_id) -%}
    {%- endif -%}
  {%- endif -%}
  {%- do dbt_ivm._ivm_apply_grants(target_relation, existing, entry.path == 'full') -%}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}

{#- The full path: the model SQL (a model that cannot be maintained) or the refresh
    template over upstream snapshots at the versions read up to. -#}
{% macro _ivm_refresh_full(target, existing, sql, analysis, inputs, versions_to, reason, settings, entry) %}
  {%- do dbt_ivm._ivm_check_contract(model, sql) -%}
  {%- set build_sql = sql -%}
  {%- if inputs is not none -%}
    {%- set relations = {} -%}
    {%- for p in inputs.plan -%}
      {%- do relations.update({p.index: dbt_ivm.ivm_snapshot_sql(p.up, p.columns, versions_to[p.up.name])}) -%}
    {%- endfor -%}
    {%- set build_sql = dbt_ivm._ivm_fill_relations(inputs.template, relations) -%}
  {%- endif -%}
  {%- do entry.update({'path': 'full', 'reason': reason}) -%}
  {#- a refresh of this shape deletes rows by key (see _ivm_build_full) -#}
  {%- do settings.update({'row_level': analysis.shape in ('join_only', 'keyed')}) -%}
  {%- set definition = dbt_ivm._ivm_checked_definition(analysis.parsed, sql, settings.file_format) -%}
  {#- on parquet the build counts the upstreams too, unless this run's change count just did:
      the next refresh's cost estimate may then choose a rebuild before it computes the change -#}
  {%- set sized = [] -%}
  {%- if inputs is not none and settings.rebuild_above and settings.file_format != 'delta' and not entry.get('sizes') -%}
    {%- for p in inputs.plan -%}{%- do sized.append(dbt_ivm._ivm_row_count_pair(p.up.name, p.up.relation)) -%}{%- endfor -%}
  {%- endif -%}
  {%- do dbt_ivm._ivm_build_full(target, existing, build_sql, definition, settings, entry, sized) -%}
{% endmacro %}

{#- {why, short, definition_sql} when this run would read upstream rows hidden: dbt renders
    some upstream as a subquery that hides rows (--empty: `where false limit 0`; --sample:
    an event-time filter), or an upstream ivm model is still a view (such a run left it, or
    its first ivm run is still to come). Else none. definition_sql: the model's SQL with
    each such rendering replaced by the plain relation, as every other run renders it. -#}
{% macro _ivm_hidden_upstream_rows(model, sql) %}
  {%- set ns = namespace(sql=sql, flag=none, view=none) -%}
  {%- for uid in model.depends_on.nodes -%}
    {%- set node = graph.nodes.get(uid) or graph.sources.get(uid) -%}
    {%- if node is none or node.resource_type not in ('model', 'seed', 'source', 'snapshot') -%}{%- continue -%}{%- endif -%}
    {%- if node.resource_type == 'source' -%}
      {%- set relation = source(node.source_name, node.name) -%}
    {%- elif node.get('version') is not none -%}
      {%- set relation = ref(node.package_name, node.name, v=node.version) -%}
    {%- else -%}
      {%- set relation = ref(node.package_name, node.name) -%}
    {%- endif -%}
    {%- set rendered = relation | string -%}
    {%- if rendered != relation.render() -%}
      {%- set ns.flag = '--empty' if flags.EMPTY else '--sample' -%}
      {%- set ns.sql = ns.sql.replace(rendered, relation.render()) -%}
    {%- elif node.resource_type == 'model' and node.config.get('materialized') == 'ivm' and ns.view is none -%}
      {%- set found = adapter.get_relation(database=relation.database, schema=relation.schema, identifier=relation.identifier) -%}
      {%- if found is not none and found.type == 'view' -%}{%- set ns.view = node.name -%}{%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if ns.flag -%}
    {{ return({'why': ns.flag ~ ' hides upstream rows', 'short': ns.flag, 'definition_sql': ns.sql}) }}
  {%- elif ns.view -%}
    {{ return({'why': 'upstream ' ~ ns.view ~ ' is a view, not yet its ivm table (an --empty or --sample run left it, or its '
               'first ivm run is still to come)', 'short': 'upstream ' ~ ns.view ~ ' is a view', 'definition_sql': ns.sql}) }}
  {%- endif -%}
  {{ return(none) }}
{% endmacro %}

{#- A run that would read upstream rows hidden (see _ivm_hidden_upstream_rows) must not
    become the table's state: an ivm table holds the whole definition, and later runs apply
    only the changes since the versions its state records. A missing table (or the view an
    earlier such run left) becomes a view of the model's SQL as this run renders it, so that
    models built after it in the same run can read its columns; the next run that reads
    whole upstreams replaces it with the table ('replacing a view'). An existing table is
    left as it is, as dbt's incremental models are: that next run refreshes it. Nothing is
    logged to the refresh log and no lease is taken. -#}
{% macro _ivm_run_with_hidden_rows(model, target, existing, sql, hidden) %}
  {%- set started_at = modules.datetime.datetime.utcnow() -%}
  {{ run_hooks(pre_hooks) }}
  {#- dbt's CREATE VIEW checks an enforced contract itself -#}
  {%- if existing is none or existing.type == 'view' -%}
    {%- set view = target.incorporate(type='view') -%}
    {%- call statement('main') -%}{{ get_create_view_as_sql(view, sql) }}{%- endcall -%}
    {%- do dbt_ivm._ivm_apply_grants(view, existing, true) -%}
    {{ log('dbt_ivm: ' ~ model.name ~ ': ' ~ hidden.why ~ ': created ' ~ view ~ ' as a view of the model SQL, recording no '
        'state; the next run that reads whole upstreams builds the table in full', info=true) }}
    {{ run_hooks(post_hooks) }}
    {{ return({'relations': [view]}) }}
  {%- endif -%}
  {%- do dbt_ivm._ivm_check_contract(model, sql) -%}
  {%- do store_raw_result('main', message='left as it is (' ~ hidden.short ~ ')', code=none, rows_affected=none, agate_table=none) -%}
  {{ log('dbt_ivm: ' ~ model.name ~ ': ' ~ hidden.why ~ ': left ' ~ existing ~ ' as it is, recording no state (the next run '
      'that reads whole upstreams refreshes it) in ' ~ dbt_ivm._ivm_seconds_since(started_at) ~ ' s', info=true) }}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target]}) }}
{% endmacro %}

{#- A refresh that found nothing changed since the last successful one: nothing to write
    (its state read was dbt's 'main' statement), a line in dbt's log, and a run result that
    says no-op. -#}
{% macro _ivm_log_unchanged(model, entry) %}
  {{ log('dbt_ivm: ' ~ model.name ~ ': no-op (no upstream changes) in ' ~ dbt_ivm._ivm_seconds_since(entry.started_at) ~ ' s', info=true) }}
  {%- do dbt_ivm._ivm_report_noop() -%}
{% endmacro %}

{#- The message of a no-op's run result: dbt prints it on the model's line ([no-op in 0.9s]),
    and ivm_on_run_end skips the lease housekeeping of a run of no-ops. -#}
{% macro _ivm_noop_message() %}
  {{ return('no-op') }}
{% endmacro %}

{#- Restate dbt's 'main' result (the statement that ran as 'main', its rows kept) as a no-op's. -#}
{% macro _ivm_report_noop() %}
  {%- set main = load_result('main') -%}
  {#- code and rows_affected given: dbt's defaults for them are typing objects, which its run results cannot serialise -#}
  {%- do store_raw_result('main', message=dbt_ivm._ivm_noop_message(), code=none, rows_affected=none,
      agate_table=main.table if main else none) -%}
{% endmacro %}
