{#- Delta of a join-only view (the DEL/INS slice algorithm, keyed by upstream row keys).

    K_i is the set of changed keys of upstream i (rows changed between the stored version
    u_i and the fixed version v_i). The refreshed view is
        (view rows whose identity for no changed upstream i lies in K_i)
        UNION ALL  INS,
    where INS is the query evaluated on the changed slices, split into disjoint terms so no
    row is produced twice: term i reads upstream i restricted to the new images of K_i,
    every changed upstream before i without K_i, and every other upstream whole, all at
    the fixed versions v. Deleting by key and re-inserting from the fixed versions makes a
    re-applied refresh give the same table, which is how interrupted refreshes repair. -#}

{#- plan: list of per-upstream dicts {up, columns, from, to, changed, change_view (the netted
    change set as a relation in FROM), has_new, broadcast}. -#}
{% macro ivm_join_insert_sql(template, plan) %}
  {{ return(adapter.dispatch('ivm_join_insert_sql', 'dbt_ivm')(template, plan)) }}
{% endmacro %}

{% macro default__ivm_join_insert_sql(template, plan) %}
  {%- set terms = [] -%}
  {%- for term in dbt_ivm._ivm_join_change_terms(template, plan) -%}
    {%- do terms.append('select * from (\n' ~ term ~ '\n) __ivm_term_' ~ loop.index0) -%}
  {%- endfor -%}
  {{ return(terms | join('\nunion all\n')) }}
{% endmacro %}

{#- The query evaluated on the changed slices, as disjoint terms (one per changed
    upstream i with new images): term i reads upstream i restricted to the new images of
    its changed keys, every changed upstream before i without its changed keys, and every
    other upstream at the new version; their union is the rows to insert of a join-only
    view. -#}
{% macro _ivm_join_change_terms(template, plan) %}
  {%- set terms = [] -%}
  {%- for p in plan if p.changed and p.has_new -%}
    {%- set relations = {} -%}
    {%- for q in plan -%}
      {%- if q is sameas p -%}
        {%- do relations.update({q.index: dbt_ivm._ivm_broadcast(q, dbt_ivm._ivm_new_images_sql(q))}) -%}
      {%- elif q.changed and q.index < p.index -%}
        {%- do relations.update({q.index: dbt_ivm._ivm_unchanged_rows_sql(q)}) -%}
      {%- else -%}
        {%- do relations.update({q.index: dbt_ivm.ivm_snapshot_sql(q.up, q.columns, q.to)}) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- do terms.append(dbt_ivm._ivm_fill_relations(template, relations)) -%}
  {%- endfor -%}
  {{ return(terms) }}
{% endmacro %}

