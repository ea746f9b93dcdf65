{#- The plan of a refresh: what the run does (no-op, full build, incremental refresh) and
    why, decided in one place from the refresh log, the upstream versions and the model. -#}

{#- What a refresh of a maintainable model works with: {plan (per upstream read: index, up,
    columns (those the query can read, see _ivm_set_columns), all_columns, referenced,
    read_at: the token where the SQL first reads it), template, spec (aggregates; none for joins), definition_hash,
    upstream_columns}. Records the row key and the upstream columns in entry. The columns
    of a Delta upstream read through its change feed stay none until the refresh needs
    them (see _ivm_columns_deferred). -#}
{% macro _ivm_refresh_inputs(model, analysis, upstreams, settings, entry) %}
  {%- set used = analysis.parsed.rels | map(attribute='upstream') | unique | sort -%}
  {%- set plan = [] -%}
  {%- set hidden = {} -%}
  {%- set referenced = dbt_ivm._ivm_referenced_names(analysis.parsed) -%}
  {%- for i in used -%}
    {%- set up = upstreams[i] -%}
    {%- do hidden.update({i: up.hidden}) -%}
    {%- set deferred = dbt_ivm._ivm_columns_deferred(up) -%}
    {%- set first = analysis.parsed.rels | selectattr('upstream', 'equalto', i) | first -%}
    {%- do plan.append({'index': i, 'up': up, 'columns': none, 'referenced': referenced, 'read_at': first.s}) -%}
    {%- if not deferred -%}{%- do dbt_ivm._ivm_set_columns(model, plan[-1]) -%}{%- endif -%}
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
  {%- elif analysis.shape == 'keyed' -%}
    {%- set no_hidden = {} -%}
    {%- for i in used -%}{%- do no_hidden.update({i: []}) -%}{%- endfor -%}
    {%- set template = dbt_ivm._ivm_rewrite_template(analysis.parsed, no_hidden) -%}
    {%- set spec = {'kind': 'keyed', 'key': analysis.keyed.key, 'terms': analysis.keyed.terms,
                    'pruned': analysis.keyed.pruned, 'pruned_reads': analysis.keyed.points | length} -%}
    {%- set row_key = analysis.keyed.row_key or [] -%}
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
  {%- do dbt_ivm._ivm_sign_columns(plan, upstream_columns) -%}
  {#- unique_key, whatever the path, is checked at every full build -#}
  {%- do entry.update({'row_key': row_key or none, 'columns': upstream_columns, 'check_unique': settings.unique_key}) -%}
  {%- set declarations = [] -%}
  {%- for p in plan -%}{%- do declarations.append([p.up.name, p.up.kind, p.up.unique_key, p.up.watermark, p.up.change_log | string]) -%}{%- endfor -%}
  {#- layout and comments do not change the definition: hash the significant tokens -#}
  {%- set tk = analysis.parsed.tk -%}
  {%- set words = [] -%}
  {%- for i in tk.significant -%}{%- do words.append(tk.tokens[i].text) -%}{%- endfor -%}
  {#- a changed table layout (partitions, format, properties, location) rebuilds the table -#}
  {%- set layout = tojson(settings.partition_by) ~ (' delta' if settings.file_format == 'delta' else '') ~
      (' ' ~ tojson(settings.tblproperties) if settings.tblproperties else '') ~
      (' ' ~ settings.location if settings.location else '') -%}
  {%- set contract = dbt_ivm._ivm_contract_signature(model) -%}
  {%- set layout = layout ~ (' contract ' ~ contract if contract else '') -%}
  {%- set definition_hash = local_md5(words | join(' ') ~ tojson(declarations) ~ layout) -%}
  {#- the equalities the query joins its upstreams on: a small change cuts the others by them -#}
  {%- set loose = [] -%}
  {%- set edges = dbt_ivm._ivm_join_edges(analysis.parsed, loose) if analysis.shape != 'keyed' else [] -%}
  {%- for p in plan if p.index in loose -%}{%- do p.update({'loose_join': true}) -%}{%- endfor -%}
  {{ return({'plan': plan, 'template': template, 'spec': spec, 'definition_hash': definition_hash,
             'upstream_columns': upstream_columns, 'edges': edges}) }}
{% endmacro %}

{#- {path: 'no-op' | 'full' | 'incremental', reason (why full, or none), lease (none for a
    no-op), state, versions_to}. A model that cannot be maintained (ivm_on_unsupported:
    full_rebuild) is rebuilt; otherwise the reasons to rebuild in full, in order: --full-refresh,
    first build, a dropped table, no state, an interrupted full build, a changed definition
    (_ivm_full_refresh_reason); an ivm upstream's history; an aggregate to repair after an
    interrupted refresh; a change feed that cannot be read; upstream columns that changed.
    Whether a change is too large to apply is known only once its size is (see
    _ivm_refresh_incremental). -#}
{% macro _ivm_plan_refresh(model, target, existing, analysis, inputs, settings, entry) %}
  {%- if inputs is none -%}
    {%- set lease = dbt_ivm.ivm_acquire_lease(model, target, entry.refresh_id, settings) -%}
    {%- do dbt_ivm._ivm_lease_in_entry(lease, [], entry) -%}
    {%- set codes = analysis.issues | map(attribute='code') | unique | join(', ') -%}
    {%- do entry.update({'table_version': dbt_ivm._ivm_table_stamp(entry.started_at, none)}) -%}
    {{ log('dbt_ivm: ' ~ model.name ~ ' cannot be maintained incrementally (' ~ codes ~
        '): rebuilding it in full as ivm_on_unsupported=full_rebuild asks', info=true) }}
    {{ return({'path': 'full', 'reason': 'not maintainable (' ~ codes ~ '); ivm_on_unsupported=full_rebuild',
               'lease': lease, 'state': none, 'versions_to': none}) }}
  {%- endif -%}
  {%- set plan = inputs.plan -%}
  {%- set position = dbt_ivm._ivm_read_position(model, existing, inputs, analysis.parsed.tk, entry) -%}
  {%- if position.unchanged -%}
    {#- nothing to do, and nothing that changes the state to log: no lease needed -#}
    {{ return({'path': 'no-op', 'reason': none, 'lease': none, 'state': position.state, 'versions_to': position.versions_to}) }}
  {%- endif -%}
  {#- one refresh of a table at a time: the table is written under the lease. Taking it at
      once from the generation the state's last success freed proves that state current -#}
  {%- set lease = dbt_ivm.ivm_acquire_lease(model, target, entry.refresh_id, settings,
      (position.state.last_success or {}).get('lease_generation')) -%}
  {%- do dbt_ivm._ivm_lease_in_entry(lease, plan, entry) -%}
  {%- if not lease.fresh -%}
    {#- another refresh ran while this one waited: read the state it left -#}
    {%- set position = dbt_ivm._ivm_read_position(model, existing, inputs, analysis.parsed.tk, entry) -%}
  {%- endif -%}
  {#- upstream versions are fixed from here: changes committed later wait for the next run -#}
  {%- set state, versions_to = position.state, position.versions_to -%}
  {#- under the lease, before this refresh logs anything: its model's history in one partition -#}
  {%- do dbt_ivm._ivm_compact_history(model, state, settings.compact_log_above, entry) -%}
  {%- set reason = position.full_reason or position.upstream_reason -%}
  {#- a keyed recompute re-applies by key, like a join; aggregate states cannot -#}
  {%- set aggregate_to_repair = inputs.spec is not none and inputs.spec.kind != 'keyed' and state.repair -%}
  {%- if not reason and aggregate_to_repair -%}
    {%- set reason = state.repair ~ ': rebuilding, as aggregate states cannot be re-applied by key' -%}
  {%- endif -%}
  {%- if not reason -%}
    {%- set reason = dbt_ivm._ivm_check_change_feeds(model, plan, state, versions_to, settings) -%}
  {%- endif -%}
  {%- set reason = reason or position.drift_reason -%}
  {{ return({'path': 'full' if reason else 'incremental', 'reason': reason or none, 'lease': lease, 'state': state,
             'versions_to': versions_to}) }}
{% endmacro %}

{#- The lease generation the refresh's 'success' row frees (entry.lease_generation): the
    refresh's last write, unless it drops stale diff snapshots after it (see
    _ivm_drop_stale_snapshots), in which case the materialization frees the lease after them. -#}
{% macro _ivm_lease_in_entry(lease, plan, entry) %}
  {%- set after_success = plan | map(attribute='up') | selectattr('feed', 'equalto', 'diff') | list -%}
  {%- do entry.update({'lease_generation': none if after_success else lease.generation}) -%}
{% endmacro %}

{#- The state of a refresh from the refresh log and the upstream versions it reads up to:
    {state, versions_to, full_reason (why rebuild, or none), upstream_reason (an ivm
    upstream's history forces a rebuild, or none), drift_reason (the upstream columns
    changed since the last refresh, or none), unchanged (nothing changed since the last
    successful refresh: a no-op)}. Updates entry (table_version, versions_to,
    definition_hash, watch). Reads only: it runs again when the lease was not taken at once. -#}
{% macro _ivm_read_position(model, existing, inputs, tokens, entry) %}
  {%- set plan, definition_hash, upstream_columns = inputs.plan, inputs.definition_hash, inputs.upstream_columns -%}
  {%- set upstreams = plan | map(attribute='up') | list -%}
  {#- the versions of ivm and diff upstreams are read against the stored ones, after the
      state; any others in the same query as the state -#}
  {%- if upstreams | selectattr('feed', 'in', ['ivm', 'diff']) | list -%}
    {%- set state, versions_to = dbt_ivm.ivm_read_state(model.unique_id), none -%}
  {%- else -%}
    {%- set read = dbt_ivm.ivm_read_state_and_versions(model.unique_id, upstreams) -%}
    {%- set state, versions_to = read.state, read.versions -%}
  {%- endif -%}
  {%- set interrupted = state.get('interrupted') is not none -%}
  {%- if config.get('file_format') == 'delta' and existing is not none and interrupted -%}
    {%- set exact = not dbt_ivm._ivm_read_ahead_upstreams(upstreams) -%}
    {%- set state = dbt_ivm._ivm_delta_resolve_interrupted(existing, state, exact) -%}
  {%- endif -%}
  {%- do entry.update({'table_version': dbt_ivm._ivm_table_stamp(entry.started_at, state)}) -%}
  {#- ivm upstreams stored as parquet: their refresh history since the stored version is read with the versions -#}
  {%- for p in plan if p.up.get('feed') == 'ivm' -%}
    {%- do p.up.update({'after': state.last_success.versions.get(p.up.name) if state.last_success else none, 'history': none}) -%}
  {%- endfor -%}
  {#- diff upstreams: compared with the snapshot of the stored version, when it exists and has the same columns -#}
  {%- for p in plan if p.up.get('feed') == 'diff' -%}
    {%- set after = state.last_success.versions.get(p.up.name) if state.last_success else none -%}
    {%- set stored = (state.last_success.get('columns') or {}).get(p.up.name) if state.last_success else none -%}
    {%- set snapshot = dbt_ivm._ivm_diff_snapshot(p.up, after) if after is not none else none -%}
    {%- set exists = snapshot is not none and adapter.get_relation(database=snapshot.database, schema=snapshot.schema,
        identifier=snapshot.identifier) is not none -%}
    {%- do p.up.update({'after': after, 'stamp': entry.table_version, 'diff_columns': p.columns, 'snapshot_missing': after is not none and not exists,
                        'diff_comparable': exists and stored == upstream_columns.get(p.up.name), 'captured': false}) -%}
  {%- endfor -%}
  {%- if versions_to is none -%}{%- set versions_to = dbt_ivm.ivm_current_versions(upstreams) -%}{%- endif -%}
  {%- do entry.update({'versions_to': versions_to, 'definition_hash': definition_hash, 'watch': upstreams}) -%}
  {%- set full_reason = dbt_ivm._ivm_full_refresh_reason(existing, state, definition_hash) -%}
  {%- do dbt_ivm._ivm_check_versions(model.name, plan, none if full_reason else state.last_success.versions, versions_to) -%}
  {%- set position = {'state': state, 'versions_to': versions_to, 'full_reason': full_reason, 'unchanged': false,
                      'upstream_reason': none, 'drift_reason': none} -%}
  {%- if not full_reason -%}
    {%- set upstream_reason = dbt_ivm._ivm_upstream_rebuild_reason(plan, versions_to) -%}
    {%- set moved = [] -%}
    {%- for p in plan if versions_to[p.up.name] != state.last_success.versions.get(p.up.name) -%}{%- do moved.append(p.up.name) -%}{%- endfor -%}
    {%- set quiet = not moved and state.repair is none and not interrupted and upstream_reason is none -%}
    {#- a refresh that writes needs every upstream's columns, and their drift -#}
    {%- if not quiet -%}{%- do dbt_ivm._ivm_read_deferred_columns(model, plan, upstream_columns, tokens) -%}{%- endif -%}
    {%- set drift_reason = dbt_ivm._ivm_schema_drift_reason(model.name, tokens, state.last_success.get('columns') or {}, upstream_columns) -%}
    {%- do position.update({'upstream_reason': upstream_reason, 'drift_reason': drift_reason, 'unchanged': quiet and drift_reason is none}) -%}
  {%- endif -%}
  {%- if not position.unchanged -%}{%- do dbt_ivm._ivm_read_deferred_columns(model, plan, upstream_columns, tokens) -%}{%- endif -%}
  {{ return(position) }}
{% endmacro %}

{#- Whether the columns of an upstream are read only when the refresh is not a no-op: a
    Delta table read through its change feed whose catalog entry holds no columns (a
    DESCRIBE each), where an unchanged version means unchanged columns too (a schema change
    is a commit). Its existence is known from the listing of the model's sources. -#}
{% macro _ivm_columns_deferred(up) %}
  {{ return(up.get('feed') == 'delta' and not up.get('described_columns') and dbt_ivm._ivm_listed(up, up.relation) is not none) }}
{% endmacro %}

{#- Read the columns _ivm_columns_deferred left unread into the plan and upstream_columns
    (the same dict as the entry's columns); none left unread makes it a no-op. -#}
{% macro _ivm_read_deferred_columns(model, plan, upstream_columns, tokens) %}
  {%- for p in plan if p.columns is none -%}
    {#- described, not only its columns read: a refresh that reads its change feed checks its properties too -#}
    {%- set described = dbt_ivm._ivm_describe_upstream(p.up) -%}
    {%- if p.up.get('feed_unverified') -%}{%- do dbt_ivm._ivm_check_detected_feed(model, p, described, tokens) -%}{%- endif -%}
    {%- do dbt_ivm._ivm_set_columns(model, p) -%}
  {%- endfor -%}
  {%- do dbt_ivm._ivm_sign_columns(plan, upstream_columns) -%}
{% endmacro %}

{#- Record in upstream_columns the signature of each upstream whose columns the plan holds
    (all of them: a change of any column rebuilds, as it always has). -#}
{% macro _ivm_sign_columns(plan, upstream_columns) %}
  {%- for p in plan if p.columns is not none -%}
    {%- do upstream_columns.update({p.up.name: dbt_ivm._ivm_columns_signature(p.all_columns)}) -%}
  {%- endfor -%}
{% endmacro %}

{#- Set p.all_columns (the upstream's, checked) and p.columns, those the query can read
    (p.referenced, see _ivm_referenced_names) with the row key and watermark: every read of
    the upstream in a refresh selects only these, so its change nets over them and an update
    of other columns alone is no change at all. -#}
{% macro _ivm_set_columns(model, p) %}
  {%- set columns = dbt_ivm._ivm_checked_columns(model, p.up) -%}
  {%- set keep = (p.up.unique_key or []) | map('lower') | list + ([p.up.watermark | lower] if p.up.watermark else []) -%}
  {%- set used = [] -%}
  {%- for c in columns if p.referenced is none or c.name | lower in p.referenced or c.name | lower in keep -%}
    {%- do used.append(c) -%}
  {%- endfor -%}
  {%- do p.update({'all_columns': columns, 'columns': used}) -%}
{% endmacro %}

{#- The names a query can read columns by: every identifier in its text, lower case (a
    superset: table names and aliases too, whatever the scope). none when it reads whole
    rows: a `*` that is neither count(*) nor a product, or a NATURAL join. -#}
{% macro _ivm_referenced_names(parsed) %}
  {%- set toks = parsed.tk.tokens -%}
  {%- set sig = parsed.tk.significant -%}
  {%- set names = [] -%}
  {%- for j in range(sig | length) -%}
    {%- set t = toks[sig[j]] -%}
    {%- if t.kind in ('word', 'qid') -%}
      {%- if t.word == 'natural' -%}{{ return(none) }}{%- endif -%}
      {%- do names.append(t.lower) -%}
    {%- elif t.text == '*' -%}
      {%- set prev = toks[sig[j - 1]] if j > 0 else none -%}
      {%- set counted = prev is not none and prev.text == '(' and j > 1 and toks[sig[j - 2]].word == 'count' -%}
      {%- set product = prev is not none and (prev.text == ')' or prev.kind == 'num'
          or (prev.kind in ('word', 'qid') and prev.word not in ('select', 'distinct', 'all'))) -%}
      {%- if not (counted or product) -%}{{ return(none) }}{%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(names | unique | list) }}
{% endmacro %}

{% macro _ivm_full_refresh_reason(existing, state, definition_hash) %}
  {%- if should_full_refresh() -%}{{ return('--full-refresh requested') }}{%- endif -%}
  {%- if existing is none -%}
    {{ return('first build' if state.last_success is none else 'the table was dropped outside dbt_ivm after its last refresh') }}
  {%- endif -%}
  {%- if existing.type != 'table' -%}{{ return('replacing a ' ~ existing.type) }}{%- endif -%}
  {%- if state.last_success is none -%}{{ return('no refresh recorded for this table') }}{%- endif -%}
  {%- if state.get('resume_full') -%}{{ return('the full build of refresh ' ~ state.resume_full ~ ' was interrupted: doing it again') }}{%- endif -%}
  {%- if state.last_success.definition_hash != definition_hash -%}
    {{ return('model SQL, upstream declarations or table configs changed') }}
  {%- endif -%}
  {{ return(none) }}
{% endmacro %}
