{#- Delta and merge of aggregate views (seed 000), on the stored form described in
    _ivm_aggregate_spec. -#}

{#- The columns that identify a row of the table: the group keys, or for a DISTINCT view
    its visible columns. -#}
{% macro _ivm_aggregate_keys(spec, visible) %}
  {{ return(spec.groups | map(attribute='name') | list if spec.kind == 'aggregate' else visible) }}
{% endmacro %}

{#- Names of the columns of the delta template, given the table's visible columns. -#}
{% macro _ivm_aggregate_change_names(spec, visible) %}
  {%- if spec.kind == 'distinct' -%}{{ return(visible + ['__ivm_count']) }}{%- endif -%}
  {%- set names = [] -%}
  {%- for i in range(spec['items'] | length) if not spec['items'][i].calls -%}{%- do names.append(visible[i]) -%}{%- endfor -%}
  {{ return(names + spec.groups | map(attribute='name') | list + ['__ivm_count'] + spec.states | map(attribute='name') | list) }}
{% endmacro %}

{#- One signed change term's rows: the delta template's columns, named as in `names`, plus
    __ivm_sign. An aggregate term is renamed by position (its select list is explicit); a
    DISTINCT term is read by name, since a star in its select list also expands the
    relations' __ivm_sign columns. A term whose signs carry tags (term.tagged, see
    _ivm_signed_change_terms) keeps the rows whose tags agree, and its sign is their signs'. -#}
{% macro _ivm_signed_term_sql(spec, names, term) %}
  {%- set cols = dbt_ivm._ivm_quote_all(names) | join(', ') -%}
  {%- set tags = [] -%}
  {%- for i in term.tagged -%}{%- do tags.append(spec.sign_of[i]) -%}{%- endfor -%}
  {%- set factors = [] -%}
  {%- for s in spec.signs -%}{%- do factors.append('if(' ~ s ~ ' < 0, -1, 1)' if s in tags else s) -%}{%- endfor -%}
  {%- set agree = [] -%}
  {%- for s in tags[1:] -%}{%- do agree.append('abs(' ~ tags[0] ~ ') = abs(' ~ s ~ ')') -%}{%- endfor -%}
  {%- set where = ('\nwhere ' ~ agree | join(' and ')) if agree else '' -%}
  {%- if spec.kind == 'distinct' -%}
    {{ return('select ' ~ cols ~ ', ' ~ factors | join(' * ') ~ ' as __ivm_sign from (\n' ~ term.sql ~ '\n) __ivm_t' ~ where) }}
  {%- endif -%}
  {{ return('select ' ~ cols ~ ', ' ~ factors | join(' * ') ~ ' as __ivm_sign from (\n' ~ term.sql ~ '\n) __ivm_t(' ~
      (dbt_ivm._ivm_quote_all(names) + spec.signs) | join(', ') ~ ')' ~ where) }}
{% endmacro %}

{#- Signed per-group deltas: the delta template evaluated on each signed change term, the
    partial states multiplied by their sign and summed per group. One row per affected
    group. -#}
{% macro ivm_aggregate_change_sql(spec, names, keys, terms) %}
  {{ return(adapter.dispatch('ivm_aggregate_change_sql', 'dbt_ivm')(spec, names, keys, terms)) }}
{% endmacro %}

{% macro default__ivm_aggregate_change_sql(spec, names, keys, terms) %}
  {%- set parts = [] -%}
  {%- for t in terms -%}{%- do parts.append(dbt_ivm._ivm_signed_term_sql(spec, names, t)) -%}{%- endfor -%}
  {%- set out = [] -%}
  {%- for k in keys -%}{%- do out.append(dbt_ivm._ivm_quote(k)) -%}{%- endfor -%}
  {%- for name in names if name not in keys and not name.startswith('__ivm_') -%}
    {%- do out.append('any_value(' ~ dbt_ivm._ivm_quote(name) ~ ') as ' ~ dbt_ivm._ivm_quote(name)) -%}
  {%- endfor -%}
  {%- do out.append('sum(__ivm_sign * __ivm_count) as __ivm_count') -%}
  {%- for st in spec.states -%}
    {%- set agg = {'add': 'sum(__ivm_sign * ' ~ st.name ~ ')', 'least': 'min(' ~ st.name ~ ')', 'greatest': 'max(' ~ st.name ~ ')'}[st.merge] -%}
    {%- do out.append(agg ~ ' as ' ~ st.name) -%}
  {%- endfor -%}
  {%- set sql -%}
select {{ out | join(', ') }}
from (
{{ parts | join('\nunion all\n') }}
) __ivm_d
{%- if keys %}
group by {{ dbt_ivm._ivm_quote_all(keys) | join(', ') }}
{%- endif -%}
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}

{#- Groups whose rows change: the keys of the signed change terms. -#}
{% macro _ivm_affected_groups_sql(spec, names, keys, terms) %}
  {%- set parts = [] -%}
  {%- for t in terms -%}
    {%- do parts.append('select ' ~ (dbt_ivm._ivm_quote_all(keys) | join(', ') if keys else '1 as __ivm_one') ~ ' from (\n' ~
        dbt_ivm._ivm_signed_term_sql(spec, names, t) ~ '\n) __ivm_s') -%}
  {%- endfor -%}
  {{ return('select distinct * from (\n' ~ parts | join('\nunion all\n') ~ '\n) __ivm_a') }}
{% endmacro %}

{#- The merged rows of the affected groups: stored state + delta, in the table's column
    order, plus __ivm_existed (the group had a row before). Every affected group is listed,
    also those whose row count reaches 0: the apply deletes them all and re-inserts those
    with rows (a query without GROUP BY keeps its one row). Needs every state mergeable for
    this change: additive states always, min/max only when the change inserts only. -#}
{% macro ivm_aggregate_merge_sql(spec, target, target_columns, change_sql, keys, visible) %}
  {{ return(adapter.dispatch('ivm_aggregate_merge_sql', 'dbt_ivm')(spec, target, target_columns, change_sql, keys, visible)) }}
{% endmacro %}

{#- visible: the model's output names in the order of its select list. -#}
{% macro default__ivm_aggregate_merge_sql(spec, target, target_columns, change_sql, keys, visible) %}
  {%- set merged = [] -%}
  {%- for c in dbt_ivm._ivm_aggregate_merged_columns(spec, target_columns, visible, '__ivm_t', '__ivm_d') -%}
    {%- do merged.append(c.sql ~ ' as ' ~ dbt_ivm._ivm_quote(c.name)) -%}
  {%- endfor -%}
  {%- set on = [] -%}
  {%- for k in keys -%}{%- do on.append('__ivm_t.' ~ dbt_ivm._ivm_quote(k) ~ ' <=> __ivm_d.' ~ dbt_ivm._ivm_quote(k)) -%}{%- endfor -%}
  {%- set sql -%}
select {{ merged | join(', ') }}, __ivm_t.__ivm_count is not null as __ivm_existed
from (
{{ change_sql }}
) __ivm_d
left join {{ target }} __ivm_t on {{ on | join(' and ') if on else 'true' }}
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}

{#- Every column of the table for an affected group after the change, [{name, sql}] in the
    table's order: `new` is the alias of the group's delta row (the columns of
    ivm_aggregate_change_sql), `old` the alias of its stored row (NULL when the table lacks
    the group), or none where the stored row cannot be read (the insert clause of a Delta
    MERGE). Outputs with aggregate calls are recomputed from the merged states inline. -#}
{% macro _ivm_aggregate_merged_columns(spec, target_columns, visible, old, new) %}
  {%- set types = {} -%}
  {%- for c in target_columns -%}{%- do types.update({c.name | lower: c.data_type}) -%}{%- endfor -%}
  {#- without GROUP BY the delta's one row has a NULL count when no change row passes the query -#}
  {%- set states = {'__ivm_count': ('coalesce(' ~ old ~ '.__ivm_count, 0) + ' if old else '') ~ 'coalesce(' ~ new ~ '.__ivm_count, 0)'} -%}
  {%- for st in spec.states -%}
    {%- set n = st.name -%}
    {%- if st.merge == 'add' -%}
      {%- do states.update({n: 'cast(' ~ ('coalesce(' ~ old ~ '.' ~ n ~ ', 0) + ' if old else '') ~ 'coalesce(' ~ new ~ '.' ~ n ~
          ', 0) as ' ~ types[n] ~ ')'}) -%}
    {%- else -%}
      {%- do states.update({n: st.merge ~ '(' ~ old ~ '.' ~ n ~ ', ' ~ new ~ '.' ~ n ~ ')' if old else new ~ '.' ~ n}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set columns = [] -%}
  {%- for c in target_columns -%}
    {%- set i = visible.index(c.name) if c.name in visible else -1 -%}
    {%- if spec.kind == 'aggregate' and i >= 0 and spec['items'][i].calls -%}
      {%- set item = spec['items'][i] -%}
      {%- set subs = {} -%}
      {%- for call in item.calls -%}
        {%- do subs.update({call.pos: {'end': call.end, 'text': dbt_ivm._ivm_aggregate_value_sql(call, types, states)}}) -%}
      {%- endfor -%}
      {%- do columns.append({'name': c.name, 'sql': dbt_ivm._ivm_range_text(spec.parsed, item.s, item.xe, subs)}) -%}
    {%- else -%}
      {%- do columns.append({'name': c.name, 'sql': states.get(c.name) or new ~ '.' ~ dbt_ivm._ivm_quote(c.name)}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(columns) }}
{% endmacro %}

{#- The value of an aggregate call from the merged states (`states`: the SQL of each merged
    state by name), exactly as Spark computes it: sum is NULL without non-NULL arguments;
    avg divides like Spark's Average (a decimal sum by a decimal(20,0) count, cast to the
    result type). -#}
{% macro _ivm_aggregate_value_sql(call, types, states) %}
  {%- set s = '(' ~ states[call.s] ~ ')' -%}
  {%- if call.value == 'state' -%}{{ return(s) }}{%- endif -%}
  {%- set n = '(' ~ states[call.n] ~ ')' -%}
  {%- if call.value == 'sum' -%}{{ return('case when ' ~ n ~ ' > 0 then ' ~ s ~ ' end') }}{%- endif -%}
  {%- set m = modules.re.match('decimal\\((\\d+),\\s*(\\d+)\\)', types[call.s] | lower) -%}
  {%- if m -%}
    {#- the sum of decimal(p, s) is decimal(p + 10, s) (at most 38 digits); avg is decimal(p + 4, s + 4) -#}
    {%- set sum_p = m.group(1) | int -%}
    {%- set scale = m.group(2) | int -%}
    {%- set p = [sum_p - 10 + 4, 38] | min if sum_p < 38 else 38 -%}
    {%- set result = 'decimal(' ~ p ~ ', ' ~ [scale + 4, 38] | min ~ ')' -%}
    {{ return('case when ' ~ n ~ ' > 0 then cast(' ~ s ~ ' / cast(' ~ n ~ ' as decimal(20, 0)) as ' ~ result ~ ') end') }}
  {%- endif -%}
  {{ return('case when ' ~ n ~ ' > 0 then cast(' ~ s ~ ' as double) / ' ~ n ~ ' end') }}
{% endmacro %}

{#- Affected groups recomputed from the definition at the fixed versions. -#}
{% macro _ivm_aggregate_recompute_sql(full_sql, affected_view, keys) %}
  {%- if not keys -%}{{ return(full_sql) }}{%- endif -%}
  {%- set on = [] -%}
  {%- for k in keys -%}{%- do on.append('__ivm_r.' ~ dbt_ivm._ivm_quote(k) ~ ' <=> __ivm_a.' ~ dbt_ivm._ivm_quote(k)) -%}{%- endfor -%}
  {{ return('select __ivm_r.* from (\n' ~ full_sql ~ '\n) __ivm_r left semi join ' ~ affected_view ~ ' __ivm_a on ' ~ on | join(' and ')) }}
{% endmacro %}

{#- Rows of the table in the groups listed by keys_view: {'joins', 'flag'} as for
    _ivm_join_delete_predicates. Without GROUP BY the only row is always affected. -#}
{% macro _ivm_group_delete_predicates(keys_view, keys, alias) %}
  {%- if not keys -%}{{ return({'joins': [], 'flag': '(true)'}) }}{%- endif -%}
  {%- set on = [] -%}
  {%- for k in keys -%}{%- do on.append(alias ~ '.' ~ dbt_ivm._ivm_quote(k) ~ ' <=> __ivm_k.' ~ dbt_ivm._ivm_quote(k)) -%}{%- endfor -%}
  {{ return({'joins': ['left join (select distinct ' ~ dbt_ivm._ivm_quote_all(keys) | join(', ') ~ ', true as __ivm_hit from ' ~
      keys_view ~ ') __ivm_k on ' ~ on | join(' and ')],
             'flag': '(__ivm_k.__ivm_hit is not null)'}) }}
{% endmacro %}