{#- The change of an aggregate's input as signed terms, one per changed upstream i with
    images: upstream i as its new images (__ivm_sign 1) and old images (__ivm_sign -1),
    changed upstreams before i at the new version, changed upstreams after i at the old
    version, unchanged upstreams whole (all with __ivm_sign 1). The terms telescope: their
    signed sum is (query at the new versions) - (query at the old versions), so the new and
    the old side of upstream i share one evaluation. -#}
{% macro _ivm_signed_change_terms(template, plan) %}
  {%- set terms = [] -%}
  {%- for p in plan if p.changed and (p.has_new or p.old > 0) -%}
    {%- set relations = {} -%}
    {%- for q in plan -%}
      {%- if q is sameas p -%}
        {%- set halves = [] -%}
        {%- if p.has_new -%}{%- do halves.append('select *, 1 as __ivm_sign from ' ~ dbt_ivm._ivm_new_images_sql(p) ~ ' __ivm_n') -%}{%- endif -%}
        {%- if p.old > 0 -%}{%- do halves.append('select *, -1 as __ivm_sign from ' ~ dbt_ivm._ivm_old_images_sql(p) ~ ' __ivm_o') -%}{%- endif -%}
        {%- do relations.update({q.index: dbt_ivm._ivm_broadcast(p, '(' ~ halves | join(' union all ') ~ ')')}) -%}
      {%- elif q.changed and q.index > p.index -%}
        {%- do relations.update({q.index: '(select *, 1 as __ivm_sign from ' ~ dbt_ivm._ivm_old_version_sql(q) ~ ' __ivm_r)'}) -%}
      {%- else -%}
        {%- do relations.update({q.index: '(select *, 1 as __ivm_sign from ' ~ dbt_ivm.ivm_snapshot_sql(q.up, q.columns, q.to) ~ ' __ivm_r)'}) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- do terms.append(dbt_ivm._ivm_fill_relations(template, relations)) -%}
  {%- endfor -%}
  {{ return(terms) }}
{% endmacro %}

{#- Old images of the changed keys of an upstream (rows it had at the stored version). -#}
{% macro _ivm_old_images_sql(p) %}
  {%- set cols = dbt_ivm._ivm_quote_all(p.columns | map(attribute='name')) | join(', ') -%}
  {{ return('(select ' ~ cols ~ ' from (select __ivm_before.* from ' ~ p.change_view ~ ' where __ivm_old) __ivm_b)') }}
{% endmacro %}

{#- A changed upstream as it was at the stored version. -#}
{% macro _ivm_old_version_sql(p) %}
  {%- if p.up.kind == 'change_log' -%}
    {{ return('(select * from ' ~ dbt_ivm._ivm_unchanged_rows_sql(p) ~ ' __ivm_u union all select * from ' ~
        dbt_ivm._ivm_old_images_sql(p) ~ ' __ivm_o)') }}
  {%- endif -%}
  {{ return(dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p['from'])) }}
{% endmacro %}

{#- Rows of a changed upstream at its new version that belong to its changed slice. -#}
{% macro _ivm_new_images_sql(p) %}
  {%- set cols = dbt_ivm._ivm_quote_all(p.columns | map(attribute='name')) | join(', ') -%}
  {%- if p.up.kind == 'change_log' -%}
    {{ return('(select ' ~ cols ~ ' from ' ~ p.change_view ~ ' where __ivm_new)') }}
  {%- endif -%}
  {{ return('(select ' ~ cols ~ ' from ' ~ p.up.relation ~ ' where ' ~ dbt_ivm._ivm_watermark_window(p) ~ ')') }}
{% endmacro %}

{#- Rows of a changed upstream at its new version outside its changed slice. -#}
{% macro _ivm_unchanged_rows_sql(p) %}
  {%- if p.up.kind == 'change_log' -%}
    {%- set match = [] -%}
    {%- for k in p.up.unique_key -%}
      {%- do match.append('__ivm_s.' ~ dbt_ivm._ivm_quote(k) ~ ' <=> __ivm_k.' ~ dbt_ivm._ivm_quote(k)) -%}
    {%- endfor -%}
    {{ return('(select __ivm_s.* from ' ~ dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p.to) ~ ' __ivm_s left anti join ' ~
        dbt_ivm._ivm_broadcast(p, p.change_view) ~ ' __ivm_k on ' ~ match | join(' and ') ~ ')') }}
  {%- endif -%}
  {{ return(dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p['from'])) }}
{% endmacro %}

{#- u < watermark <= v for an append-only upstream. -#}
{% macro _ivm_watermark_window(p) %}
  {%- set wm = dbt_ivm._ivm_quote(p.up.watermark) -%}
  {%- set conds = [wm ~ ' <= ' ~ dbt_ivm._ivm_version_literal(p.up, p.to, p.columns)] -%}
  {%- if p['from'] is not none -%}
    {%- do conds.append(wm ~ ' > ' ~ dbt_ivm._ivm_version_literal(p.up, p['from'], p.columns)) -%}
  {%- endif -%}
  {{ return(conds | join(' and ')) }}
{% endmacro %}

{#- How to find, in the view aliased `alias`, the rows of the changed slices:
    {'joins': left joins against the change sets (one row per key, so no row is
    duplicated), 'flag': a boolean that is true exactly for those rows}. Upstreams whose
    changes are insert-only have no rows in the view to delete (DEL is skipped), unless a
    repair re-applies a refresh that may have inserted them already. -#}
{% macro _ivm_join_delete_predicates(plan, alias, repair) %}
  {%- set joins = [] -%}
  {%- set flags = [] -%}
  {%- for p in plan if p.changed and (repair or p.get('old', 0) > 0) -%}
    {%- if p.up.kind == 'change_log' -%}
      {%- set k = '__ivm_k_' ~ p.index -%}
      {%- set keys = dbt_ivm._ivm_quote_all(p.up.unique_key) | join(', ') -%}
      {%- set match = [] -%}
      {%- for h in p.up.hidden -%}
        {%- do match.append(alias ~ '.' ~ h.name ~ ' <=> ' ~ k ~ '.' ~ dbt_ivm._ivm_quote(h.column)) -%}
      {%- endfor -%}
      {%- set hits = dbt_ivm._ivm_broadcast(p, '(select ' ~ keys ~ ', true as __ivm_hit from ' ~ p.change_view ~ ' __ivm_h)') -%}
      {%- do joins.append('left join ' ~ hits ~ ' ' ~ k ~ ' on ' ~ match | join(' and ')) -%}
      {%- do flags.append(k ~ '.__ivm_hit is not null') -%}
    {%- elif p['from'] is not none -%}
      {%- set stored = dbt_ivm._ivm_version_literal(p.up, p['from'], p.columns) -%}
      {%- do flags.append('(' ~ alias ~ '.' ~ p.up.hidden[0].name ~ ' > ' ~ stored ~ ') is true') -%}
    {%- else -%}
      {%- do flags.append('true') -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return({'joins': joins, 'flag': '(' ~ (flags | join(' or ') if flags else 'false') ~ ')'}) }}
{% endmacro %}
