{#- Called by tests/test_delta_sql.py in the package's jinja runtime (no dbt, no Spark): returns the
    statements of every case, the change-feed error decisions and the feed statuses. -#}
{% macro render_delta_cases(cases, error_texts, describe_rows) %}
  {%- set out = {} -%}
  {%- for case in cases -%}
    {%- set ups = [] -%}
    {%- for u in case.upstreams -%}
      {%- set hidden = [] -%}
      {%- for c in u.key -%}{%- do hidden.append({'column': c, 'name': '__ivm_' ~ u.short ~ '__' ~ c}) -%}{%- endfor -%}
      {%- do ups.append({'name': u.name, 'parts': u.name.split('.'), 'problems': [], 'short': u.short,
                         'relation': api.Relation.create(schema=u.name.split('.')[0], identifier=u.name.split('.')[1]),
                         'kind': 'change_log', 'feed': u.get('feed'), 'unique_key': u.key, 'hidden': hidden,
                         'change_log': u.name ~ '_changes', 'watermark': none}) -%}
    {%- endfor -%}
    {%- set analysis = dbt_ivm.ivm_analyze(case.sql, ups) -%}
    {%- set target = api.Relation.create(schema='analytics', identifier=case.name) -%}
    {%- set plan = [] -%}
    {%- set hidden = {} -%}
    {%- for u in case.upstreams -%}
      {%- set cols = [] -%}
      {%- for c in u.columns -%}{%- do cols.append({'name': c[0], 'data_type': c[1]}) -%}{%- endfor -%}
      {%- set ch = u.get('change', {}) -%}
      {%- do plan.append({'index': loop.index0, 'up': ups[loop.index0], 'columns': cols, 'from': '3', 'to': '7' if ch else '3',
                          'changed': ch | length > 0, 'old': ch.get('old', 0), 'has_new': ch.get('new', false),
                          'change_view': '__ivm_' ~ case.name ~ '_chg_' ~ u.short if ch else none}) -%}
      {%- do hidden.update({loop.index0: ups[loop.index0].hidden if analysis.shape == 'join_only' else []}) -%}
    {%- endfor -%}
    {%- set statements = [] -%}
    {%- for p in plan if p.changed -%}
      {%- do statements.append(['change set of ' ~ p.up.name, dbt_ivm.ivm_netted_changes_sql(p.up, p.columns, p['from'], p.to, analysis.shape != 'join_only')]) -%}
    {%- endfor -%}
    {%- set hidden_types = case.get('hidden_types', {}) -%}
    {%- if analysis.shape == 'join_only' -%}
      {%- set template = dbt_ivm._ivm_rewrite_template(analysis.parsed, hidden) -%}
      {%- set target_columns = [] -%}
      {%- for c in case.visible -%}{%- do target_columns.append({'name': c[0], 'data_type': c[1]}) -%}{%- endfor -%}
      {%- for p in plan -%}{%- for h in p.up.hidden -%}{%- do target_columns.append({'name': h.name, 'data_type': 'bigint'}) -%}{%- endfor -%}{%- endfor -%}
      {%- set repair = case.get('repair', false) -%}
      {%- set rewrite = repair or (plan | selectattr('old') | list | length > 0) -%}
      {%- set insert_sql = dbt_ivm.ivm_join_insert_sql(template, plan) -%}
      {%- if insert_sql -%}{%- do statements.append(['rows to insert', insert_sql]) -%}{%- endif -%}
      {#- as _ivm_stage_join_changes: without rows to insert, an empty relation -#}
      {%- set insert_view = ('__ivm_' ~ case.name ~ '_ins') if insert_sql else '(select * from ' ~ target ~ ' where false)' -%}
      {%- set stage = {'insert_view': insert_view, 'rewrite': rewrite,
                       'predicates': dbt_ivm._ivm_join_delete_predicates(plan, '__ivm_v', repair) if rewrite else none} -%}
      {%- set full_template = template -%}
    {%- else -%}
      {%- set spec = dbt_ivm._ivm_aggregate_spec(analysis.parsed, analysis.aggregation, hidden) -%}
      {%- set visible = case.visible | map('first') | list -%}
      {%- set target_columns = [] -%}
      {%- for c in case.visible -%}{%- do target_columns.append({'name': c[0], 'data_type': c[1]}) -%}{%- endfor -%}
      {%- for n in (spec.groups | map(attribute='name') | list) + ['__ivm_count'] + (spec.states | map(attribute='name') | list) -%}
        {%- do target_columns.append({'name': n, 'data_type': hidden_types.get(n, 'bigint')}) -%}
      {%- endfor -%}
      {%- set keys = dbt_ivm._ivm_aggregate_keys(spec, visible) -%}
      {%- set names = dbt_ivm._ivm_aggregate_change_names(spec, visible) -%}
      {%- set has_deletes = plan | selectattr('old') | list | length > 0 -%}
      {%- set terms = dbt_ivm._ivm_signed_change_terms(spec.delta, plan) -%}
      {%- set refresh = analysis.refresh['any' if has_deletes else 'inserts'] -%}
      {%- if refresh == 'merge' -%}
        {%- set merged_view = '__ivm_' ~ case.name ~ '_merged' -%}
        {%- set change_sql = dbt_ivm.ivm_aggregate_change_sql(spec, names, keys, terms) -%}
        {%- do statements.append(['merged groups (' ~ merged_view ~ ')', dbt_ivm.ivm_aggregate_merge_sql(spec, target, target_columns, change_sql, keys, visible)]) -%}
        {%- set stage = {'rewrite': true, 'insert_view': none, 'delta': {'kind': 'merge', 'merged_view': merged_view, 'keys': keys}} -%}
      {%- else -%}
        {%- set affected_view = '__ivm_' ~ case.name ~ '_groups' -%}
        {%- set insert_view = '__ivm_' ~ case.name ~ '_ins' -%}
        {%- set relations = {} -%}
        {%- for p in plan -%}{%- do relations.update({p.index: dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p.to)}) -%}{%- endfor -%}
        {%- do statements.append(['affected groups (' ~ affected_view ~ ')', dbt_ivm._ivm_affected_groups_sql(spec, names, keys, terms)]) -%}
        {%- do statements.append(['recomputed groups (' ~ insert_view ~ ')', dbt_ivm._ivm_aggregate_recompute_sql(dbt_ivm._ivm_fill_relations(spec.full, relations), affected_view, keys)]) -%}
        {%- set stage = {'rewrite': true, 'insert_view': insert_view, 'delta': {'kind': 'recompute', 'affected_view': affected_view, 'keys': keys}} -%}
      {%- endif -%}
      {%- set full_template = spec.full -%}
    {%- endif -%}
    {%- if case.get('full') -%}
      {%- set relations = {} -%}
      {%- for p in plan -%}{%- do relations.update({p.index: dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p.to)}) -%}{%- endfor -%}
      {%- set apply = [dbt_ivm.ivm_delta_build_sql(target, dbt_ivm._ivm_fill_relations(full_template, relations), case.get('partition_by', []))] -%}
      {%- set statements = [] -%}
    {%- else -%}
      {%- set apply = [dbt_ivm._ivm_delta_apply_sql(target, target_columns, stage, plan, case.get('repair', false))] -%}
    {%- endif -%}
    {%- for s in apply -%}{%- do statements.append(['apply', s]) -%}{%- endfor -%}
    {%- do out.update({case.name: {'shape': analysis.shape, 'issues': analysis.issues | map(attribute='code') | list, 'statements': statements}}) -%}
  {%- endfor -%}
  {%- set errors = {} -%}
  {%- for text in error_texts -%}
    {%- set row = {} -%}
    {%- for mode in ['fail', 'rebuild'] -%}
      {%- do row.update({mode: dbt_ivm._ivm_change_feed_decision('m', 'shop.orders', text, mode)}) -%}
    {%- endfor -%}
    {%- do errors.update({text: row}) -%}
  {%- endfor -%}
  {%- set feeds = {} -%}
  {%- for name, rows in describe_rows.items() -%}
    {%- do feeds.update({name: dbt_ivm._ivm_delta_change_feed_status(rows)}) -%}
  {%- endfor -%}
  {{ return({'cases': out, 'errors': errors, 'feeds': feeds}) }}
{% endmacro %}
