{#- Generic test: the ivm table equals its definition evaluated from scratch (multiset
    equality, bookkeeping columns excluded). Returns the rows found on one side only. -#}
{% test consistent(model) %}
  {{ return(adapter.dispatch('test_consistent', 'dbt_ivm')(model)) }}
{% endtest %}

{% macro default__test_consistent(model) %}
  {%- set definition = dbt_ivm._ivm_definition_view(model) -%}
  {%- set columns = [] -%}
  {%- if execute -%}
    {%- for c in adapter.get_columns_in_relation(model) if not c.name.startswith('__ivm_') -%}
      {%- do columns.append(dbt_ivm._ivm_quote(c.name)) -%}
    {%- endfor -%}
  {%- endif -%}
  {%- set cols = columns | join(', ') if columns else '*' -%}
(select 'only in table' as dbt_ivm_side, * from (select {{ cols }} from {{ model }} except all select {{ cols }} from {{ definition }}) a)
union all
(select 'only in definition' as dbt_ivm_side, * from (select {{ cols }} from {{ definition }} except all select {{ cols }} from {{ model }}) b)
{% endmacro %}
