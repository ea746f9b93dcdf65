{#- Versions, change sets and version-consistent reads of upstreams.
    Versions are carried as strings: a change log's _commit_version, or an append-only
    upstream's watermark value. A missing version (empty log or table) is none. -#}

{#- Current version of every upstream, fixed once at the start of a refresh, in one query. -#}
{% macro ivm_current_versions(upstreams) %}
  {{ return(adapter.dispatch('ivm_current_versions', 'dbt_ivm')(upstreams)) }}
{% endmacro %}

{% macro default__ivm_current_versions(upstreams) %}
  {%- set read = dbt_ivm._ivm_versions_read(upstreams) -%}
  {%- if read.columns -%}
    {%- do dbt_ivm._ivm_versions_from_row(read, run_query('select ' ~ read.columns | join(', ')).rows[0]) -%}
  {%- endif -%}
  {{ return(read.versions) }}
{% endmacro %}

{#- The reads of ivm_current_versions. A Delta upstream's version is its latest commit in
    the table history (one DESCRIBE HISTORY each, run here, which keeps the latest commits in
    up.recent_commits for _ivm_check_change_feeds); every other version is a select
    item of one query: {versions (the Delta ones so far), columns (the select items, named
    v<i> for a version, h<i> for an ivm upstream's refresh history, d<i> for a change log's
    latest old image), fields ([name, upstream, what]: what the column of that name sets)}.
    _ivm_versions_from_row reads that query's row. -#}
{% macro _ivm_versions_read(upstreams) %}
  {%- set read = {'versions': {}, 'columns': [], 'fields': []} -%}
  {%- for up in upstreams -%}
    {%- if up.get('feed') == 'delta' -%}
      {#- its latest commits: the version, and most often all the change feed check needs -#}
      {%- set commits = dbt_ivm._ivm_delta_commits(up.relation, dbt_ivm._ivm_delta_recent_commits()) -%}
      {%- do up.update({'recent_commits': commits}) -%}
      {%- do read.versions.update({up.name: (commits.keys() | max | string) if commits else none}) -%}
    {%- else -%}
      {%- do dbt_ivm._ivm_versions_field(read, 'v' ~ loop.index0, dbt_ivm._ivm_version_expr(up), up, 'version') -%}
    {%- endif -%}
    {#- the refresh history of an ivm upstream since the stored version -#}
    {%- if up.get('feed') == 'ivm' and up.get('after') is not none and up.get('history') is none -%}
      {%- do dbt_ivm._ivm_versions_field(read, 'h' ~ loop.index0, dbt_ivm._ivm_upstream_history_sql(up, up.after), up, 'history') -%}
    {%- endif -%}
    {#- a change log's latest version with an old image (delete or update_preimage): whether
        the change since the stored version deletes rows, known before it is netted. Spark
        merges it with the version's scalar subquery into one scan of the log. -#}
    {%- if up.kind == 'change_log' and up.get('feed') not in ('delta', 'diff', 'ivm') -%}
      {%- do dbt_ivm._ivm_versions_field(read, 'd' ~ loop.index0, "(select cast(max(case when _change_type in ('delete', "
          ~ "'update_preimage') then _commit_version end) as string) from " ~ up.change_log ~ ')', up, 'last_old_image') -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(read) }}
{% endmacro %}

{% macro _ivm_versions_field(read, name, sql, up, what) %}
  {%- do read.columns.append(sql ~ ' as ' ~ name) -%}
  {%- do read.fields.append([name, up, what]) -%}
{% endmacro %}

{#- The current version of an upstream that is not read through Delta's change data feed,
    as a scalar subquery (a string). -#}
{% macro _ivm_version_expr(up) %}
  {%- if up.get('feed') == 'diff' -%}
    {{ return(dbt_ivm._ivm_diff_version_sql(up)) }}
  {%- elif up.get('feed') == 'ivm' -%}
    {#- another ivm model stored as parquet: the stamp of its latest successful refresh
        (its change log may hold rows of an attempt that has not succeeded) -#}
    {{ return(dbt_ivm._ivm_upstream_version_sql(up)) }}
  {%- elif up.kind == 'change_log' -%}
    {#- rows without a version belong to no window: counted in the same scan, as 'null:<rows>' (IVM061) -#}
    {{ return('(select if(count_if(_commit_version is null) > 0, concat(\'null:\', count_if(_commit_version is null)), '
        ~ 'cast(max(_commit_version) as string)) from ' ~ up.change_log ~ ')') }}
  {%- endif -%}
  {{ return('(select cast(max(' ~ dbt_ivm._ivm_quote(up.watermark) ~ ') as string) from ' ~ up.relation ~ ')') }}
{% endmacro %}

{#- Complete read.versions, and each upstream's history and last_old_image, from `row`,
    whose columns include read.columns by name (see _ivm_versions_read). -#}
{% macro _ivm_versions_from_row(read, row) %}
  {%- for name, up, what in read.fields -%}
    {%- if what == 'version' -%}
      {%- do read.versions.update({up.name: row[name]}) -%}
    {%- elif what == 'history' -%}
      {%- do up.update({'history': fromjson(row[name] or '{}')}) -%}
    {%- else -%}
      {%- do up.update({what: row[name]}) -%}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}

{#- SQL literal comparing a version column to a stored version value. -#}
{% macro _ivm_version_literal(up, value, columns) %}
  {%- if up.kind == 'change_log' -%}
    {{ return('cast(' ~ value ~ ' as bigint)') }}
  {%- endif -%}
  {%- for col in columns if col.name | lower == up.watermark | lower -%}
    {{ return(dbt_ivm._ivm_typed_literals([value | string], col.data_type)[0]) }}
  {%- endfor -%}
{% endmacro %}

{#- The change-log rows of window (after, upto]; after none means from the beginning.
    A Delta change feed: table_changes(t, after + 1, upto), both bounds inclusive. -#}
{% macro _ivm_log_window(up, after, upto) %}
  {%- if up.get('feed') == 'delta' -%}
    {{ return(dbt_ivm._ivm_delta_changes_sql(up, after, upto)) }}
  {%- endif -%}
  {%- set conds = ['_commit_version <= ' ~ upto] -%}
  {%- if after is not none -%}{%- do conds.append('_commit_version > ' ~ after) -%}{%- endif -%}
  {{ return('select * from ' ~ up.change_log ~ ' where ' ~ conds | join(' and ')) }}
{% endmacro %}

{#- Net the change-log window per row key: many changes to one row collapse to the first
    old image and the last new image. One row per changed key with
      __ivm_old (the old image existed), __ivm_new (a new image exists),
      the upstream columns holding the new image when __ivm_new, else the old image,
    and rows whose old and new image are identical dropped (no-op updates).
    with_before adds __ivm_before, a struct of the old image's columns (aggregates
    subtract the old image of an updated row). __ivm_problem is the key's first change
    data violation (_ivm_change_problem_sql) or NULL; keys with one are always kept, and a
    refresh counting the view stops on them before anything is applied. -#}
{% macro ivm_netted_changes_sql(up, columns, after, upto, with_before=false) %}
  {{ return(adapter.dispatch('ivm_netted_changes_sql', 'dbt_ivm')(up, columns, after, upto, with_before)) }}
{% endmacro %}

{% macro default__ivm_netted_changes_sql(up, columns, after, upto, with_before=false) %}
  {%- if up.get('feed') == 'diff' -%}
    {{ return(dbt_ivm.ivm_diff_changes_sql(up, columns, after, upto, with_before)) }}
  {%- endif -%}
  {%- set key = dbt_ivm._ivm_quote_all(up.unique_key) -%}
  {%- set names = columns | map(attribute='name') | list -%}
  {%- set fields = [] -%}
  {%- for n in names -%}{%- do fields.append(dbt_ivm._ivm_string_literal(n) ~ ', ' ~ dbt_ivm._ivm_quote(n)) -%}{%- endfor -%}
  {%- set image = 'named_struct(' ~ fields | join(', ') ~ ", '__ivm_is_new', _change_type in ('insert', 'update_postimage'))" -%}
  {#- order of changes: by version, an old image before a new image within one version -#}
  {%- set order = "_commit_version * 2 + case when _change_type in ('update_preimage', 'delete') then 0 else 1 end" -%}
  {%- set same = [] -%}
  {%- set pick = [] -%}
  {%- set before = [] -%}
  {%- for n in names -%}
    {%- set q = dbt_ivm._ivm_quote(n) -%}
    {%- do same.append('f.' ~ q ~ ' <=> l.' ~ q) -%}
    {%- do pick.append('case when l.__ivm_is_new then l.' ~ q ~ ' else f.' ~ q ~ ' end as ' ~ q) -%}
    {%- do before.append(dbt_ivm._ivm_string_literal(n) ~ ', f.' ~ q) -%}
  {%- endfor -%}
  {%- if with_before -%}
    {%- do pick.append('case when not f.__ivm_is_new then named_struct(' ~ before | join(', ') ~ ') end as __ivm_before') -%}
  {%- endif -%}
  {#- keys that may be NULL (_ivm_keys_may_be_null) are matched with <=>, fine -#}
  {%- set key_null = ['false'] -%}
  {%- for k in key if not dbt_ivm._ivm_keys_may_be_null(up) -%}{%- do key_null.append('l.' ~ k ~ ' is null') -%}{%- endfor -%}
  {%- set problem = dbt_ivm._ivm_change_problem_sql('f.__ivm_is_new', 'l.__ivm_is_new', key_null | join(' or ')) -%}
  {%- set sql -%}
select {{ pick | join(', ') }}, not f.__ivm_is_new as __ivm_old, l.__ivm_is_new as __ivm_new, {{ problem }} as __ivm_problem
from (
  select min_by({{ image }}, {{ order }}) as f, max_by({{ image }}, {{ order }}) as l,
    {{ dbt_ivm._ivm_change_check_items(key) | join(',\n    ') }}
  from ({{ dbt_ivm._ivm_log_window(up, after, upto) }}) __ivm_log
  group by {{ key | join(', ') }}
) __ivm_net
where ({{ problem }}) is not null or ((not f.__ivm_is_new or l.__ivm_is_new)
  and not (not f.__ivm_is_new and l.__ivm_is_new and {{ same | join(' and ') }}))
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}

{#- The upstream as of `version`, for reading it in a refresh.
    * append-only: exactly the rows up to the watermark value `version`;
    * change log: the table as it is. A writer may commit while the refresh reads; the
      refresh then notices that the log advanced (ivm_current_versions is read again at
      the end) and flags the next run to re-apply by key, which repairs any row read
      ahead of `version`. This needs the log written no later than the table (the
      write-ahead contract in the README); Delta's change data feed is atomic. -#}
{% macro ivm_snapshot_sql(up, columns, version) %}
  {{ return(adapter.dispatch('ivm_snapshot_sql', 'dbt_ivm')(up, columns, version)) }}
{% endmacro %}

{% macro default__ivm_snapshot_sql(up, columns, version) %}
  {%- if up.get('feed') == 'diff' -%}
    {#- the snapshot this model took of it at that version -#}
    {{ return('(select ' ~ dbt_ivm._ivm_quote_all(columns | map(attribute='name')) | join(', ') ~ ' from '
              ~ dbt_ivm._ivm_diff_snapshot(up, version) ~ ')') }}
  {%- endif -%}
  {#- the plan's columns only (see _ivm_set_columns): unions with change images agree -#}
  {%- set cols = dbt_ivm._ivm_quote_all(columns | map(attribute='name')) | join(', ') -%}
  {%- if up.get('feed') == 'delta' and version is not none -%}
    {#- Delta time travel: exactly the fixed version, whatever commits meanwhile -#}
    {{ return('(select ' ~ cols ~ ' from ' ~ up.relation ~ ' version as of ' ~ version ~ ')') }}
  {%- endif -%}
  {%- if up.kind != 'append_only' -%}
    {{ return('(select ' ~ cols ~ ' from ' ~ up.relation ~ ')') }}
  {%- endif -%}
  {%- if version is none -%}
    {{ return('(select ' ~ cols ~ ' from ' ~ up.relation ~ ' where false)') }}
  {%- endif -%}
  {{ return('(select ' ~ cols ~ ' from ' ~ up.relation ~ ' where ' ~ dbt_ivm._ivm_quote(up.watermark) ~ ' <= ' ~
      dbt_ivm._ivm_version_literal(up, version, columns) ~ ')') }}
{% endmacro %}

{#- The upstreams whose reads may run ahead of the version a refresh fixed: change logs
    read with the table as it is. Delta change-feed upstreams are read exactly (time
    travel and table_changes at fixed versions), diff upstreams from their snapshots. -#}
{% macro _ivm_read_ahead_upstreams(upstreams) %}
  {{ return(upstreams | selectattr('kind', 'equalto', 'change_log') | rejectattr('feed', 'in', ['delta', 'diff']) | list) }}
{% endmacro %}

{#- Whether a change log read ahead advanced past the versions a refresh fixed at its start:
    a SQL boolean, evaluated in the statement that logs the refresh (after its reads), or
    none when the refresh reads no upstream ahead. -#}
{% macro _ivm_logs_advanced_sql(upstreams, versions) %}
  {%- set moved = [] -%}
  {%- for up in dbt_ivm._ivm_read_ahead_upstreams(upstreams) -%}
    {%- set v = versions[up.name] -%}
    {%- do moved.append('not (' ~ dbt_ivm._ivm_version_expr(up) ~ ' <=> ' ~ (dbt_ivm._ivm_string_literal(v) if v is not none
        else 'cast(null as string)') ~ ')') -%}
  {%- endfor -%}
  {{ return(moved | join(' or ') or none) }}
{% endmacro %}

{#- Delta change data feed (upstreams declared {change_feed: delta}). -#}

{#- How many of a Delta upstream's latest commits the version read keeps: a DESCRIBE HISTORY
    of ten costs what one of one does (~0.2 s, per statement), and covers the versions since
    the last refresh unless it ran more than nine commits ago. -#}
{% macro _ivm_delta_recent_commits() %}
  {{ return(10) }}
{% endmacro %}

{#- The change feed rows of versions (after, upto]: table_changes bounds are inclusive. -#}
{% macro _ivm_delta_changes_sql(up, after, upto) %}
  {%- set start = 0 if after is none else (after | int) + 1 -%}
  {{ return("select * from table_changes(" ~ dbt_ivm._ivm_string_literal(up.relation | string) ~ ", " ~ start ~ ", " ~ (upto | int) ~ ")") }}
{% endmacro %}

{#- ivm upstreams stored as parquet (feed 'ivm'). -#}

{#- The version of an ivm upstream: the table_version stamp of its latest successful refresh
    in the refresh log (a scalar subquery). -#}
{% macro _ivm_upstream_version_sql(up) %}
  {{ return("(select cast(max(table_version) as string) from " ~ dbt_ivm.ivm_refresh_log_relation() ~ " where model = "
            ~ dbt_ivm._ivm_string_literal(up.uid) ~ " and status = 'success')") }}
{% endmacro %}

{#- What happened to an ivm upstream since version `after` (a scalar subquery, JSON), counted
    per refresh attempt by its last log row: 'full' refreshes that rebuilt it, 'unlogged'
    incremental ones that wrote no change log (no ivm model read it then), and attempts
    whose last row is 'started' ('interrupted': their change-log rows may describe a change
    that never reached the table, or the table may hold a change whose rows are missing). -#}
{% macro _ivm_upstream_history_sql(up, after) %}
  {%- set a = 'cast(' ~ (after | int) ~ ' as bigint)' -%}
  {%- set sql -%}
(select to_json(named_struct(
   'full', count_if(st = 'success' and pa = 'full' and tv > {{ a }}),
   'unlogged', count_if(st = 'success' and pa = 'incremental' and not lg and tv > {{ a }}),
   'interrupted', count_if(st = 'started' and tv >= {{ a }})))
 from (select max_by(status, logged_at) as st, max_by(path, logged_at) as pa, max(table_version) as tv,
              max_by(coalesce(changes_logged, false), logged_at) as lg
       from {{ dbt_ivm.ivm_refresh_log_relation() }} where model = {{ dbt_ivm._ivm_string_literal(up.uid) }} group by refresh_id))
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}

{#- Before an incremental refresh: the reason to rebuild in full because an ivm upstream's
    change log cannot be trusted since the stored version (it was rebuilt in full, had an
    interrupted refresh, or refreshed without writing its log) or a diff upstream's snapshot
    is gone, or none. Reads the history ivm_current_versions fetched. -#}
{% macro _ivm_upstream_rebuild_reason(plan, versions_to) %}
  {%- for p in plan if p.up.get('feed') == 'diff' and p.up.snapshot_missing -%}
    {{ return('the snapshot ' ~ dbt_ivm._ivm_diff_snapshot(p.up, p.up.after) ~ ' of upstream ' ~ p.up.name ~
        ' (change_feed: diff) that the last refresh took is gone') }}
  {%- endfor -%}
  {%- for p in plan if p.up.get('feed') == 'ivm' -%}
    {%- set what = 'upstream ' ~ p.up.name ~ ' (an ivm model)' -%}
    {%- if p.up.get('after') is none -%}
      {%- if versions_to.get(p.up.name) is not none -%}
        {{ return(what ~ ' has no version stored by the last refresh of this model') }}
      {%- endif -%}
      {%- continue -%}
    {%- endif -%}
    {%- set h = p.up.get('history') or {} -%}
    {%- if h.get('interrupted') -%}
      {{ return(what ~ ' had an interrupted refresh since the last refresh of this model: its change log may not match its table') }}
    {%- endif -%}
    {%- if h.get('full') -%}
      {{ return(what ~ ' was rebuilt in full since the last refresh of this model') }}
    {%- endif -%}
    {%- if h.get('unlogged') -%}
      {{ return(what ~ ' was refreshed without writing its change log (no ivm model depended on it then)') }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}

{#- A small change set is read once: the change counts collect its rows as text (at most
    _ivm_row_list_max(width) of them, of a Delta change feed whose commits tell they are few)
    and every later statement reads them from that text instead of reading the change data
    again. Only for columns whose text form casts back to the same value: integers,
    decimals, dates, strings, booleans, and timestamps (as microseconds since the epoch,
    which no time zone shifts). width is the values a listed row holds: at most 1,000 rows
    and 40,000 values, since the text is written into every statement that reads the change
    (1,000 TPC-H lineitem rows with both images: about 500 KB). -#}
{% macro _ivm_row_list_max(width) %}
  {{ return([1000, 40000 // ([width, 1] | max)] | min) }}
{% endmacro %}

{#- The kind of text form a column of type dtype has (see above), or none. -#}
{% macro _ivm_row_text_kind(dtype) %}
  {%- set t = (dtype or '') | lower | trim -%}
  {%- if t in ('boolean', 'timestamp') -%}{{ return(t) }}{%- endif -%}
  {{ return(dbt_ivm._ivm_range_kind(t)) }}
{% endmacro %}

{#- Columns whose rows can be listed: the columns when every one has a text form, else
    none. A changed upstream's are set as p.row_columns once per refresh. -#}
{% macro _ivm_listable_row_columns(columns) %}
  {%- for c in columns if not dbt_ivm._ivm_row_text_kind(c.data_type) -%}{{ return(none) }}{%- endfor -%}
  {{ return(columns) }}
{% endmacro %}

{#- The text forms of listable columns, one SQL each, read as `qualifier` ~ the column. -#}
{% macro _ivm_row_texts_sql(columns, qualifier='') %}
  {%- set texts = [] -%}
  {%- for c in columns -%}{%- do texts.append(dbt_ivm._ivm_row_text_sql(qualifier ~ dbt_ivm._ivm_quote(c.name), c.data_type)) -%}{%- endfor -%}
  {{ return(texts) }}
{% endmacro %}

{#- The values of listable columns from a listed row's texts (__ivm_a, see
    _ivm_text_rows_relation) from position `first` on, one SQL each. -#}
{% macro _ivm_row_values_sql(columns, first=0) %}
  {%- set values = [] -%}
  {%- for c in columns -%}{%- do values.append(dbt_ivm._ivm_row_value_sql('__ivm_a[' ~ (first + loop.index0) ~ ']', c.data_type)) -%}{%- endfor -%}
  {{ return(values) }}
{% endmacro %}

{#- SQL of the text form of a listable column's value expr. -#}
{% macro _ivm_row_text_sql(expr, dtype) %}
  {{ return('cast(' ~ ('unix_micros(' ~ expr ~ ')' if dbt_ivm._ivm_row_text_kind(dtype) == 'timestamp' else expr) ~ ' as string)') }}
{% endmacro %}

{#- SQL of the value of column type dtype from its text form (expr, a string). -#}
{% macro _ivm_row_value_sql(expr, dtype) %}
  {%- if dbt_ivm._ivm_row_text_kind(dtype) == 'timestamp' -%}{{ return('timestamp_micros(cast(' ~ expr ~ ' as bigint))') }}{%- endif -%}
  {{ return('cast(' ~ expr ~ ' as ' ~ dtype ~ ')') }}
{% endmacro %}

{#- A bound on p's netted change rows, known for a Delta change feed whose commits after the
    stored version are all among those the version read kept (up.recent_commits) and tell
    their rows (_ivm_delta_commit_rows); else none. -#}
{% macro _ivm_change_rows_bound(p) %}
  {%- set commits = p.up.get('recent_commits') or {} -%}
  {%- if p.up.get('feed') != 'delta' or p['from'] is none or p.to is none -%}{{ return(none) }}{%- endif -%}
  {%- set n = namespace(rows=0) -%}
  {%- for v in range((p['from'] | int) + 1, (p.to | int) + 1) -%}
    {%- set rows = commits[v].rows if v in commits else none -%}
    {%- if rows is none -%}{{ return(none) }}{%- endif -%}
    {%- set n.rows = n.rows + rows -%}
  {%- endfor -%}
  {{ return(n.rows) }}
{% endmacro %}

{#- How the counting pass may collect a list of up to `most` of p's change rows (or their
    values) whatever the change holds: true when p.change_bound shows them that few, false
    when it shows more or the change cannot be counted apart from its netting (a diff
    upstream). Otherwise a gate {row, all} over the column __ivm_size the counting pass
    adds (_ivm_change_size_sql: the rows of p's change-log window, which netting can only
    shrink): `row` lets a row into the aggregate only when the window holds at most `most`
    rows, and `all` is true only then, so that the list is NULL (not listed) instead of
    empty when it did not collect. -#}
{% macro _ivm_change_gate(p, most) %}
  {%- if p.change_bound is not none -%}{{ return(p.change_bound <= most) }}{%- endif -%}
  {%- if p.up.kind != 'change_log' or p.up.get('feed') == 'diff' -%}{{ return(false) }}{%- endif -%}
  {{ return({'row': '__ivm_size <= ' ~ most, 'all': 'max(__ivm_size) <= ' ~ most}) }}
{% endmacro %}

{#- The relation the counting pass reads p's change set from: p.change_view, with the
    column __ivm_size (the rows of its change-log window, a scalar subquery evaluated once:
    a scan of the window's versions, no netting) when its lists are gated (p.inline_lists,
    see _ivm_key_listing). -#}
{% macro _ivm_change_size_sql(p) %}
  {%- if p.inline_lists is not mapping -%}{{ return(p.change_view) }}{%- endif -%}
  {{ return('(select *, (select count(*) from (' ~ dbt_ivm._ivm_log_window(p.up, p['from'], p.to) ~ ') __ivm_w) as __ivm_size from '
      ~ p.change_view ~ ' __ivm_z)') }}
{% endmacro %}

{#- The aggregate the change counts collect p's change set with, in their own pass over it:
    a JSON array of its rows as text (the columns, with_before the old image's, then
    __ivm_old and __ivm_new), NULL above _ivm_row_list_max(width) rows; none when they cannot be
    listed or are neither known to be few nor counted (see _ivm_change_gate), which keeps
    what the aggregate holds small whatever the change. -#}
{% macro _ivm_changed_rows_sql(p, with_before) %}
  {%- set columns = p.row_columns -%}
  {%- set most = dbt_ivm._ivm_row_list_max((columns or []) | length * (2 if with_before else 1) + 2) -%}
  {%- set gate = dbt_ivm._ivm_change_gate(p, most) -%}
  {%- if columns is none or not gate -%}{{ return(none) }}{%- endif -%}
  {%- set texts = dbt_ivm._ivm_row_texts_sql(columns) + (dbt_ivm._ivm_row_texts_sql(columns, '__ivm_before.') if with_before else [])
      + ['cast(__ivm_old as string)', 'cast(__ivm_new as string)'] -%}
  {{ return(dbt_ivm._ivm_gated_aggregate('case when count(*) <= ' ~ most ~ ' then to_json(collect_list({})) end',
      'array(' ~ texts | join(', ') ~ ')', gate)) }}
{% endmacro %}

{#- SQL of the aggregate template fn ('{}' marks its argument) over value in the counting
    pass, under gate (see _ivm_change_gate): true collects every row; a gate collects rows
    only when the change is small enough and is NULL otherwise. -#}
{% macro _ivm_gated_aggregate(fn, value, gate) %}
  {%- if gate is mapping -%}
    {{ return('case when ' ~ gate.all ~ ' then ' ~ fn | replace('{}', 'case when ' ~ gate.row ~ ' then ' ~ value ~ ' end') ~ ' end') }}
  {%- endif -%}
  {{ return(fn | replace('{}', value)) }}
{% endmacro %}

{#- p's change set from the counted text (see _ivm_changed_rows_sql), or none when it was not
    listed: {view: its rows read from that text (one string literal, exploded and cast back
    column by column), with the columns of ivm_netted_changes_sql; ids and sets: the JSON
    texts that _ivm_changed_ids_sql and _ivm_key_sets_sql would have read (the changed row
    keys; per range column not listed by them, its distinct non-NULL values in the new
    images and, with_before, the old ones)}. -#}
{% macro _ivm_listed_change(text, p, with_before) %}
  {%- set listed = fromjson(text) if text is not none else none -%}
  {%- if listed is none -%}{{ return(none) }}{%- endif -%}
  {%- set columns = p.row_columns -%}
  {%- set n = columns | length -%}
  {%- set at = {} -%}
  {%- set out, before = [], [] -%}
  {%- set values, olds = dbt_ivm._ivm_row_values_sql(columns), dbt_ivm._ivm_row_values_sql(columns, n) -%}
  {%- for c in columns -%}
    {%- do at.update({c.name | lower: loop.index0}) -%}
    {%- do out.append(values[loop.index0] ~ ' as ' ~ dbt_ivm._ivm_quote(c.name)) -%}
    {%- if with_before -%}{%- do before.append(dbt_ivm._ivm_string_literal(c.name) ~ ', ' ~ olds[loop.index0]) -%}{%- endif -%}
  {%- endfor -%}
  {%- set flags = n * (2 if with_before else 1) -%}
  {%- if with_before -%}
    {%- do out.append('case when cast(__ivm_a[' ~ flags ~ '] as boolean) then named_struct(' ~ before | join(', ') ~ ') end as __ivm_before') -%}
  {%- endif -%}
  {%- do out.append('cast(__ivm_a[' ~ flags ~ '] as boolean) as __ivm_old') -%}
  {%- do out.append('cast(__ivm_a[' ~ (flags + 1) ~ '] as boolean) as __ivm_new') -%}
  {%- do out.append('cast(null as string) as __ivm_problem') -%}
  {%- set ids, sets = [], {} -%}
  {%- for col, r in p.ranged.items() if col not in p.by_ids -%}{%- do sets.update({col: []}) -%}{%- endfor -%}
  {%- for r in listed -%}
    {%- set key = [] -%}
    {%- for k in p.up.unique_key -%}{%- do key.append(r[at[k | lower]]) -%}{%- endfor -%}
    {%- do ids.append(key) -%}
    {%- for col, values in sets.items() -%}
      {%- set found = [r[at[col]] if r[-1] == 'true' else none] + ([r[n + at[col]]] if with_before else []) -%}
      {%- for v in found if v is not none and v not in values -%}{%- do values.append(v) -%}{%- endfor -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- set encoded = {} -%}
  {%- for col, values in sets.items() -%}{%- do encoded.update({col: tojson(values)}) -%}{%- endfor -%}
  {{ return({'view': dbt_ivm._ivm_text_rows_relation(text, out), 'ids': tojson(ids), 'sets': encoded}) }}
{% endmacro %}

{#- Rows listed as text (a JSON array of one array of texts per row, see _ivm_row_text_sql)
    read back as a relation in FROM: one string literal, exploded; items are its select items,
    SQL over __ivm_a (a row's array of texts). -#}
{% macro _ivm_text_rows_relation(text, items) %}
  {{ return('(select ' ~ items | join(', ') ~ ' from (select explode(from_json(' ~ dbt_ivm._ivm_string_literal(text)
      ~ ", 'array<array<string>>')) as __ivm_a) __ivm_l)") }}
{% endmacro %}
