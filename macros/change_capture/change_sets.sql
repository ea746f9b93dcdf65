{#- Versions, change sets and version-consistent reads of upstreams.
    Versions are carried as strings: a change log's _commit_version, or an append-only
    upstream's watermark value. A missing version (empty log or table) is none. -#}

{#- Current version of every upstream, fixed once at the start of a refresh, in one query. -#}
{% macro ivm_current_versions(upstreams) %}
  {{ return(adapter.dispatch('ivm_current_versions', 'dbt_ivm')(upstreams)) }}
{% endmacro %}

{% macro default__ivm_current_versions(upstreams) %}
  {%- set exprs = [] -%}
  {%- for up in upstreams -%}
    {%- if up.kind == 'change_log' -%}
      {%- do exprs.append('(select cast(max(_commit_version) as string) from ' ~ up.change_log ~ ') as v' ~ loop.index0) -%}
    {%- else -%}
      {%- do exprs.append('(select cast(max(' ~ dbt_ivm.ivm_quote(up.watermark) ~ ') as string) from ' ~ up.relation ~ ') as v' ~ loop.index0) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set row = run_query('select ' ~ exprs | join(', ')).rows[0] -%}
  {%- set versions = {} -%}
  {%- for up in upstreams -%}
    {%- do versions.update({up.name: row[loop.index0]}) -%}
  {%- endfor -%}
  {{ return(versions) }}
{% endmacro %}

{#- SQL literal comparing a version column to a stored version value. -#}
{% macro ivm_version_literal(up, value, columns) %}
  {%- if up.kind == 'change_log' -%}
    {{ return('cast(' ~ value ~ ' as bigint)') }}
  {%- endif -%}
  {%- set col = columns | selectattr('name', 'equalto', up.watermark) | first -%}
  {{ return("cast('" ~ (value | string).replace("\\", "\\\\").replace("'", "\\'") ~ "' as " ~ col.data_type ~ ")") }}
{% endmacro %}

{#- The change-log rows of window (after, upto]: after none means from the beginning,
    upto none means to the end. -#}
{% macro ivm_log_window(up, after, upto) %}
  {%- set conds = [] -%}
  {%- if after is not none -%}{%- do conds.append('_commit_version > ' ~ after) -%}{%- endif -%}
  {%- if upto is not none -%}{%- do conds.append('_commit_version <= ' ~ upto) -%}{%- endif -%}
  {{ return('select * from ' ~ up.change_log ~ (' where ' ~ conds | join(' and ') if conds else '')) }}
{% endmacro %}

{#- Net the change-log window per row key: many changes to one row collapse to the first
    old image and the last new image. One row per changed key with
      __ivm_old (the old image existed), __ivm_new (a new image exists),
      the upstream columns holding the new image when __ivm_new, else the old image,
    and rows whose old and new image are identical dropped (no-op updates). -#}
{% macro ivm_netted_changes_sql(up, columns, after, upto) %}
  {{ return(adapter.dispatch('ivm_netted_changes_sql', 'dbt_ivm')(up, columns, after, upto)) }}
{% endmacro %}

{% macro default__ivm_netted_changes_sql(up, columns, after, upto) %}
  {%- set key = dbt_ivm.ivm_quote_all(up.unique_key) | join(', ') -%}
  {%- set cols = dbt_ivm.ivm_quote_all(columns | map(attribute='name')) | list -%}
  {%- set same = [] -%}
  {%- for c in cols -%}{%- do same.append('f.' ~ c ~ ' <=> l.' ~ c) -%}{%- endfor -%}
  {%- set sel_new = [] -%}
  {%- for c in cols -%}{%- do sel_new.append('case when l.__ivm_is_new then l.' ~ c ~ ' else f.' ~ c ~ ' end as ' ~ c) -%}{%- endfor -%}
  {%- set key_match = [] -%}
  {%- for k in up.unique_key -%}{%- do key_match.append('f.' ~ dbt_ivm.ivm_quote(k) ~ ' <=> l.' ~ dbt_ivm.ivm_quote(k)) -%}{%- endfor -%}
  {%- set sql -%}
with __ivm_window as (
  select *,
    _change_type in ('insert', 'update_postimage') as __ivm_is_new,
    row_number() over (partition by {{ key }} order by _commit_version, case when _change_type in ('update_preimage', 'delete') then 0 else 1 end) as __ivm_first,
    row_number() over (partition by {{ key }} order by _commit_version desc, case when _change_type in ('update_preimage', 'delete') then 0 else 1 end desc) as __ivm_last
  from ({{ dbt_ivm.ivm_log_window(up, after, upto) }}) __ivm_log
)
select {{ sel_new | join(', ') }},
  not f.__ivm_is_new as __ivm_old,
  l.__ivm_is_new as __ivm_new
from (select * from __ivm_window where __ivm_first = 1) f
join (select * from __ivm_window where __ivm_last = 1) l on {{ key_match | join(' and ') }}
where not (not f.__ivm_is_new and l.__ivm_is_new and {{ same | join(' and ') }})
  and (not f.__ivm_is_new or l.__ivm_is_new)
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}

{#- The upstream as it was at `version` (none: before any logged change), read from the
    current table and compensated with the log rows written after `version`: rows changed
    later are replaced by their first old image. Exact as long as the log is written
    before (or with) the table, the write-ahead contract in the README. -#}
{% macro ivm_snapshot_sql(up, columns, version) %}
  {{ return(adapter.dispatch('ivm_snapshot_sql', 'dbt_ivm')(up, columns, version)) }}
{% endmacro %}

{% macro default__ivm_snapshot_sql(up, columns, version) %}
  {%- set cols = dbt_ivm.ivm_quote_all(columns | map(attribute='name')) | list -%}
  {%- if up.kind == 'append_only' -%}
    {%- if version is none -%}
      {{ return('(select ' ~ cols | join(', ') ~ ' from ' ~ up.relation ~ ' where false)') }}
    {%- endif -%}
    {{ return('(select ' ~ cols | join(', ') ~ ' from ' ~ up.relation ~ ' where ' ~ dbt_ivm.ivm_quote(up.watermark) ~ ' <= ' ~ dbt_ivm.ivm_version_literal(up, version, columns) ~ ')') }}
  {%- endif -%}
  {%- set key_match = [] -%}
  {%- for k in up.unique_key -%}{%- do key_match.append('__ivm_t.' ~ dbt_ivm.ivm_quote(k) ~ ' <=> __ivm_l.' ~ dbt_ivm.ivm_quote(k)) -%}{%- endfor -%}
  {%- set key = dbt_ivm.ivm_quote_all(up.unique_key) | join(', ') -%}
  {%- set sql -%}
(select {{ cols | join(', ') }} from {{ up.relation }} __ivm_t
   left anti join ({{ dbt_ivm.ivm_log_window(up, version, none) }}) __ivm_l on {{ key_match | join(' and ') }}
 union all
 select {{ cols | join(', ') }} from (
   select *, row_number() over (partition by {{ key }} order by _commit_version, case when _change_type in ('update_preimage', 'delete') then 0 else 1 end) as __ivm_first
   from ({{ dbt_ivm.ivm_log_window(up, version, none) }}) __ivm_later
 ) __ivm_f where __ivm_first = 1 and _change_type in ('update_preimage', 'delete'))
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}
