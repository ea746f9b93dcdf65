{#- Staging: the change SQL of a refresh cached as temporary views, counted where a path needs the counts. -#}

{#- Join-only view: DEL the changed slices by key, INS the query on the new slices.
    count_deleted: count the rows a rewrite deletes, in the query that counts the inserted
    ones (a partitioned table counts them per partition when it applies).
    Returns {insert_view, rows_inserted, rows_deleted (none when not counted), predicates,
    rewrite, reason, reads_upstreams}. -#}
{% macro _ivm_stage_join_changes(target, template, plan, state, scratch, temp_views, rewrite, count_deleted) %}
  {%- set insert_view = scratch.ins -%}
  {%- set insert_sql = dbt_ivm.ivm_join_insert_sql(template, plan) -%}
  {%- if insert_sql -%}
    {%- do temp_views.append(insert_view) -%}
    {%- do dbt_ivm._ivm_cache_view(insert_view, insert_sql, scratch) -%}
    {%- set counts = ['(select count(*) from ' ~ insert_view ~ ')'] -%}
  {%- else -%}
    {%- set insert_view = '(select * from ' ~ target ~ ' where false)' -%}
    {%- set counts = ['0L'] -%}
  {%- endif -%}
  {%- set predicates = dbt_ivm._ivm_join_delete_predicates(plan, '__ivm_v', state.repair is not none) if rewrite else none -%}
  {%- if rewrite and count_deleted -%}
    {%- do counts.append('(select count(*) from ' ~ target ~ ' __ivm_v ' ~ predicates.joins | join(' ') ~ ' where ' ~ predicates.flag ~ ')') -%}
  {%- endif -%}
  {%- set counted = run_query('select ' ~ counts | join(', ')).rows[0] if insert_sql or counts | length > 1 else [0] -%}
  {{ return({'insert_view': insert_view, 'rows_inserted': counted[0], 'rows_deleted': counted[1] if counts | length > 1 else none,
             'rewrite': rewrite, 'predicates': predicates,
             'reason': 'deletes or updates: rewrite' if rewrite else 'insert-only: append', 'reads_upstreams': true}) }}
{% endmacro %}

{#- Aggregate or DISTINCT view: merge signed per-group deltas into the stored states, or
    recompute the affected groups from the definition where a state cannot absorb the
    change (min/max after deletes or updates, HAVING, other aggregates). -#}
{% macro _ivm_stage_aggregate_changes(spec, target, target_columns, plan, scratch, temp_views, has_deletes, partitioned) %}
  {#- the select list's output names in query order: a partitioned table keeps its
      partition columns last, its definition view keeps the query's order -#}
  {%- set named = adapter.get_columns_in_relation(dbt_ivm._ivm_definition_view(target)) if partitioned else target_columns -%}
  {%- set visible = [] -%}
  {%- for c in named if not c.name.startswith('__ivm_') -%}{%- do visible.append(c.name) -%}{%- endfor -%}
  {%- set keys = dbt_ivm._ivm_aggregate_keys(spec, visible) -%}
  {%- set names = dbt_ivm._ivm_aggregate_change_names(spec, visible) -%}
  {%- set terms = dbt_ivm._ivm_signed_change_terms(spec.delta, plan) -%}
  {%- set refresh = spec.refresh['any' if has_deletes else 'inserts'] -%}
  {%- set insert_view = scratch.ins -%}
  {%- set multi = plan | length > 1 -%}
  {%- if refresh == 'merge' -%}
    {%- set merged_view = scratch.merged -%}
    {%- do temp_views.append(merged_view) -%}
    {%- set change_sql = dbt_ivm.ivm_aggregate_change_sql(spec, names, keys, terms) -%}
    {%- do dbt_ivm._ivm_cache_view(merged_view, dbt_ivm.ivm_aggregate_merge_sql(spec, target, target_columns, change_sql, keys, visible),
        scratch) -%}
    {%- set kept = '__ivm_count > 0' if keys else 'true' -%}
    {%- set counts = run_query('select count(*), count_if(' ~ kept ~ '), count_if(__ivm_existed) from ' ~ merged_view).rows[0] -%}
    {%- set insert_view = '(select * from ' ~ merged_view ~ ' where ' ~ kept ~ ')' -%}
    {%- if spec.kind == 'distinct' -%}
      {%- set what = 'row multiplicities' -%}
    {%- else -%}
      {%- set what = 'signed count/sum deltas' if has_deletes else ('counts/sums and '
          'least/greatest' if spec.states | selectattr('merge', 'ne', 'add') | list else 'counts/sums') -%}
    {%- endif -%}
    {%- set reason = ('deletes or updates' if has_deletes else 'insert-only') ~ ': merged ' ~ what ~ ' into ' ~ counts[0] ~ ' group(s)' -%}
    {%- set predicates = dbt_ivm._ivm_group_delete_predicates(merged_view, keys, '__ivm_v') -%}
    {%- set delta_apply = {'kind': 'merge', 'merged_view': merged_view, 'keys': keys} -%}
  {%- else -%}
    {%- set affected_view = scratch.groups -%}
    {%- do temp_views.append(affected_view) -%}
    {%- do dbt_ivm._ivm_cache_view(affected_view, dbt_ivm._ivm_affected_groups_sql(spec, names, keys, terms), scratch) -%}
    {%- set relations = {} -%}
    {%- for p in plan -%}{%- do relations.update({p.index: dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p.to)}) -%}{%- endfor -%}
    {%- do temp_views.append(insert_view) -%}
    {%- do dbt_ivm._ivm_cache_view(insert_view, dbt_ivm._ivm_aggregate_recompute_sql(dbt_ivm._ivm_fill_relations(spec.full,
        relations), affected_view, keys), scratch) -%}
    {%- set predicates = dbt_ivm._ivm_group_delete_predicates(affected_view, keys, '__ivm_v') -%}
    {%- set counts = run_query('select (select count(*) from ' ~ affected_view ~ '), (select count(*) from ' ~ insert_view ~
        '), (select count(*) from ' ~ target ~ ' __ivm_v ' ~ predicates.joins | join(' ') ~ ' where ' ~ predicates.flag ~ ')').rows[0] -%}
    {%- set why = 'min/max after deletes or updates' if spec.refresh.inserts == 'merge' else 'HAVING or an aggregate without a mergeable state' -%}
    {%- set reason = why ~ ': recomputed ' ~ counts[0] ~ ' affected group(s) from the definition' -%}
    {%- set multi = true -%}
    {%- set delta_apply = {'kind': 'recompute', 'affected_view': affected_view, 'keys': keys} -%}
  {%- endif -%}
  {{ return({'insert_view': insert_view, 'rows_inserted': counts[1], 'rows_deleted': counts[2], 'rewrite': true,
             'predicates': predicates, 'reason': reason, 'reads_upstreams': multi, 'delta': delta_apply}) }}
{% endmacro %}

{#- Keyed recompute (macros/analysis/keyed.sql): the slices the change touches, from one key
    term per occurrence of a changed upstream, are deleted and recomputed from the
    definition at the fixed versions, restricted to their keys. -#}
{% macro _ivm_stage_keyed_changes(spec, target, plan, scratch, temp_views, file_format) %}
  {%- set key = spec.key -%}
  {%- set by_index = {} -%}
  {%- for p in plan -%}{%- do by_index.update({p.index: p}) -%}{%- endfor -%}
  {%- set parts = [] -%}
  {%- for term in spec.terms if by_index[term.upstream].changed -%}
    {%- set relations = {} -%}
    {%- for q in plan -%}
      {%- set current = dbt_ivm.ivm_snapshot_sql(q.up, q.columns, q.to) -%}
      {%- if q.changed and q.old > 0 -%}
        {%- set current = '(select * from ' ~ current ~ ' __ivm_c union all select * from ' ~ dbt_ivm._ivm_old_images_sql(q) ~ ' __ivm_o)' -%}
      {%- endif -%}
      {%- do relations.update({q.index: current}) -%}
    {%- endfor -%}
    {%- set p = by_index[term.upstream] -%}
    {%- set images = [dbt_ivm._ivm_new_images_sql(p)] + ([dbt_ivm._ivm_old_images_sql(p)] if p.old > 0 else []) -%}
    {%- set changed_rows = '(select * from ' ~ images | join(' __ivm_i union all select * from ') ~ ' __ivm_i)' -%}
    {%- do parts.append(dbt_ivm._ivm_fill_relations(term.sql.replace('__IVM_DELTA__', changed_rows), relations)) -%}
  {%- endfor -%}
  {#- the affected keys are written to a scratch table, not cached: a cached view whose query
      has a WITH makes Spark miss the cache of a view read after it in the same statement,
      and the recompute would then evaluate every key term again -#}
  {%- set affected_view = scratch.affected_keys -%}
  {%- do dbt_ivm._ivm_clear_scratch(scratch) -%}
  {%- do temp_views.append(affected_view) -%}
  {%- do run_query('create table ' ~ affected_view ~ ' using ' ~ file_format ~ ' as select distinct * from (\n' ~ parts | join('\nunion all\n')
      ~ '\n) __ivm_a') -%}
  {%- set relations = {} -%}
  {%- for p in plan -%}{%- do relations.update({p.index: dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p.to)}) -%}{%- endfor -%}
  {%- set insert_view = scratch.ins -%}
  {%- do temp_views.append(insert_view) -%}
  {#- the definition with the reads that hold only the affected slices' rows pruned to them -#}
  {%- set pruned = dbt_ivm._ivm_fill_relations(spec.pruned.replace('__IVM_KEYS__', affected_view), relations) -%}
  {%- do dbt_ivm._ivm_cache_view(insert_view, dbt_ivm._ivm_aggregate_recompute_sql(pruned, affected_view, key), scratch) -%}
  {%- set predicates = dbt_ivm._ivm_group_delete_predicates(affected_view, key, '__ivm_v') -%}
  {%- set counts = run_query('select (select count(*) from ' ~ affected_view ~ '), (select count(*) from ' ~ insert_view ~
      '), (select count(*) from ' ~ target ~ ' __ivm_v ' ~ predicates.joins | join(' ') ~ ' where ' ~ predicates.flag ~ ')').rows[0] -%}
  {%- set reason = 'keyed: recomputed ' ~ counts[0] ~ ' affected slice(s) of ' ~ key | join(', ') ~ ' from the definition'
      ~ (', reads of ' ~ spec.pruned_reads ~ ' upstream occurrence(s) pruned to them' if spec.pruned_reads else '') -%}
  {{ return({'insert_view': insert_view, 'rows_inserted': counts[1], 'rows_deleted': counts[2], 'rewrite': true,
             'predicates': predicates, 'reason': reason, 'reads_upstreams': true,
             'delta': {'kind': 'slices', 'affected_view': affected_view, 'keys': key}}) }}
{% endmacro %}

{#- The temporary views and the scratch table a refresh of target may create, by role: chg
    (per upstream short name: its netted changes), merged, groups, affected_keys (a table,
    schema.name), ins; cleared: whether _ivm_clear_scratch ran. -#}
{% macro _ivm_scratch_names(target, plan) %}
  {%- set prefix = '__ivm_' ~ modules.re.sub('[^A-Za-z0-9_]', '_', target.identifier) -%}
  {%- set chg = {} -%}
  {%- for p in plan -%}{%- do chg.update({p.up.short: prefix ~ '_chg_' ~ p.up.short}) -%}{%- endfor -%}
  {{ return({'schema': target.schema, 'chg': chg, 'merged': prefix ~ '_merged', 'groups': prefix ~ '_groups',
             'affected_keys': api.Relation.create(database=target.database, schema=target.schema,
                 identifier='__ivm_keys__' ~ target.identifier, type='table') | string,
             'ins': prefix ~ '_ins', 'cleared': false}) }}
{% endmacro %}

{#- Before a refresh creates its first temporary view or scratch table: drop the ones a
    refresh of this model that failed earlier left (a temporary view lives as long as the
    Spark session, a table until dropped), found with one SHOW TABLES (it lists temporary
    views too) instead of a DROP ... IF EXISTS per name. -#}
{% macro _ivm_clear_scratch(scratch) %}
  {%- if not scratch.cleared -%}
    {%- set names = (scratch.chg.values() | list) + [scratch.merged, scratch.groups, scratch.affected_keys, scratch.ins] -%}
    {%- set bare = [] -%}
    {%- for n in names -%}{%- do bare.append(n.split('.')[-1] | lower) -%}{%- endfor -%}
    {%- set found = [] -%}
    {%- for r in run_query("show tables in " ~ scratch.schema ~ " like '" ~ bare | join('|') ~ "'").rows -%}
      {%- do found.append(r[1] | lower) -%}
    {%- endfor -%}
    {%- set left = [] -%}
    {%- for n in names -%}{%- if bare[loop.index0] in found -%}{%- do left.append(n) -%}{%- endif -%}{%- endfor -%}
    {%- do dbt_ivm._ivm_drop_temp_views(left) -%}
    {%- do scratch.update({'cleared': true}) -%}
  {%- endif -%}
{% endmacro %}

{#- Cache a query as a temporary view (one of scratch, see _ivm_clear_scratch). Lazy: the
    first query that reads the view (each refresh counts its rows next) computes and caches
    it in the same Spark job, instead of one job to cache and another to count. -#}
{% macro _ivm_cache_view(name, sql, scratch) %}
  {%- do dbt_ivm._ivm_clear_scratch(scratch) -%}
  {%- do run_query('cache lazy table ' ~ name ~ ' as ' ~ sql) -%}
{% endmacro %}

{#- Dropping a cached temporary view also uncaches it. Newest first: uncaching resolves
    the view, so the views it reads must still exist. A qualified name (schema.name) is a
    scratch table of the refresh. -#}
{% macro _ivm_drop_temp_views(names) %}
  {%- for name in names | reverse -%}
    {%- do run_query('drop ' ~ ('table' if '.' in name else 'view') ~ ' if exists ' ~ name) -%}
  {%- endfor -%}
{% endmacro %}
