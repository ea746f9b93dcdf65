{#- Diff capture (upstreams declared {unique_key: [...], change_feed: diff}): for a table
    with no change log and no change data feed (a seed, a `table` model, a loader's full
    reload), a model keeps a snapshot of it per version it has read, a parquet table
    __ivm_snap__<model>__<upstream>__v<version> next to the model. The version is the stamp
    of the refresh that took the snapshot (_ivm_table_stamp). A refresh first checks the
    table against the snapshot of the stored version (one scan of each); when they differ it
    takes a new snapshot, and the changes are the difference of the two snapshots, netted
    per key like a change log's. Every read of the upstream in a refresh reads a snapshot,
    so a writer that reloads the table meanwhile cannot make the refresh read rows its
    changes do not describe. Snapshots hold whole rows: an aggregate subtracts the old image
    of a changed row, and a keyed recompute finds the slices its old image belonged to. -#}

{#- The snapshot of a diff upstream at `version`. -#}
{% macro _ivm_diff_snapshot(up, version) %}
  {{ return(api.Relation.create(database=up.snapshots.database, schema=up.snapshots.schema,
                                identifier=up.snapshots.prefix ~ version, type='table')) }}
{% endmacro %}

{#- The version of a diff upstream for ivm_current_versions, as a SQL string expression: the
    stored version up.after when the table equals its snapshot (same row count, no row of
    the table missing from the snapshot), else the stamp of this refresh (up.stamp). A
    constant when there is nothing to compare with (first build, snapshot gone, columns
    changed). -#}
{% macro _ivm_diff_version_sql(up) %}
  {%- set new = dbt_ivm._ivm_string_literal(up.stamp | string) -%}
  {%- if up.after is none or not up.diff_comparable -%}{{ return(new) }}{%- endif -%}
  {%- set snapshot = dbt_ivm._ivm_diff_snapshot(up, up.after) -%}
  {%- set cols = dbt_ivm._ivm_quote_all(up.diff_columns | map(attribute='name')) | join(', ') -%}
  {%- set sql -%}
case when (select count(*) from {{ up.relation }}) = (select count(*) from {{ snapshot }})
  and (select count(*) from (select {{ cols }} from {{ up.relation }} except all select {{ cols }} from {{ snapshot }}) __ivm_d) = 0
  then {{ dbt_ivm._ivm_string_literal(up.after | string) }} else {{ new }} end
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}

{#- The netted changes of a diff upstream between the snapshots of versions after and upto,
    in the form of ivm_netted_changes_sql: one row per changed key with the new image (or
    the old one for a delete), __ivm_old, __ivm_new, __ivm_problem (always NULL: keys were
    checked when each snapshot was taken) and, with_before, __ivm_before. -#}
{% macro ivm_diff_changes_sql(up, columns, after, upto, with_before=false) %}
  {{ return(adapter.dispatch('ivm_diff_changes_sql', 'dbt_ivm')(up, columns, after, upto, with_before)) }}
{% endmacro %}

{% macro default__ivm_diff_changes_sql(up, columns, after, upto, with_before=false) %}
  {%- set cols = dbt_ivm._ivm_quote_all(columns | map(attribute='name')) | list -%}
  {%- set pick, same, before, match = [], [], [], [] -%}
  {%- for c in cols -%}
    {%- do pick.append('case when __ivm_n.__ivm_row then __ivm_n.' ~ c ~ ' else __ivm_o.' ~ c ~ ' end as ' ~ c) -%}
    {%- do same.append('__ivm_n.' ~ c ~ ' <=> __ivm_o.' ~ c) -%}
    {%- do before.append(dbt_ivm._ivm_string_literal(columns[loop.index0].name) ~ ', __ivm_o.' ~ c) -%}
  {%- endfor -%}
  {%- for k in dbt_ivm._ivm_quote_all(up.unique_key) -%}{%- do match.append('__ivm_n.' ~ k ~ ' <=> __ivm_o.' ~ k) -%}{%- endfor -%}
  {%- if with_before -%}
    {%- do pick.append('case when __ivm_o.__ivm_row then named_struct(' ~ before | join(', ') ~ ') end as __ivm_before') -%}
  {%- endif -%}
  {%- set sql -%}
select {{ pick | join(', ') }}, __ivm_o.__ivm_row is not null as __ivm_old, __ivm_n.__ivm_row is not null as __ivm_new,
  cast(null as string) as __ivm_problem
from (select {{ cols | join(', ') }}, true as __ivm_row from {{ dbt_ivm._ivm_diff_snapshot(up, upto) }}) __ivm_n
full outer join (select {{ cols | join(', ') }}, true as __ivm_row from {{ dbt_ivm._ivm_diff_snapshot(up, after) }}) __ivm_o
  on {{ match | join(' and ') }}
where __ivm_n.__ivm_row is null or __ivm_o.__ivm_row is null or not ({{ same | join(' and ') }})
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}

{#- Before a full build or an incremental refresh: take the snapshot of every diff upstream
    whose version is this refresh's stamp, and check its key (never NULL, unique: IVM062,
    IVM064, the new snapshot dropped). Records the scans in entry: its message and phase_s 'capture'. -#}
{% macro _ivm_capture_diffs(model, plan, versions_to, entry) %}
  {%- set started = modules.datetime.datetime.utcnow() -%}
  {%- set notes = [] -%}
  {%- for p in plan if p.up.get('feed') == 'diff' and versions_to[p.up.name] != (p.up.after | string if p.up.after is not none else none) -%}
    {%- set snapshot = dbt_ivm._ivm_diff_snapshot(p.up, versions_to[p.up.name]) -%}
    {%- set cols = dbt_ivm._ivm_quote_all(p.columns | map(attribute='name')) | join(', ') -%}
    {%- do run_query('create table ' ~ snapshot ~ ' using parquet as select ' ~ cols ~ ' from ' ~ p.up.relation) -%}
    {%- set key = dbt_ivm._ivm_quote_all(p.up.unique_key) | list -%}
    {%- set pairs = [] -%}
    {%- for k in p.up.unique_key -%}{%- do pairs.append(dbt_ivm._ivm_string_literal(k) ~ ', ' ~ key[loop.index0]) -%}{%- endfor -%}
    {%- set shown = 'to_json(named_struct(' ~ pairs | join(', ') ~ "), map('ignoreNullFields', 'false'))" -%}
    {%- set dups = 'select ' ~ shown ~ ' as k from ' ~ snapshot ~ ' group by ' ~ key | join(', ') ~ ' having count(*) > 1' -%}
    {#- one grouping finds the duplicates: their number and the first of them -#}
    {%- set row = run_query('select count(*), (select ' ~ shown ~ ' from ' ~ snapshot ~ ' where ' ~ key | join(' is null or ')
        ~ " is null limit 1), (select to_json(named_struct('n', count(*), 'first', min(k))) from (" ~ dups ~ ')) from '
        ~ snapshot).rows[0] -%}
    {%- set duplicated = fromjson(row[2]) -%}
    {%- if row[1] is not none or duplicated.n > 0 -%}
      {%- do run_query('drop table if exists ' ~ snapshot) -%}
      {%- set code = 'IVM062' if row[1] is not none else 'IVM064' -%}
      {%- set detail = ('key ' ~ row[1] ~ ' has a NULL') if row[1] is not none else
          (duplicated.n ~ ' key value(s) have more than one row, e.g. ' ~ duplicated.first) -%}
      {{ exceptions.raise_compiler_error(dbt_ivm._ivm_change_data_error(model.name, code, p.up.name,
          'In ' ~ p.up.relation ~ ' (change_feed: diff, unique_key: ' ~ p.up.unique_key | join(', ') ~ '): ' ~ detail ~ '.')) }}
    {%- endif -%}
    {%- do p.up.update({'captured': true}) -%}
    {%- do notes.append(p.up.name ~ ': diff capture scanned ' ~ row[0] ~ ' rows') -%}
  {%- endfor -%}
  {%- if notes -%}
    {%- set seconds = dbt_ivm._ivm_seconds_since(started) -%}
    {%- do entry.update({'message': notes | join('; '), 'phase_s': {'capture': seconds}}) -%}
    {{ log('dbt_ivm: ' ~ model.name ~ ': ' ~ notes | join('; ') ~ ' in ' ~ seconds ~ ' s', info=true) }}
  {%- endif -%}
{% endmacro %}

{#- After a successful refresh that took snapshots: drop the other snapshots of those
    upstreams (the last success no longer needs older ones; a snapshot of an attempt that
    stopped is never read). One SHOW TABLES per captured upstream. -#}
{% macro _ivm_drop_stale_snapshots(plan, versions_to) %}
  {%- for p in plan if p.up.get('captured') -%}
    {%- set keep = p.up.snapshots.prefix ~ versions_to[p.up.name] -%}
    {%- for r in run_query("show tables in " ~ p.up.snapshots.schema ~ " like '" ~ p.up.snapshots.prefix ~ "*'").rows
          if r[1] | lower != keep and modules.re.fullmatch(p.up.snapshots.prefix ~ '[0-9]+', r[1] | lower) -%}
      {%- do run_query('drop table if exists ' ~ dbt_ivm._ivm_diff_snapshot(p.up, r[1][p.up.snapshots.prefix | length:])) -%}
    {%- endfor -%}
  {%- endfor -%}
{% endmacro %}
