{#- The stored form of an aggregate view (seed 000's counting method).

    The table keeps, next to the user's columns, hidden bookkeeping columns:
      __ivm_g_<i>  the i-th GROUP BY expression (the row's identity; matched with <=>),
      __ivm_count  the number of input rows of the group,
      __ivm_s<j>   the state of the j-th aggregate call of the select list:
                   count/count_if -> the count, sum -> the sum, avg -> the sum of its
                   argument, min/max -> the extreme,
      __ivm_n<j>   for sum and avg, the number of non-NULL arguments.
    A SELECT DISTINCT view keeps only __ivm_count (the multiplicity of each row); its
    columns are its identity.

    Two templates of the query are kept (placeholders as in _ivm_rewrite_template):
      full   the user's select list plus the bookkeeping columns, HAVING kept; builds the
             table and recomputes affected groups;
      delta  the select list items without aggregates plus the bookkeeping columns,
             HAVING dropped; evaluated on a signed change term (_ivm_signed_change_terms)
             it gives partial states per sign: every upstream relation of a term carries
             __ivm_sign (-1 on old images, else 1), which reaches the output as
             __ivm_sign_<i> (spec.signs; spec.sign_of maps upstream i to it) and is grouped
             on, so one evaluation serves the inserted and the deleted side of a change. -#}
{% macro _ivm_aggregate_spec(parsed, aggregation, hidden) %}
  {%- set main = parsed.blocks[0] -%}
  {%- set from_kw = main.clauses['from'] -%}
  {%- set signs = {} -%}
  {%- set sign_of = {} -%}
  {%- for i in hidden | sort -%}
    {%- do signs.update({i: [{'column': '__ivm_sign', 'name': '__ivm_sign_' ~ i}]}) -%}
    {%- do sign_of.update({i: signs[i][0].name}) -%}
  {%- endfor -%}
  {%- if aggregation.kind == 'distinct' -%}
    {%- set edits = [{'s': main.distinct_pos, 'e': from_kw, 'text': ' ' ~ dbt_ivm._ivm_range_text(parsed, main.select_s, from_kw) ~
        ', count(*) as __ivm_count '}] -%}
    {%- set delta = dbt_ivm._ivm_rewrite_template(parsed, signs, edits, '\ngroup by all') -%}
    {#- the sign columns in the order the template outputs them (its FROM order), as for an aggregate -#}
    {%- set sign_names = main.hidden_cols | map(attribute='name') | list -%}
    {{ return({'kind': 'distinct', 'full': dbt_ivm._ivm_rewrite_template(parsed, hidden, edits, '\ngroup by all'),
               'delta': delta, 'signs': sign_names, 'sign_of': sign_of,
               'groups': [], 'states': [], 'calls': [], 'items': main['items'], 'parsed': parsed}) }}
  {%- endif -%}
  {%- set groups = [] -%}
  {%- for g in aggregation.group_exprs -%}
    {%- do groups.append({'name': '__ivm_g_' ~ loop.index0, 'sql': dbt_ivm._ivm_range_text(parsed, g[0], g[1])}) -%}
  {%- endfor -%}
  {%- set states = [] -%}
  {%- set calls = [] -%}
  {%- for call in aggregation.calls -%}
    {%- set j = loop.index0 -%}
    {%- set args = dbt_ivm._ivm_range_text(parsed, call.args[0], call.args[1]) -%}
    {%- set filter = (' ' ~ dbt_ivm._ivm_range_text(parsed, call.filter[0], call.filter[1])) if call.filter else '' -%}
    {%- set text = dbt_ivm._ivm_range_text(parsed, call.pos, call.end) -%}
    {%- set s = '__ivm_s' ~ j -%}
    {%- set n = '__ivm_n' ~ j -%}
    {%- if call.kind == 'additive' and call.name in ('count', 'count_if') -%}
      {%- do states.append({'name': s, 'sql': text, 'merge': 'add'}) -%}
      {%- set value = 'state' -%}
    {%- elif call.kind == 'additive' -%}
      {%- do states.append({'name': s, 'sql': text if call.name == 'sum' else 'sum(' ~ args ~ ')' ~ filter, 'merge': 'add'}) -%}
      {%- do states.append({'name': n, 'sql': 'count(' ~ args ~ ')' ~ filter, 'merge': 'add'}) -%}
      {%- set value = 'sum' if call.name == 'sum' else 'avg' -%}
    {%- elif call.kind == 'extremum' -%}
      {%- do states.append({'name': s, 'sql': text, 'merge': 'least' if call.name == 'min' else 'greatest'}) -%}
      {%- set value = 'state' -%}
    {%- else -%}
      {%- set value = none -%}
    {%- endif -%}
    {%- do calls.append({'pos': call.pos, 'end': call.end, 'value': value, 's': s, 'n': n}) -%}
  {%- endfor -%}
  {%- set bookkeeping = [] -%}
  {%- for g in groups -%}{%- do bookkeeping.append(g.sql ~ ' as ' ~ g.name) -%}{%- endfor -%}
  {%- do bookkeeping.append('count(*) as __ivm_count') -%}
  {%- for st in states -%}{%- do bookkeeping.append(st.sql ~ ' as ' ~ st.name) -%}{%- endfor -%}
  {%- set plain = [] -%}
  {%- set items = [] -%}
  {%- for item in main['items'] -%}
    {%- set inside = calls | selectattr('pos', '>=', item.s) | selectattr('pos', '<', item.e) | list -%}
    {%- do items.append({'s': item.s, 'xe': item.xe, 'calls': inside}) -%}
    {%- if not inside -%}{%- do plain.append(dbt_ivm._ivm_range_text(parsed, item.s, item.e)) -%}{%- endif -%}
  {%- endfor -%}
  {%- set full_select = ' ' ~ dbt_ivm._ivm_range_text(parsed, main.select_s, from_kw) ~ ', ' ~ bookkeeping | join(', ') ~ ' ' -%}
  {%- set delta_select = ' ' ~ (plain + bookkeeping) | join(', ') ~ ' ' -%}
  {%- set delta_edits = [{'s': main.select_s, 'e': from_kw, 'text': delta_select}] -%}
  {#- a first rewrite records the sign columns' expressions in the main block (hidden_cols) -#}
  {%- do dbt_ivm._ivm_rewrite_template(parsed, signs, delta_edits) -%}
  {%- set sign_exprs = main.hidden_cols | map(attribute='expr') | join(', ') -%}
  {#- the sign columns in the order the template outputs them (its FROM order), as the
      terms are renamed by position -#}
  {%- set sign_names = main.hidden_cols | map(attribute='name') | list -%}
  {%- set append = '' -%}
  {%- if aggregation.having -%}
    {#- HAVING is dropped; the sign columns join the GROUP BY in its place -#}
    {%- do delta_edits.append({'s': main.clauses['having'], 'e': main.having_range[1], 'text': ', ' ~ sign_exprs ~ ' '}) -%}
  {%- elif 'group' in main.clauses -%}
    {%- set append = '\n, ' ~ sign_exprs -%}
  {%- else -%}
    {%- set append = '\ngroup by ' ~ sign_exprs -%}
  {%- endif -%}
  {{ return({'kind': 'aggregate',
             'full': dbt_ivm._ivm_rewrite_template(parsed, hidden, [{'s': main.select_s, 'e': from_kw, 'text': full_select}]),
             'delta': dbt_ivm._ivm_rewrite_template(parsed, signs, delta_edits, append), 'signs': sign_names, 'sign_of': sign_of,
             'groups': groups, 'states': states, 'calls': calls, 'items': items, 'parsed': parsed}) }}
{% endmacro %}
