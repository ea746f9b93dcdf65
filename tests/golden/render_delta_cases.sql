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
                          'change_view': '__ivm_' ~ case.name ~ '_chg_' ~ u.short if ch else none, 'broadcast': ch | length > 0}) -%}
      {%- do hidden.update({loop.index0: ups[loop.index0].hidden if analysis.shape == 'join_only' else []}) -%}
    {%- endfor -%}
    {#- keys the change counts listed: distinct join keys (sets) and changed row keys (ids) -#}
    {%- for p in plan if p.changed -%}
      {%- set ch = case.upstreams[p.index].change -%}
      {%- set ranged = dbt_ivm._ivm_range_columns(p, plan, dbt_ivm._ivm_join_edges(analysis.parsed)) -%}
      {%- do p.update({'ranged': ranged}) -%}
      {%- do dbt_ivm._ivm_key_listing(p) -%}
      {%- do p.update({'ids': dbt_ivm._ivm_changed_id_literals(tojson(ch.ids) if ch.get('ids') is not none else none, p)}) -%}
      {%- if ch.get('bounds') -%}
        {%- do p.update({'ranges': dbt_ivm._ivm_key_range_literals(ch.bounds, ranged, ch.get('sets', {}), p)}) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- set statements = [] -%}
    {#- the change sets under names of their own (the materialization reads them inline) -#}
    {%- for p in plan if p.changed -%}
      {%- do statements.append(['change set of ' ~ p.up.name, dbt_ivm.ivm_netted_changes_sql(p.up, p.columns, p['from'], p.to, analysis.shape != 'join_only')]) -%}
    {%- endfor -%}
    {%- set hidden_types = case.get('hidden_types', {}) -%}
    {%- set target_columns = [] -%}
    {%- for c in case.visible -%}{%- do target_columns.append(api.Column(c[0], c[1])) -%}{%- endfor -%}
    {%- set repair = case.get('repair', false) -%}
    {%- set has_deletes = plan | selectattr('old') | list | length > 0 -%}
    {%- if analysis.shape == 'join_only' -%}
      {%- set template = dbt_ivm._ivm_rewrite_template(analysis.parsed, hidden) -%}
      {%- for p in plan -%}{%- for h in p.up.hidden -%}{%- do target_columns.append(api.Column(h.name, 'bigint')) -%}{%- endfor -%}{%- endfor -%}
      {%- set stage = dbt_ivm._ivm_stage_join_changes(target, template, plan, {'repair': 'repair' if repair else none}, repair or has_deletes,
          dbt_ivm._ivm_join_edges(analysis.parsed)) -%}
      {%- set full_template = template -%}
    {%- else -%}
      {%- set spec = dbt_ivm._ivm_aggregate_spec(analysis.parsed, analysis.aggregation, hidden) -%}
      {%- do spec.update({'refresh': analysis.refresh}) -%}
      {%- for n in (spec.groups | map(attribute='name') | list) + ['__ivm_count'] + (spec.states | map(attribute='name') | list) -%}
        {%- do target_columns.append(api.Column(n, hidden_types.get(n, 'bigint'))) -%}
      {%- endfor -%}
      {%- set stage = dbt_ivm._ivm_stage_aggregate_changes(spec, target, target_columns, plan, has_deletes, false,
          dbt_ivm._ivm_join_edges(analysis.parsed)) -%}
      {%- set full_template = spec.full -%}
    {%- endif -%}
    {%- if case.get('full') -%}
      {%- set relations = {} -%}
      {%- for p in plan -%}{%- do relations.update({p.index: dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p.to)}) -%}{%- endfor -%}
      {%- set apply = [dbt_ivm.ivm_delta_build_sql(target, dbt_ivm._ivm_fill_relations(full_template, relations), case.get('partition_by', []),
          {'delta.enableChangeDataFeed': 'true'})] -%}
      {%- set statements = [] -%}
    {%- else -%}
      {%- set apply = [dbt_ivm._ivm_delta_apply_sql(target, target_columns, stage, plan, repair).sql] -%}
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
