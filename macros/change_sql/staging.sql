{#- Staging: the SQL of a refresh's change, over the netted change sets read inline (no
    cached views and no counting pass: the apply statement reads the change data itself,
    and a Delta MERGE returns its row counts). Two paths compute once what several parts of
    the apply read: the keyed path its affected keys, and on parquet an aggregate its merged
    groups (or the affected ones), which the rewrite, the rows it replaces and the refresh
    log's counts would otherwise each compute from the change terms. Affected keys that are
    few come back as a VALUES list in the SQL (_ivm_affected_keys), merged groups as listed
    rows (_ivm_listed_groups); the rest go to a small scratch table. A stage is {insert_view (a relation in FROM: the rows to insert), rewrite (rows
    are deleted), predicates (how to find the deleted rows in the table, see
    _ivm_join_delete_predicates), reason, reads_upstreams, delta (what the Delta apply
    needs), scratch (the scratch table it wrote, or none), counts (SQL of
    rows_deleted and rows_inserted for the refresh log row, when the stage knows them)}. -#}

{#- Join-only view: DEL the changed slices by key, INS the query on the new slices. -#}
{% macro _ivm_stage_join_changes(target, template, plan, state, rewrite, edges=[]) %}
  {%- set insert_sql = dbt_ivm.ivm_join_insert_sql(template, plan, edges) -%}
  {%- set insert_view = ('(' ~ insert_sql ~ ')') if insert_sql else '(select * from ' ~ target ~ ' where false)' -%}
  {%- set predicates = dbt_ivm._ivm_join_delete_predicates(plan, '__ivm_v', state.repair is not none) if rewrite else none -%}
  {{ return({'insert_view': insert_view, 'rewrite': rewrite, 'predicates': predicates, 'inserts': insert_sql | length > 0,
             'reason': 'deletes or updates: rewrite' if rewrite else 'insert-only: append', 'reads_upstreams': true,
             'delta': {'kind': 'join'}}) }}
{% endmacro %}

{#- Aggregate or DISTINCT view: merge signed per-group deltas into the stored states, or
    recompute the affected groups from the definition where a state cannot absorb the
    change (min/max after deletes or updates, HAVING, other aggregates). -#}
{% macro _ivm_stage_aggregate_changes(spec, target, target_columns, plan, has_deletes, partitioned, edges=[], use_scratch=false,
                                      few=false, changed_rows=none) %}
  {#- the select list's output names in query order: a partitioned table keeps its
      partition columns last, its definition view keeps the query's order -#}
  {%- set named = adapter.get_columns_in_relation(dbt_ivm._ivm_definition_view(target)) if partitioned else target_columns -%}
  {%- set visible = [] -%}
  {%- for c in named if not c.name.startswith('__ivm_') -%}{%- do visible.append(c.name) -%}{%- endfor -%}
  {%- set keys = dbt_ivm._ivm_aggregate_keys(spec, visible) -%}
  {%- set names = dbt_ivm._ivm_aggregate_change_names(spec, visible) -%}
  {%- set terms = dbt_ivm._ivm_signed_change_terms(spec.delta, plan, edges, spec.sign_of) -%}
  {%- set refresh = spec.refresh['any' if has_deletes else 'inserts'] -%}
  {%- set scratch = none -%}
  {%- set counts = {} -%}
  {%- if refresh == 'merge' -%}
    {%- set change_sql = dbt_ivm.ivm_aggregate_change_sql(spec, names, keys, terms) -%}
    {%- set merged_view = '(' ~ dbt_ivm.ivm_aggregate_merge_sql(spec, target, target_columns, change_sql, keys, visible) ~ ')' -%}
    {%- set kept = '__ivm_count > 0' if keys else 'true' -%}
    {%- if use_scratch -%}
      {#- the merged groups computed once: the rewrite, the rows it replaces and the counts of
          the refresh log read them as listed rows or from the scratch table instead of
          evaluating the change terms each -#}
      {%- set listed = dbt_ivm._ivm_listed_groups(merged_view, target_columns, changed_rows) -%}
      {%- set scratch = none if listed else dbt_ivm._ivm_write_scratch(target, merged_view) -%}
      {%- set merged_view = listed or scratch -%}
      {%- set counts = {'rows_deleted': '(select count_if(__ivm_existed) from ' ~ merged_view ~ ' __ivm_g)',
                        'rows_inserted': '(select count_if(' ~ kept ~ ') from ' ~ merged_view ~ ' __ivm_g)'} -%}
      {%- set change_sql = 'select * from ' ~ merged_view ~ ' __ivm_g' -%}
    {%- endif -%}
    {%- set insert_view = '(select * from ' ~ merged_view ~ ' __ivm_m where ' ~ kept ~ ')' -%}
    {%- if spec.kind == 'distinct' -%}
      {%- set what = 'row multiplicities' -%}
    {%- else -%}
      {%- set what = 'signed count/sum deltas' if has_deletes else ('counts/sums and '
          'least/greatest' if spec.states | selectattr('merge', 'ne', 'add') | list else 'counts/sums') -%}
    {%- endif -%}
    {%- set reason = ('deletes or updates' if has_deletes else 'insert-only') ~ ': merged ' ~ what ~ ' into the affected groups' -%}
    {#- every group of the delta is affected: its stored row is replaced by the merged one -#}
    {%- set predicates = dbt_ivm._ivm_group_delete_predicates('(' ~ change_sql ~ ')', keys, '__ivm_v') -%}
    {#- Delta merges the deltas into the table itself: a MERGE whose source read the table
        would first be copied by Delta -#}
    {%- set delta_apply = {'kind': 'merge', 'spec': spec, 'change_sql': change_sql, 'keys': keys, 'visible': visible} -%}
    {%- set multi = plan | length > 1 -%}
  {%- else -%}
    {%- set affected_view = '(' ~ dbt_ivm._ivm_affected_groups_sql(spec, names, keys, terms) ~ ')' -%}
    {%- if use_scratch -%}
      {%- set affected = dbt_ivm._ivm_affected_keys(target, affected_view, keys, target_columns, few) -%}
      {%- set affected_view, scratch = affected.relation, affected.scratch -%}
    {%- endif -%}
    {%- set relations = {} -%}
    {%- for p in plan -%}{%- do relations.update({p.index: dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p.to)}) -%}{%- endfor -%}
    {%- set insert_view = '(' ~ dbt_ivm._ivm_aggregate_recompute_sql(dbt_ivm._ivm_fill_relations(spec.full, relations),
        affected_view, keys) ~ ')' -%}
    {%- set predicates = dbt_ivm._ivm_group_delete_predicates(affected_view, keys, '__ivm_v') -%}
    {%- set why = 'min/max after deletes or updates' if spec.refresh.inserts == 'merge' else 'HAVING or an aggregate without a mergeable state' -%}
    {%- set reason = why ~ ': recomputed the affected groups from the definition' -%}
    {%- set multi = true -%}
    {%- set delta_apply = {'kind': 'recompute', 'affected_view': affected_view, 'keys': keys} -%}
  {%- endif -%}
  {{ return({'insert_view': insert_view, 'rewrite': true, 'inserts': true, 'predicates': predicates, 'reason': reason,
             'reads_upstreams': multi, 'delta': delta_apply, 'scratch': scratch, 'counts': counts}) }}
{% endmacro %}

{#- Keyed recompute (macros/analysis/keyed.sql): the slices the change touches, from one key
    term per occurrence of a changed upstream, are deleted and recomputed from the
    definition at the fixed versions, restricted to their keys. The affected keys are
    computed once (_ivm_affected_keys: a VALUES list or a scratch table; a cached view whose
    query has a WITH made Spark miss the cache of a view read after it in the same statement,
    so the recompute evaluated every key term again); their real number lets Spark broadcast
    them. -#}
{% macro _ivm_stage_keyed_changes(spec, target, target_columns, plan, file_format, few) %}
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
    {#- its new and old images from one read of the change set (the sign is dropped) -#}
    {%- set images = dbt_ivm._ivm_signed_images_sql(p) if p.has_new or p.old > 0 else dbt_ivm._ivm_new_images_sql(p) -%}
    {%- set cols = dbt_ivm._ivm_quote_all(p.columns | map(attribute='name')) | join(', ') -%}
    {%- set changed_rows = dbt_ivm._ivm_broadcast(p, '(select ' ~ cols ~ ' from ' ~ images ~ ' __ivm_i)') -%}
    {%- do parts.append(dbt_ivm._ivm_fill_relations(term.sql.replace('__IVM_DELTA__', changed_rows), relations)) -%}
  {%- endfor -%}
  {%- set affected = dbt_ivm._ivm_affected_keys(target, '(select distinct * from (\n' ~ parts | join('\nunion all\n') ~ '\n) __ivm_a)',
      key, target_columns, few, file_format) -%}
  {%- set affected_view = affected.relation -%}
  {%- set relations = {} -%}
  {%- for p in plan -%}{%- do relations.update({p.index: dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p.to)}) -%}{%- endfor -%}
  {#- the definition with the reads that hold only the affected slices' rows pruned to them -#}
  {%- set pruned = dbt_ivm._ivm_fill_relations(spec.pruned.replace('__IVM_KEYS__', affected_view), relations) -%}
  {%- set insert_view = '(' ~ dbt_ivm._ivm_aggregate_recompute_sql(pruned, affected_view, key) ~ ')' -%}
  {%- set predicates = dbt_ivm._ivm_group_delete_predicates(affected_view, key, '__ivm_v') -%}
  {%- set reason = 'keyed: recomputed the affected slices of ' ~ key | join(', ') ~ ' from the definition'
      ~ (', reads of ' ~ spec.pruned_reads ~ ' upstream occurrence(s) pruned to them' if spec.pruned_reads else '')
      ~ (', their keys listed in the SQL' if affected.scratch is none else '') -%}
  {{ return({'insert_view': insert_view, 'rewrite': true, 'inserts': true, 'predicates': predicates, 'reason': reason,
             'reads_upstreams': true, 'scratch': affected.scratch,
             'delta': {'kind': 'slices', 'affected_view': affected_view, 'keys': key, 'listed': affected.literals,
                       'key_types': affected.types}}) }}
{% endmacro %}

{#- The affected keys of a recompute: {relation: what its parts read them from, scratch: the
    scratch table they were written to, or none, literals: the listed keys' literals (see
    _ivm_keys_values), or none, types: the key columns' types when they have literals}.
    relation is a query in parentheses of the key columns `keys`; columns are the table's
    (their types). When the change is few rows (few: at most _ivm_key_list_max() netted
    changed rows, which usually touch about as many keys) and every key column has a
    literal form (_ivm_listable_types), the keys are read back, and at most
    _ivm_key_list_max() of them become a VALUES list in the SQL (_ivm_keys_values): no
    table is written (on Delta a commit, 1.3-4 s at SF 1), and Spark knows their number.
    Otherwise, or when there are more, they are written to the scratch table. -#}
{% macro _ivm_affected_keys(target, relation, keys, columns, few, file_format='parquet') %}
  {%- set types = dbt_ivm._ivm_listable_types(columns, keys) -%}
  {%- if few and types -%}
    {%- set text = run_query('select ' ~ dbt_ivm._ivm_key_texts_sql(dbt_ivm._ivm_quote_all(keys) | list, relation)).rows[0][0] -%}
    {%- set values = dbt_ivm._ivm_keys_values(text, keys, types) -%}
    {%- if values is not none -%}
      {{ return({'relation': values.relation, 'scratch': none, 'literals': values.literals, 'types': types}) }}
    {%- endif -%}
  {%- endif -%}
  {%- set scratch = dbt_ivm._ivm_write_scratch(target, relation, file_format) -%}
  {{ return({'relation': scratch, 'scratch': scratch, 'literals': none, 'types': types}) }}
{% endmacro %}

{#- On parquet, an aggregate's merged groups (relation, whose columns are the table's,
    target_columns, and __ivm_existed) read back as listed rows when the change is small
    (changed_rows, its netted rows, at most _ivm_row_list_max of the group's width) and
    every column has an exact text form (_ivm_row_text_kind): one query instead of the
    scratch table's drop and create, and the statements after it read literals. Returns the
    relation of the listed groups, or none (too many groups, or not listable): the caller
    writes the scratch table. -#}
{% macro _ivm_listed_groups(relation, target_columns, changed_rows) %}
  {%- set most = dbt_ivm._ivm_row_list_max(target_columns | length + 1) -%}
  {%- if changed_rows is none or changed_rows > most -%}{{ return(none) }}{%- endif -%}
  {%- if dbt_ivm._ivm_listable_row_columns(target_columns) is none -%}{{ return(none) }}{%- endif -%}
  {%- set texts = dbt_ivm._ivm_row_texts_sql(target_columns) + ['cast(__ivm_existed as string)'] -%}
  {%- set items = [] -%}
  {%- for v in dbt_ivm._ivm_row_values_sql(target_columns) -%}
    {%- do items.append(v ~ ' as ' ~ dbt_ivm._ivm_quote(target_columns[loop.index0].name)) -%}
  {%- endfor -%}
  {%- do items.append('cast(__ivm_a[' ~ target_columns | length ~ '] as boolean) as __ivm_existed') -%}
  {%- set text = run_query('select case when count(*) <= ' ~ most ~ ' then to_json(collect_list(array(' ~ texts | join(', ')
      ~ '))) end from (select * from ' ~ relation ~ ' __ivm_m limit ' ~ (most + 1) ~ ') __ivm_r').rows[0][0] -%}
  {{ return(dbt_ivm._ivm_text_rows_relation(text, items) if text is not none else none) }}
{% endmacro %}

{#- Keys read back as JSON (an array of their columns' text per key, NULL as null):
    {relation: `(select * from values ... as __ivm_keys(<keys>))` of typed literals,
    literals: per key the literal of each column, none for a NULL}; none when there are more
    than _ivm_key_list_max(). Matched null-safely (<=>), a NULL key is listed like any other. -#}
{% macro _ivm_keys_values(text, keys, types) %}
  {%- set listed = fromjson(text) -%}
  {%- if listed | length > dbt_ivm._ivm_key_list_max() -%}{{ return(none) }}{%- endif -%}
  {%- set names = ' as __ivm_keys(' ~ dbt_ivm._ivm_quote_all(keys) | join(', ') ~ ')' -%}
  {%- if not listed -%}
    {%- set nulls = [] -%}
    {%- for t in types -%}{%- do nulls.append('cast(null as ' ~ t ~ ')') -%}{%- endfor -%}
    {{ return({'relation': '(select * from values (' ~ nulls | join(', ') ~ ')' ~ names ~ ' where false)', 'literals': []}) }}
  {%- endif -%}
  {%- set rows = [] -%}
  {%- set literals = [] -%}
  {%- for row in dbt_ivm._ivm_key_literals(listed, types) -%}
    {%- set texts = listed[loop.index0] -%}
    {%- do rows.append('(' ~ row | join(', ') ~ ')') -%}
    {%- set kept = [] -%}
    {%- for lit in row -%}{%- do kept.append(none if texts[loop.index0] is none else lit) -%}{%- endfor -%}
    {%- do literals.append(kept) -%}
  {%- endfor -%}
  {{ return({'relation': '(select * from values ' ~ rows | join(', ') ~ names ~ ')', 'literals': literals}) }}
{% endmacro %}

{#- A refresh's scratch table, next to the model's table: the keyed path's affected keys,
    on parquet an aggregate's merged or affected groups. -#}
{% macro _ivm_keys_table(target) %}
  {{ return(api.Relation.create(database=target.database, schema=target.schema, identifier='__ivm_keys__' ~ target.identifier,
                                type='table')) }}
{% endmacro %}

{#- Write the rows of relation (a query in parentheses) to the scratch table and return its
    name. It stays until the next refresh of the table replaces it (dropping it after the
    refresh log row would be a statement outside the lease, which that row frees). On
    parquet, which cannot replace a table, the one left is dropped first, unconditionally:
    dbt's relation cache lists the schema when the run starts, and a refresh of another
    process may have left one since. -#}
{% macro _ivm_write_scratch(target, relation, file_format='parquet') %}
  {%- set scratch = dbt_ivm._ivm_keys_table(target) | string -%}
  {%- set select = ' using ' ~ file_format ~ ' as select * from ' ~ relation ~ ' __ivm_s' -%}
  {%- if file_format == 'delta' -%}
    {%- do run_query('create or replace table ' ~ scratch ~ select) -%}
  {%- else -%}
    {%- do run_query('drop table if exists ' ~ scratch) -%}
    {%- do run_query('create table ' ~ scratch ~ select) -%}
  {%- endif -%}
  {{ return(scratch) }}
{% endmacro %}

{#- A changed upstream's rows in a join term, marked for a broadcast join when its netted
    change is small (p.broadcast, from the change counts): Spark cannot size a change read
    (a change feed, a netting aggregation), so without the hint it would shuffle the other,
    large side of the join. -#}
{% macro _ivm_broadcast(p, relation) %}
  {{ return('(select /*+ BROADCAST */ * from ' ~ relation ~ ' __ivm_b)' if p.get('broadcast') else relation) }}
{% endmacro %}
