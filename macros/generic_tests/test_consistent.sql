{#- Generic test: the ivm table equals its definition evaluated from scratch (multiset
    equality, bookkeeping columns excluded). Returns the rows found on one side only. -#}
{% test consistent(model) %}
  {{ return(adapter.dispatch('test_consistent', 'dbt_ivm')(model)) }}
{% endtest %}

{% macro default__test_consistent(model) %}
  {#- the stored table, whatever rows dbt hides from this run's reads of the model (--empty, --sample) -#}
  {%- set table = api.Relation.create(database=model.database, schema=model.schema, identifier=model.identifier) -%}
  {%- set definition = dbt_ivm._ivm_definition_view(table) -%}
  {%- set existing = adapter.get_relation(database=table.database, schema=table.schema, identifier=table.identifier) if execute else none -%}
  {%- if execute and (flags.EMPTY or (existing is not none and existing.type == 'view')) -%}
    {#- nothing to compare: --empty hides every row, or such a run left a view where no table was built yet -#}
select 'only in table' as dbt_ivm_side, * from {{ table }} where false
  {%- else -%}
  {%- set columns = [] -%}
  {%- if execute -%}
    {%- for c in adapter.get_columns_in_relation(table) if not c.name.startswith('__ivm_') -%}
      {%- do columns.append(dbt_ivm._ivm_quote(c.name)) -%}
    {%- endfor -%}
  {%- endif -%}
  {%- set cols = columns | join(', ') if columns else '*' -%}
(select 'only in table' as dbt_ivm_side, * from (select {{ cols }} from {{ table }} except all select {{ cols }} from {{ definition }}) a)
union all
(select 'only in definition' as dbt_ivm_side, * from (select {{ cols }} from {{ definition }} except all select {{ cols }} from {{ table }}) b)
  {%- endif -%}
{% endmacro %}
