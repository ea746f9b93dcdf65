{#- Classify a compiled model: returns {'shape', 'issues', 'parsed', 'aggregation', 'refresh'}.
    shape: join_only | aggregate | aggregate_over_joins | distinct | keyed | unknown.
    keyed: the keyed recompute path (macros/analysis/keyed.sql), taken when the join and
    aggregate algorithms refuse only constructs it maintains; unique_key is the model's.
    issues: restriction codes found (empty when the model can be maintained).
    aggregation: see _ivm_aggregate_rules. refresh: how a batch of inserts only and a batch
    with any change are applied ({'inserts', 'any'}: append, rewrite, merge or recompute),
    none when the model cannot be maintained. -#}
{% macro ivm_analyze(sql, upstreams, unique_key=none) %}
  {%- set parsed = dbt_ivm._ivm_parse_query(sql, upstreams) -%}
  {%- set issues = parsed.issues -%}
  {%- set seen = {} -%}
  {%- for r in parsed.rels -%}
    {%- if r.upstream in seen -%}
      {#- several upstreams may name one relation: the construct names them all -#}
      {%- set names = upstreams | selectattr('parts', 'equalto', upstreams[r.upstream].parts) | map(attribute='name') | list -%}
      {%- set construct = 'upstream ' ~ names[0] ~ ' read twice' if names | length == 1
          else 'relation ' ~ upstreams[r.upstream].parts | join('.') ~ ' read twice (as ' ~ names | join(' and ') ~ ')' -%}
      {%- do dbt_ivm._ivm_add_issue(parsed, 'IVM022', parsed.tk, r.s, construct, true) -%}
    {%- endif -%}
    {%- do seen.update({r.upstream: true}) -%}
  {%- endfor -%}
  {%- set ok_blocks = parsed.blocks | selectattr('ok') | list -%}
  {%- if parsed.rels | length == 0 and not issues -%}
    {%- do dbt_ivm._ivm_add_issue(parsed, 'IVM050', parsed.tk, none, 'no ref() or source() in FROM') -%}
  {%- endif -%}
  {%- set reported = [] -%}
  {%- for r in parsed.rels if r.upstream not in reported -%}
    {%- do reported.append(r.upstream) -%}
    {%- for problem in upstreams[r.upstream].get('problems', []) -%}
      {%- do issues.append({'code': problem.code, 'construct': 'upstream ' ~ upstreams[r.upstream].name,
                            'position': dbt_ivm._ivm_position(parsed.tk, r.s), 'fix': problem.fix}) -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- set aggregation = dbt_ivm._ivm_aggregate_rules(parsed) -%}
  {%- if aggregation.kind == 'aggregate' -%}
    {%- set shape = 'aggregate' if seen | length <= 1 else 'aggregate_over_joins' -%}
  {%- elif aggregation.kind == 'distinct' -%}
    {%- set shape = 'distinct' -%}
  {%- elif ok_blocks | length == parsed.blocks | length and parsed.blocks -%}
    {%- set shape = 'join_only' -%}
  {%- else -%}
    {%- set shape = 'unknown' -%}
  {%- endif -%}
  {%- set refresh = aggregation.refresh if shape != 'join_only' else {'inserts': 'append', 'any': 'rewrite'} -%}
  {%- set keyed = none -%}
  {%- if issues and issues | rejectattr('keyed') | list | length == 0 and shape != 'unknown' -%}
    {%- set keyed = dbt_ivm._ivm_keyed_rules(parsed, aggregation, unique_key or []) -%}
    {%- if keyed.issues -%}
      {%- do issues.extend(keyed.issues) -%}
    {%- else -%}
      {%- do issues.clear() -%}
      {%- set shape = 'keyed' -%}
      {%- set refresh = {'inserts': 'recompute', 'any': 'recompute'} -%}
    {%- endif -%}
  {%- endif -%}
  {{ return({'shape': shape, 'issues': issues, 'parsed': parsed, 'aggregation': aggregation,
            'keyed': keyed if shape == 'keyed' else none, 'notes': parsed.notes,
            'refresh': none if issues or shape == 'unknown' else refresh}) }}
{% endmacro %}
