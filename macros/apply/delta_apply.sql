{#- Apply (Patch) for Delta Lake tables (file_format='delta').

    Every refresh applies its whole change in ONE statement, so readers never see a
    half-applied refresh:
    * insert-only join change: one INSERT (the rows never exist yet);
    * join change whose changed keys are all listed as literals: one INSERT ... REPLACE
      WHERE on them, a row key of several columns widened to its key box (see
      _ivm_delta_replaced_slices and _ivm_delta_key_boxes), and a keyed view's recomputed
      slices whose keys of one column are listed (_ivm_delta_replaced_keys);
    * everything else: one MERGE whose source holds at most one row per target key,
      keys matched null-safely (<=>). Delta rejects DELETE ... WHERE k IN (subquery), so
      rows are deleted by MERGE ... WHEN MATCHED THEN DELETE.
    No session settings are set around a write (commit user metadata, txnAppId): with
    dbt-spark's `method: session` every dbt thread shares one Spark session, so a setting
    made for one model's statement would apply to another thread's statement too. An
    interrupted refresh is resolved from the table's own history instead: the 'started'
    row of the refresh log records the table's version before the write
    (_ivm_delta_resolve_interrupted). -#}

{#- SQL of the MERGE for an aggregate or DISTINCT view (merge path): the source is the
    signed delta per affected group (ivm_aggregate_change_sql, one row per group), merged
    into the stored states by the clauses themselves, so the source never reads the table
    (Delta materializes the whole source before merging, table read included). A group whose count reaches 0 is
    deleted, an existing one updated in place, a new one inserted when it has rows.
    Without GROUP BY the one row is always updated. -#}
{% macro ivm_delta_aggregate_merge_sql(spec, target, target_columns, change_sql, keys, visible) %}
  {{ return(adapter.dispatch('ivm_delta_aggregate_merge_sql', 'dbt_ivm')(spec, target, target_columns, change_sql, keys, visible)) }}
{% endmacro %}

{% macro default__ivm_delta_aggregate_merge_sql(spec, target, target_columns, change_sql, keys, visible) %}
  {%- set on = [] -%}
  {%- for k in dbt_ivm._ivm_quote_all(keys) -%}{%- do on.append('__ivm_t.' ~ k ~ ' <=> __ivm_s.' ~ k) -%}{%- endfor -%}
  {%- if keys -%}
    {%- do on.append(dbt_ivm._ivm_delta_stored_group()) -%}
  {%- endif -%}
  {%- set sets = [] -%}
  {%- for c in dbt_ivm._ivm_aggregate_merged_columns(spec, target_columns, visible, '__ivm_t', '__ivm_s') if c.name not in keys -%}
    {%- do sets.append('__ivm_t.' ~ dbt_ivm._ivm_quote(c.name) ~ ' = ' ~ c.sql) -%}
  {%- endfor -%}
  {%- set inserted = dbt_ivm._ivm_aggregate_merged_columns(spec, target_columns, visible, none, '__ivm_s') -%}
  {%- set clauses = [] -%}
  {%- if keys -%}
    {%- do clauses.append('when matched and __ivm_t.__ivm_count + __ivm_s.__ivm_count = 0 then delete') -%}
  {%- endif -%}
  {%- do clauses.append('when matched then update set ' ~ sets | join(', ')) -%}
  {%- do clauses.append('when not matched' ~ (' and __ivm_s.__ivm_count > 0' if keys else '') ~ ' then insert (' ~
      dbt_ivm._ivm_quote_all(inserted | map(attribute='name')) | join(', ') ~ ') values (' ~ inserted | map(attribute='sql') | join(', ') ~ ')') -%}
  {{ return(dbt_ivm._ivm_delta_merge_statement(target, '(\n' ~ change_sql ~ '\n)', on, clauses)) }}
{% endmacro %}

{#- SQL of the MERGE for an aggregate view whose affected groups are recomputed from the
    definition (min/max after deletes, HAVING, other aggregates): the source is every
    affected group (distinct keys) left-joined with its recomputed row, so one row per
    key; a group without a recomputed row is deleted. -#}
{% macro ivm_delta_recompute_merge_sql(target, columns, affected_view, insert_view, keys) %}
  {{ return(adapter.dispatch('ivm_delta_recompute_merge_sql', 'dbt_ivm')(target, columns, affected_view, insert_view, keys)) }}
{% endmacro %}

{% macro default__ivm_delta_recompute_merge_sql(target, columns, affected_view, insert_view, keys) %}
  {%- if not keys -%}
    {#- no GROUP BY: the recomputed one row replaces the stored one -#}
    {%- set source = '(select *, true as __ivm_present from ' ~ insert_view ~ ')' -%}
    {{ return(dbt_ivm._ivm_delta_merge_text(target, columns, source, [], false)) }}
  {%- endif -%}
  {%- set q = dbt_ivm._ivm_quote_all(keys) | list -%}
  {%- set on = [] -%}
  {%- set mk = [] -%}
  {%- set match = [] -%}
  {%- for k in q -%}
    {%- do match.append('__ivm_a.' ~ k ~ ' <=> __ivm_r.' ~ k) -%}
    {%- do mk.append('__ivm_a.' ~ k ~ ' as __ivm_mk_' ~ loop.index0) -%}
    {%- do on.append('__ivm_t.' ~ k ~ ' <=> __ivm_s.__ivm_mk_' ~ loop.index0) -%}
  {%- endfor -%}
  {%- do on.append(dbt_ivm._ivm_delta_stored_group()) -%}
  {%- set source -%}
(
  select {{ mk | join(', ') }}, __ivm_r.*
  from (select distinct {{ q | join(', ') }} from {{ affected_view }}) __ivm_a
  left join (select *, true as __ivm_present from {{ insert_view }}) __ivm_r on {{ match | join(' and ') }}
)
  {%- endset -%}
  {{ return(dbt_ivm._ivm_delta_merge_text(target, columns, source, on, true)) }}
{% endmacro %}

{#- The ON conjunct of a MERGE into an aggregate table that the table's row is there: every
    stored group counts its rows, and it is false on the NULL padding of an unmatched source
    row (see _ivm_delta_null_keys_guard). -#}
{% macro _ivm_delta_stored_group() %}
  {{ return('__ivm_t.__ivm_count is not null') }}
{% endmacro %}

{#- With deletion vectors, Delta's MERGE picks the rows it writes by testing the ON condition
    again on its outer join of source and table: on a source row that matched nothing, the
    table's columns are NULL, so a null-safe key match (<=>) of a source row whose keys are
    all NULL is true there, and Delta fails with "Unexpected row: did not match any merge
    clause" when no NOT MATCHED clause takes the row. An aggregate table answers this in ON
    (its __ivm_count is never NULL in a stored row); a join or keyed table has no column that
    is never NULL, so {join, flag}: the flag keeps such a source row (alias) only when the
    table has a row with all of those keys NULL, which it then really matches (a join, not
    an EXISTS subquery: Delta cannot read the target from a subquery of its source). -#}
{% macro _ivm_delta_null_keys_guard(target, keys, alias) %}
  {%- set source_null = [] -%}
  {%- set table_null = [] -%}
  {%- for k in dbt_ivm._ivm_quote_all(keys) -%}
    {%- do source_null.append(alias ~ '.' ~ k ~ ' is null') -%}
    {%- do table_null.append(k ~ ' is null') -%}
  {%- endfor -%}
  {{ return({'join': 'cross join (select count(*) > 0 as __ivm_has from ' ~ target ~ ' where ' ~ table_null | join(' and ')
                     ~ ') __ivm_n',
             'flag': '(not (' ~ source_null | join(' and ') ~ ') or __ivm_n.__ivm_has)'}) }}
{% endmacro %}

{#- MERGE of a source with __ivm_present (null: the key's row goes away). -#}
{% macro _ivm_delta_merge_text(target, columns, source, on, can_delete) %}
  {%- set clauses = [] -%}
  {%- if can_delete -%}{%- do clauses.append('when matched and __ivm_s.__ivm_present is null then delete') -%}{%- endif -%}
  {%- do clauses.append('when matched then update set ' ~ dbt_ivm._ivm_delta_set_list(columns)) -%}
  {%- do clauses.append('when not matched and __ivm_s.__ivm_present then insert ' ~ dbt_ivm._ivm_delta_insert_list(columns)) -%}
  {{ return(dbt_ivm._ivm_delta_merge_statement(target, source, on, clauses)) }}
{% endmacro %}

{#- A MERGE of a source (a relation in FROM) into the table: ON the conjuncts `on` (true
    without any), then its clauses in order. -#}
{% macro _ivm_delta_merge_statement(target, source, on, clauses) %}
  {%- set sql -%}
merge into {{ target }} __ivm_t
using {{ source }} __ivm_s
on {{ on | join(' and ') if on else 'true' }}
{{ clauses | join('\n') }}
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}

{#- SQL of the MERGE for a join-only view with deletes or updates, or a keyed view. One
    MERGE, whose source is the union of
      * delete identities: DISTINCT tuples of the `identity` columns (hidden key columns of
        the changed upstreams, or the slice key), __ivm_del = true. `keys`: a relation
        holding them under those column names - the changed keys of the one upstream whose
        slices go, or the keyed path's affected keys - so the MERGE joins them with the
        table by equality; without it they are found in the table with the predicates of
        the parquet rewrite (several upstreams delete: a row goes when any of its keys
        changed, which no equality join expresses), which reads the table in the source;
      * the rows to insert, __ivm_del = false.
    The ON condition requires __ivm_del, so insert rows never match and are inserted.
    `keys_not_null`: no row of `keys` has a NULL (row keys of an upstream that is not an ivm
    model, which the change checks refuse as IVM062 before anything is applied): no null-key
    guard then, which reads the table in the source (its rows with NULL keys, a read that
    Delta materializes with the rest of the source before it merges).
    `table_filter`: a predicate on the table (__ivm_t) that every deleted row satisfies,
    added to ON so that Delta matches only the files whose statistics admit it.
    Several target rows may share one identity tuple (duplicate rows, or an append-only
    upstream whose watermark is not unique): one source row matching many target rows is
    allowed; what Delta forbids is several source rows matching one target row, and the
    DISTINCT over exactly the ON columns rules that out. A MERGE reads its source from the
    snapshot it started on. -#}
{% macro ivm_delta_join_merge_sql(target, target_columns, insert_view, identity, keys=none, predicates=none, table_filter=none,
    keys_not_null=false) %}
  {{ return(adapter.dispatch('ivm_delta_join_merge_sql', 'dbt_ivm')(target, target_columns, insert_view, identity, keys, predicates,
      table_filter, keys_not_null)) }}
{% endmacro %}

{% macro default__ivm_delta_join_merge_sql(target, target_columns, insert_view, identity, keys=none, predicates=none, table_filter=none,
    keys_not_null=false) %}
  {%- set columns = target_columns | map(attribute='name') | list -%}
  {%- set cols = dbt_ivm._ivm_quote_all(columns) | list -%}
  {%- set alias = '__ivm_k' if keys is not none else '__ivm_v' -%}
  {%- set del_select = [] -%}
  {%- for c in target_columns -%}
    {%- if c.name in identity -%}
      {%- do del_select.append(alias ~ '.' ~ dbt_ivm._ivm_quote(c.name)) -%}
    {%- else -%}
      {%- do del_select.append('cast(null as ' ~ c.data_type ~ ') as ' ~ dbt_ivm._ivm_quote(c.name)) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set on = ['__ivm_s.__ivm_del'] + ([table_filter] if table_filter else []) -%}
  {%- for h in dbt_ivm._ivm_quote_all(identity) -%}{%- do on.append('__ivm_t.' ~ h ~ ' <=> __ivm_s.' ~ h) -%}{%- endfor -%}
  {%- set sql -%}
merge into {{ target }} __ivm_t
using (
  select distinct true as __ivm_del, {{ del_select | join(', ') }}
{%- if keys is not none and keys_not_null %}
  from {{ keys }} __ivm_k
{%- elif keys is not none %}
  {%- set guard = dbt_ivm._ivm_delta_null_keys_guard(target, identity, '__ivm_k') %}
  from {{ keys }} __ivm_k {{ guard.join }}
  where {{ guard.flag }}
{%- else %}
  from {{ target }} __ivm_v
  {{ predicates.joins | join('\n  ') }}
  where {{ predicates.flag }}
{%- endif %}
  union all
  select false as __ivm_del, {{ cols | join(', ') }} from {{ insert_view }} __ivm_i
) __ivm_s
on {{ on | join(' and ') }}
when matched then delete
when not matched and not __ivm_s.__ivm_del then insert {{ dbt_ivm._ivm_delta_insert_list(columns) }}
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}

{#- What a join-only refresh deletes on Delta: {identity: the hidden key columns of every
    changed upstream whose slices go, keys: when that is one upstream read from a change
    set, its changed keys under the hidden columns' names, as literal rows when the change
    counts listed them (p.ids) (else none: the slices are found in the table), not_null:
    whether no key has a NULL (listed keys have none, see _ivm_changed_id_literals, and a
    change set has none unless _ivm_keys_may_be_null, see ivm_netted_changes_sql)}. -#}
{% macro _ivm_delta_join_deletes(plan, repair) %}
  {%- set deleting = [] -%}
  {%- set names = [] -%}
  {%- for p in plan if p.changed and (repair or p.get('old', 0) > 0) -%}
    {%- do deleting.append(p) -%}
    {%- for h in p.up.hidden -%}{%- do names.append(h.name) -%}{%- endfor -%}
  {%- endfor -%}
  {%- if deleting | length == 1 and deleting[0].up.kind == 'change_log' and deleting[0].up.hidden -%}
    {%- set p = deleting[0] -%}
    {%- set renamed = [] -%}
    {%- for h in p.up.hidden -%}{%- do renamed.append(dbt_ivm._ivm_quote(h.column) ~ ' as ' ~ h.name) -%}{%- endfor -%}
    {%- if p.get('ids') -%}
      {#- listed: the keys as literal rows, the change set is not read again -#}
      {%- set rows = [] -%}
      {%- for t in p.ids -%}{%- do rows.append('(' ~ t | join(', ') ~ ')') -%}{%- endfor -%}
      {{ return({'identity': names, 'keys': '(select * from values ' ~ rows | join(', ') ~ ' as __ivm_l(' ~ names | join(', ') ~ '))',
                 'not_null': true}) }}
    {%- endif -%}
    {{ return({'identity': names, 'keys': '(select ' ~ renamed | join(', ') ~ ' from ' ~ p.change_view ~ ' __ivm_c)',
               'not_null': not dbt_ivm._ivm_keys_may_be_null(p.up)}) }}
  {%- endif -%}
  {{ return({'identity': names, 'keys': none, 'not_null': false}) }}
{% endmacro %}

{% macro _ivm_delta_set_list(columns) %}
  {%- set sets = [] -%}
  {%- for c in dbt_ivm._ivm_quote_all(columns) -%}{%- do sets.append('__ivm_t.' ~ c ~ ' = __ivm_s.' ~ c) -%}{%- endfor -%}
  {{ return(sets | join(', ')) }}
{% endmacro %}

{% macro _ivm_delta_insert_list(columns) %}
  {%- set cols = dbt_ivm._ivm_quote_all(columns) | list -%}
  {%- set values = [] -%}
  {%- for c in cols -%}{%- do values.append('__ivm_s.' ~ c) -%}{%- endfor -%}
  {{ return('(' ~ cols | join(', ') ~ ') values (' ~ values | join(', ') ~ ')') }}
{% endmacro %}

{#- Full build as a Delta table, in one commit (CREATE OR REPLACE keeps the table's history,
    so readers switch from the old to the new content atomically). `properties`: its table
    properties (the materialization sets delta.enableDeletionVectors and
    delta.enableChangeDataFeed, the model's tblproperties, dbt_ivm.row_key); `location`
    (from location_root) makes it an external table. -#}
{% macro ivm_delta_build_sql(target, build_sql, partition_by, properties={}, location=none) %}
  {{ return(adapter.dispatch('ivm_delta_build_sql', 'dbt_ivm')(target, build_sql, partition_by, properties, location)) }}
{% endmacro %}

{% macro default__ivm_delta_build_sql(target, build_sql, partition_by, properties={}, location=none) %}
  {%- set sql -%}
create or replace table {{ target }} using delta
{%- if partition_by %}
partitioned by ({{ dbt_ivm._ivm_quote_all(partition_by) | join(', ') }})
{%- endif %}
{%- if location %}
location {{ dbt_ivm._ivm_string_literal(location) }}
{%- endif %}
{{ dbt_ivm._ivm_tblproperties(properties) }}
as {{ build_sql }}
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}

{#- Whether a relation (or none) is a Delta table. -#}
{% macro _ivm_is_delta_table(relation) %}
  {{ return(relation is not none and relation.type == 'table'
            and dbt_ivm._ivm_describe_value('describe table extended ' ~ relation, 'Provider') | lower == 'delta') }}
{% endmacro %}

{#- The latest version of a Delta table (recorded in the 'started' row of a refresh, see
    _ivm_delta_resolve_interrupted). -#}
{% macro _ivm_delta_table_version(relation) %}
  {%- set rows = run_query('describe history ' ~ relation ~ ' limit 1').rows -%}
  {{ return(rows[0][0] | int if rows else -1) }}
{% endmacro %}

{#- Apply a staged change (see _ivm_refresh_incremental) to a Delta table in one statement.
    Returns {'deleted', 'inserted'}: the rows it removed and added, from the MERGE's own
    metrics (an updated row counts as one of each) or, for an INSERT (an append, or INSERT
    ... REPLACE WHERE, which open-source Delta runs without returning counts), its commit's.
    before: the table's version before the write. An INSERT that changes nothing commits
    nothing: with no commit after that version, it removed and added no rows. -#}
{% macro ivm_apply_delta(target, target_columns, stage, plan, repair, before=none) %}
  {{ return(adapter.dispatch('ivm_apply_delta', 'dbt_ivm')(target, target_columns, stage, plan, repair, before)) }}
{% endmacro %}

{% macro default__ivm_apply_delta(target, target_columns, stage, plan, repair, before=none) %}
  {%- set apply = dbt_ivm._ivm_delta_apply_sql(target, target_columns, stage, plan, repair) -%}
  {%- call statement('main', fetch_result=true) -%}{{ apply.sql }}{%- endcall -%}
  {%- if apply.counts == 'history' -%}
    {#- an INSERT returns no rows: its commit's metrics count them -#}
    {%- set history = run_query('describe history ' ~ target ~ ' limit 1') -%}
    {%- set names = history.column_names | map('lower') | list -%}
    {%- set row = history.rows[0] -%}
    {%- if before is not none and row[names.index('version')] | int <= before | int -%}
      {{ return({'deleted': 0, 'inserted': 0}) }}
    {%- endif -%}
    {%- if row[names.index('operation')] == 'WRITE' -%}
      {%- set m = dbt_ivm._ivm_as_mapping(row[names.index('operationmetrics')]) -%}
      {#- rows kept in a file that had to be rewritten are output again, as copies -#}
      {{ return({'deleted': (m.get('numDeletedRows') or 0) | int,
                 'inserted': (m.get('numOutputRows') or 0) | int - (m.get('numCopiedRows') or 0) | int}) }}
    {%- endif -%}
    {{ return({'deleted': none, 'inserted': none}) }}
  {%- endif -%}
  {%- set result = load_result('main') -%}
  {%- set metrics = {} -%}
  {%- if result and result.table and result.table.rows -%}
    {%- for name in result.table.column_names -%}{%- do metrics.update({name | lower: result.table.rows[0][loop.index0]}) -%}{%- endfor -%}
  {%- endif -%}
  {%- if not metrics -%}{{ return({'deleted': none, 'inserted': none}) }}{%- endif -%}
  {%- set updated = metrics.get('num_updated_rows') or 0 -%}
  {{ return({'deleted': (metrics.get('num_deleted_rows') or 0) + updated, 'inserted': (metrics.get('num_inserted_rows') or 0) + updated}) }}
{% endmacro %}

{#- The one statement that applies a staged change to a Delta table: {sql, counts: where its
    row counts come from ('result': the statement's own metrics row, 'history': its commit's
    metrics)}. -#}
{% macro _ivm_delta_apply_sql(target, target_columns, stage, plan, repair) %}
  {%- set columns = target_columns | map(attribute='name') | list -%}
  {%- set cols = dbt_ivm._ivm_quote_all(columns) | join(', ') -%}
  {%- set d = stage.get('delta') or {} -%}
  {%- if d.get('kind') == 'merge' -%}
    {{ return({'sql': dbt_ivm.ivm_delta_aggregate_merge_sql(d.spec, target, target_columns, d.change_sql, d['keys'], d.visible),
               'counts': 'result'}) }}
  {%- elif d.get('kind') == 'slices' -%}
    {#- a keyed view's slices: replaced where their keys are listed, else the join MERGE with
        the slice key as the identity -#}
    {%- set replaced = none if repair else dbt_ivm._ivm_delta_replaced_keys(d['keys'], d.get('listed'), d.get('key_types')) -%}
    {%- if replaced is none -%}
      {{ return({'sql': dbt_ivm.ivm_delta_join_merge_sql(target, target_columns, stage.insert_view, d['keys'], d.affected_view),
                 'counts': 'result'}) }}
    {%- endif -%}
  {%- elif d.get('kind') == 'recompute' -%}
    {{ return({'sql': dbt_ivm.ivm_delta_recompute_merge_sql(target, columns, d.affected_view, stage.insert_view, d['keys']),
               'counts': 'result'}) }}
  {%- elif not stage.rewrite -%}
    {{ return({'sql': 'insert into ' ~ target ~ ' (' ~ cols ~ ') select ' ~ cols ~ ' from ' ~ stage.insert_view ~ ' __ivm_i',
               'counts': 'history'}) }}
  {%- else -%}
    {%- set replaced = dbt_ivm._ivm_delta_replaced_slices(plan, repair) -%}
  {%- endif -%}
  {#- a keyed view's listed slices, or a join's -#}
  {%- if replaced is not none -%}
    {#- the table's columns in its own order: INSERT matches them by position -#}
    {{ return({'sql': 'insert into ' ~ target ~ ' replace where ' ~ replaced ~ '\nselect ' ~ cols ~ ' from ' ~ stage.insert_view
               ~ ' __ivm_i', 'counts': 'history'}) }}
  {%- endif -%}
  {%- set deletes = dbt_ivm._ivm_delta_join_deletes(plan, repair) -%}
  {#- found by literals alone, the deleted rows' predicate also cuts the table the MERGE
      matches against: Delta then reads only the files whose statistics admit those keys -#}
  {%- set on_table = dbt_ivm._ivm_join_delete_predicates(plan, '__ivm_t', repair) -%}
  {{ return({'sql': dbt_ivm.ivm_delta_join_merge_sql(target, target_columns, stage.insert_view, deletes.identity, deletes['keys'],
      stage.predicates, none if on_table.joins else on_table.flag, deletes.not_null), 'counts': 'result'}) }}
{% endmacro %}

{#- The slices of a join-only refresh as one predicate on the table's hidden key columns,
    when every changed upstream's changed keys were listed (p.ids): a row is deleted, or
    inserted, exactly when its key of some changed upstream is listed, or lies in its key
    box (p.box) (an inserted row comes from the term of an upstream restricted to those
    keys; keys inserted since the stored version have no rows yet, so listing them deletes
    nothing). Delta's INSERT ... REPLACE WHERE then applies the refresh in one commit that
    finds the deleted rows in one scan of the files their statistics admit, where the MERGE
    materializes its source and joins the table twice (to find the files, then the rows).
    None otherwise: a key not listed, a row key of several columns without a box (Delta
    turns the condition into data source filters, which have no tuple IN: "cannot translate
    expression to source filter"), a watermark upstream, a repair (which re-applies by
    version). -#}
{% macro _ivm_delta_replaced_slices(plan, repair) %}
  {%- set listed = none if repair else dbt_ivm._ivm_delta_listed_changes(plan) -%}
  {%- if not listed -%}{{ return(none) }}{%- endif -%}
  {%- for p in listed if p.up.hidden | length != 1 and not p.get('box') -%}{{ return(none) }}{%- endfor -%}
  {%- set flags = [] -%}
  {%- for p in listed -%}
    {%- do flags.append(dbt_ivm._ivm_listed_ids_flag(p, p.up.hidden | map(attribute='name') | list)) -%}
  {%- endfor -%}
  {{ return('(' ~ flags | join(' or ') ~ ')') }}
{% endmacro %}

{#- The keyed path's affected slices as one predicate on the table's key column, when they
    were listed (literals: per key its literal, none for NULL; see _ivm_keys_values) and the
    key is one column: the REPLACE WHERE of its apply, which deletes the slices' rows in one
    scan of the files their statistics admit and inserts the recomputed ones, where the
    MERGE materializes the recompute and joins the table twice. A NULL key is a slice too
    (`IS NULL`). None otherwise: keys in the scratch table, a key of several columns (Delta
    turns the condition into data source filters, which have no tuple IN), or of a type
    whose IN list Delta cannot take (_ivm_delta_in_listable). -#}
{% macro _ivm_delta_replaced_keys(keys, literals, types) %}
  {%- if literals is none or keys | length != 1 or not dbt_ivm._ivm_delta_in_listable(types) -%}{{ return(none) }}{%- endif -%}
  {%- set k = dbt_ivm._ivm_quote(keys[0]) -%}
  {%- set present = literals | rejectattr(0, 'none') | list -%}
  {%- set parts = ([dbt_ivm._ivm_listed_ids_flag({'ids': present}, [k])] if present else [])
      + ([k ~ ' is null'] if present | length < literals | length else []) -%}
  {{ return('(' ~ (parts | join(' or ') or 'false') ~ ')') }}
{% endmacro %}

{#- Whether Delta's REPLACE WHERE takes an IN list of literals of each of these column types
    (from _ivm_listable_types): not of decimals, whose IN filter Delta 4.4 fails to translate
    (an internal error, scala.MatchError on java.math.BigDecimal; one value, an equality,
    passes). Their slices go by the MERGE. -#}
{% macro _ivm_delta_in_listable(types) %}
  {%- for t in types or [] if (t | lower).startswith('decimal') -%}{{ return(false) }}{%- endfor -%}
  {{ return(true) }}
{% endmacro %}

{#- The upstreams of a plan whose change the refresh applies (changed, with rows deleted or
    inserted), when each is a change log whose changed keys the change counts listed
    (p.ids) and Delta takes IN lists of their types; none when one is not. Slices found by
    literals alone are what REPLACE WHERE (and so a key box) needs. -#}
{% macro _ivm_delta_listed_changes(plan) %}
  {%- set listed = [] -%}
  {%- for p in plan if p.changed and (p.get('old', 0) > 0 or p.get('has_new')) -%}
    {%- if p.up.kind != 'change_log' or p.get('ids') is none or not dbt_ivm._ivm_delta_in_listable(p.get('id_types')) -%}
      {{ return(none) }}
    {%- endif -%}
    {%- do listed.append(p) -%}
  {%- endfor -%}
  {{ return(listed) }}
{% endmacro %}

{#- Key boxes, for a Delta join-only refresh that deletes and whose changed upstreams' keys
    were all listed (_ivm_delta_listed_changes), so that it can replace its slices by
    REPLACE WHERE, whose condition takes IN lists of one column only. A changed row key of
    several columns is widened to its box: the rows whose every key column holds a value
    that column has among the changed keys. The box holds every changed key, so the slice
    algorithm stands with it as the changed keys: that upstream's term reads its rows in the
    box at the new version, the later terms its rows outside it, and the table's rows in it
    are replaced. Taken only when the box can hold at most _ivm_key_box_ratio() times as
    many keys as were changed (the changed lines of orders: all their orders' lines);
    otherwise, or when an upstream's keys were not listed, nothing is set and the refresh
    merges by the exact keys. Sets p.box (per key column, its distinct literals), p.has_new
    (the box may hold unchanged rows to insert again) and keeps of p.ranges only the row
    key's columns, as the box's values (its other rows carry other values in the other
    columns, and the changed rows' bounds need not cover the box). -#}
{% macro _ivm_delta_key_boxes(plan) %}
  {%- set boxes = {} -%}
  {%- for p in dbt_ivm._ivm_delta_listed_changes(plan) or [] -%}
    {%- if p.up.hidden | length > 1 -%}
      {%- set columns = [] -%}
      {%- set ns = namespace(size=1) -%}
      {%- for h in p.up.hidden -%}
        {%- set values = dbt_ivm._ivm_listed_id_values(p.ids, loop.index0) -%}
        {%- do columns.append(values) -%}
        {%- set ns.size = ns.size * values | length -%}
      {%- endfor -%}
      {%- if ns.size > dbt_ivm._ivm_key_box_ratio() * p.ids | length -%}{{ return(none) }}{%- endif -%}
      {%- do boxes.update({p.index: columns}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- for p in plan if p.index in boxes -%}
    {%- set key = p.up.unique_key | map('lower') | list -%}
    {%- set ranges = {} -%}
    {%- for col, r in (p.get('ranges') or {}).items() if col in key -%}
      {%- set values = boxes[p.index][key.index(col)] -%}
      {%- do ranges.update({col: {'lo': 'array_min(array(' ~ values | join(', ') ~ '))', 'hi': 'array_max(array(' ~ values | join(', ') ~ '))',
          'keys': values, 'partners': r.partners}}) -%}
    {%- endfor -%}
    {%- do p.update({'box': boxes[p.index], 'has_new': true, 'ranges': ranges}) -%}
  {%- endfor -%}
{% endmacro %}

{#- The most keys a key box may hold per changed key: a box that holds many more rows than
    changed costs a recompute and rewrite of them all, more than the MERGE by exact keys. -#}
{% macro _ivm_key_box_ratio() %}
  {{ return(8) }}
{% endmacro %}

{#- Full build of a Delta table: one CREATE OR REPLACE TABLE (an existing relation that is
    not a Delta table, e.g. a former parquet generation table, is dropped first). -#}
{% macro _ivm_delta_build(target, existing, existing_is_delta, build_sql, partition_by, properties={}, location=none) %}
  {%- if existing is not none and not existing_is_delta -%}{%- do adapter.drop_relation(existing) -%}{%- endif -%}
  {%- call statement('main') -%}
    {{ dbt_ivm.ivm_delta_build_sql(target, build_sql, partition_by, properties, location) }}
  {%- endcall -%}
{% endmacro %}

{#- Exactly-once after interrupted refreshes of a Delta table. Each one's single write
    either committed or did not. Only one refresh of a model writes its table at a time, and
    each 'started' row records the table's version before that refresh (table_version).
    With V the table's latest data-changing commit (WRITE, MERGE, CREATE/REPLACE AS SELECT),
    the interrupted refresh that committed V is the latest one that started below V (a
    refresh that started after V saw it already); none started below V: none committed.
    Committed: the table holds that refresh's change, so the next one starts from the
    versions it reached. Otherwise the table is untouched since the last success, and the
    next one starts from there. Either way no re-apply by key is needed. Without recorded
    versions (a log written by an older dbt_ivm) the state is returned as it is, and the
    next run repairs by key or rebuilds. Returns the state to refresh from. -#}
{% macro _ivm_delta_resolve_interrupted(existing, state, exact_reads) %}
  {%- set interrupted_all = state.get('interrupted_all') or [state.interrupted] -%}
  {%- if interrupted_all | selectattr('table_version', 'none') | list -%}{{ return(state) }}{%- endif -%}
  {#- only the commits after the oldest recorded version decide: the recent ones, when they
      reach back to it; else the whole history (thousands of commits on a long-lived table) -#}
  {%- set floor = interrupted_all | map(attribute='table_version') | map('int') | min -%}
  {%- set commits = dbt_ivm._ivm_delta_commits(existing, dbt_ivm._ivm_delta_recent_commits()) -%}
  {%- if floor not in commits -%}{%- set commits = dbt_ivm._ivm_delta_commits(existing, none) -%}{%- endif -%}
  {%- set writes = ['WRITE', 'MERGE', 'CREATE TABLE AS SELECT', 'CREATE OR REPLACE TABLE AS SELECT', 'REPLACE TABLE AS SELECT'] -%}
  {%- set ns = namespace(latest=-1, committed=none, resume_full=none) -%}
  {%- for version, commit in commits.items() if commit.op in writes -%}
    {%- set ns.latest = [ns.latest, version] | max -%}
  {%- endfor -%}
  {%- for i in interrupted_all -%}
    {%- if i.table_version | int < ns.latest -%}
      {%- set ns.committed = i -%}
      {%- set ns.resume_full = none -%}
    {%- elif i.get('path') == 'full' -%}
      {#- a full build that did not commit: the next run does it -#}
      {%- set ns.resume_full = i.refresh_id -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set interrupted = ns.committed -%}
  {%- if interrupted is not none and interrupted.definition_hash -%}
    {{ log('dbt_ivm: the interrupted refresh ' ~ interrupted.refresh_id ~ ' committed its write to ' ~ existing
           ~ ': continuing from the versions it reached', info=true) }}
    {#- a plain change log may have advanced while that refresh read its table -#}
    {%- set repair = none if exact_reads else 'the last refresh was interrupted after its commit, an upstream change log may have '
        'advanced during it' -%}
    {{ return({'last_success': {'versions': interrupted.versions, 'definition_hash': interrupted.definition_hash,
                                'logged_at': interrupted.logged_at}, 'repair': repair, 'resume_full': ns.resume_full}) }}
  {%- endif -%}
  {%- if state.last_success is none -%}{{ return(state) }}{%- endif -%}
  {{ log('dbt_ivm: the interrupted refresh ' ~ state.interrupted.refresh_id ~ ' did not commit to ' ~ existing ~
      ': refreshing from the last successful one', info=true) }}
  {%- set repair = 'an upstream change log advanced during the last refresh' if state.last_success.get('logs_advanced') else none -%}
  {{ return({'last_success': state.last_success, 'repair': repair, 'resume_full': ns.resume_full}) }}
{% endmacro %}
