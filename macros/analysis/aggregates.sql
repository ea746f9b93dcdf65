{#- The aggregate rules: which aggregate queries can be maintained, and how.
    Only the outermost query may aggregate (GROUP BY, aggregate calls or SELECT DISTINCT);
    its groups are then the rows of the table, identified by hidden group-key columns. -#}

{#- One aggregate call at sig position p (its name): the ranges of its arguments and of a
    trailing FILTER (WHERE ...) clause, and how a refresh maintains it:
      additive  (count, count_if, sum, avg, mean): signed deltas merged into the group;
      extremum  (min, max): merged with least/greatest after inserts, else recomputed;
      recompute (any other, or DISTINCT inside): the affected groups are recomputed. -#}
{% macro _ivm_aggregate_call(tk, name, p) %}
  {%- set toks = tk.tokens -%}
  {%- set sig = tk.significant -%}
  {%- set close = dbt_ivm._ivm_match_paren(tk, p + 1) -%}
  {%- set has_distinct = close > p + 2 and toks[sig[p + 2]].word == 'distinct' -%}
  {%- set ns = namespace(end=close + 1, filter=none) -%}
  {%- if close + 2 < sig | length and toks[sig[close + 1]].word == 'filter' and toks[sig[close + 2]].text == '(' -%}
    {%- set ns.filter = [close + 1, dbt_ivm._ivm_match_paren(tk, close + 2) + 1] -%}
    {%- set ns.end = ns.filter[1] -%}
  {%- endif -%}
  {%- if has_distinct -%}
    {%- set kind = 'recompute' -%}
  {%- elif name in ('count', 'count_if', 'sum', 'avg', 'mean') -%}
    {%- set kind = 'additive' -%}
  {%- elif name in ('min', 'max') -%}
    {%- set kind = 'extremum' -%}
  {%- else -%}
    {%- set kind = 'recompute' -%}
  {%- endif -%}
  {{ return({'name': name, 'pos': p, 'close': close, 'end': ns.end, 'args': [p + 2, close], 'filter': ns.filter, 'kind': kind,
             'distinct': has_distinct}) }}
{% endmacro %}

{#- The innermost query block whose range holds sig position p. -#}
{% macro _ivm_block_at(parsed, p) %}
  {%- set ns = namespace(found=none, width=none) -%}
  {%- for b in parsed.blocks if b.s <= p and p < b.e and (ns.width is none or b.e - b.s < ns.width) -%}
    {%- set ns.found = b -%}{%- set ns.width = b.e - b.s -%}
  {%- endfor -%}
  {{ return(ns.found) }}
{% endmacro %}

{#- Check the aggregate rules (IVM040-IVM045) and describe the main query's aggregation:
    {'kind': none | 'aggregate' | 'distinct', 'calls': outermost aggregate calls of the
     select list, 'group_exprs': [s, e) ranges of the group expressions (ordinals resolved),
     'having': bool, 'refresh': {'inserts', 'any'} paths}. -#}
{% macro _ivm_aggregate_rules(parsed) %}
  {%- set tk = parsed.tk -%}
  {%- set toks = tk.tokens -%}
  {%- set sig = tk.significant -%}
  {%- set info = {'kind': none, 'calls': [], 'group_exprs': [], 'having': false, 'refresh': none} -%}
  {%- set main = parsed.blocks[0] if parsed.blocks else none -%}
  {%- set by_block = {} -%}
  {%- set main_calls = [] -%}
  {%- for call in parsed.get('aggregates', []) -%}
    {%- set b = dbt_ivm._ivm_block_at(parsed, call.pos) -%}
    {%- if b is not none and b.id not in by_block -%}{%- do by_block.update({b.id: call}) -%}{%- endif -%}
    {%- if b is not none and b.id == 0 -%}{%- do main_calls.append(call) -%}{%- endif -%}
  {%- endfor -%}
  {%- for b in parsed.blocks if b.id != 0 and b.ok -%}
    {%- if b.get('group_range') -%}
      {%- do dbt_ivm._ivm_add_issue(parsed, 'IVM040', tk, b.clauses['group'], 'GROUP BY in ' ~ b.name, true) -%}
    {%- elif b.distinct -%}
      {%- do dbt_ivm._ivm_add_issue(parsed, 'IVM040', tk, b.distinct_pos, 'SELECT DISTINCT in ' ~ b.name, true) -%}
    {%- elif b.id in by_block -%}
      {%- do dbt_ivm._ivm_add_issue(parsed, 'IVM040', tk, by_block[b.id].pos, by_block[b.id].name ~ '() in ' ~ b.name, true) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if main is none or not main.ok -%}{{ return(info) }}{%- endif -%}
  {%- set grouped = main.get('group_range') is not none -%}
  {%- if not grouped and 0 not in by_block -%}
    {%- if main.distinct -%}
      {%- do info.update({'kind': 'distinct', 'refresh': {'inserts': 'merge', 'any': 'merge'}}) -%}
    {%- endif -%}
    {{ return(info) }}
  {%- endif -%}
  {%- do info.update({'kind': 'aggregate', 'having': 'having' in main.clauses}) -%}
  {%- if main.distinct -%}
    {%- do dbt_ivm._ivm_add_issue(parsed, 'IVM043', tk, main.distinct_pos, 'SELECT DISTINCT with GROUP BY or aggregates', true) -%}
  {%- endif -%}
  {#- outermost calls of the select list, in text order -#}
  {%- set select_end = main.clauses['from'] -%}
  {%- set ns = namespace(after=-1) -%}
  {%- for call in parsed.aggregates if call.pos >= main.select_s and call.pos < select_end and call.pos >= ns.after -%}
    {%- do info.calls.append(call) -%}
    {%- set ns.after = call.end -%}
  {%- endfor -%}
  {%- if grouped -%}
    {%- do dbt_ivm._ivm_group_expressions(parsed, main, info) -%}
  {%- endif -%}
  {%- for item in main['items'] -%}
    {%- set inside = info.calls | selectattr('pos', '>=', item.s) | selectattr('pos', '<', item.e) | list -%}
    {%- if item.star -%}
      {%- set star = '*' if item.star == '*' else item.star ~ '.*' -%}
      {%- do dbt_ivm._ivm_add_issue(parsed, 'IVM041', tk, item.s, 'SELECT ' ~ star ~ ' with aggregates') -%}
    {%- elif inside and dbt_ivm._ivm_column_outside_calls(parsed, item.s, item.xe, inside) -%}
      {%- do dbt_ivm._ivm_add_issue(parsed, 'IVM042', tk, item.s, 'select item mixing aggregates and columns', true) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set all_calls = main_calls -%}
  {%- set recompute = all_calls | selectattr('kind', 'equalto', 'recompute') | list -%}
  {%- if not grouped -%}
    {%- set firsts = [] -%}
    {%- if info.having -%}{%- do firsts.append([main.clauses['having'], 'HAVING without GROUP BY']) -%}{%- endif -%}
    {%- if recompute -%}{%- do firsts.append([recompute[0].pos, recompute[0].name ~
        ('(DISTINCT ...)' if recompute[0].distinct else '()') ~ ' without GROUP BY']) -%}{%- endif -%}
    {%- if firsts -%}
      {%- set first = (firsts | sort(attribute='0'))[0] -%}
      {%- do dbt_ivm._ivm_add_issue(parsed, 'IVM045', tk, first[0], first[1]) -%}
    {%- endif -%}
  {%- endif -%}
  {%- if info.having or recompute -%}
    {%- do info.update({'refresh': {'inserts': 'recompute', 'any': 'recompute'}}) -%}
  {%- elif all_calls | selectattr('kind', 'equalto', 'extremum') | list -%}
    {%- do info.update({'refresh': {'inserts': 'merge', 'any': 'recompute'}}) -%}
  {%- else -%}
    {%- do info.update({'refresh': {'inserts': 'merge', 'any': 'merge'}}) -%}
  {%- endif -%}
  {{ return(info) }}
{% endmacro %}

{#- Split GROUP BY into expressions; an ordinal stands for the select item's expression.
    GROUP BY ALL, ROLLUP, CUBE and GROUPING SETS are IVM044. -#}
{% macro _ivm_group_expressions(parsed, main, info) %}
  {%- set groups = dbt_ivm._ivm_group_ranges(parsed, main) -%}
  {%- if groups.refused is not none -%}
    {%- set t = parsed.tk.tokens[parsed.tk.significant[groups.refused]] -%}
    {%- do dbt_ivm._ivm_add_issue(parsed, 'IVM044', parsed.tk, groups.refused, 'GROUP BY ALL' if t.word == 'all' else t.text | upper) -%}
    {{ return(none) }}
  {%- endif -%}
  {%- do info.group_exprs.extend(groups.ranges) -%}
{% endmacro %}

{#- block's GROUP BY: {'ranges': [s, e) of each expression, an ordinal resolved to its
    select item's expression; 'refused': the position of ALL, ROLLUP, CUBE or GROUPING SETS,
    which the package does not maintain, else none}. -#}
{% macro _ivm_group_ranges(parsed, block) %}
  {%- set toks = parsed.tk.tokens -%}
  {%- set sig = parsed.tk.significant -%}
  {%- set gs = block.group_range[0] -%}
  {%- set ge = block.group_range[1] -%}
  {%- if gs < ge and toks[sig[gs]].word == 'all' -%}{{ return({'ranges': [], 'refused': gs}) }}{%- endif -%}
  {%- for p in range(gs, ge) if toks[sig[p]].depth == block.base and toks[sig[p]].word in ('rollup', 'cube', 'grouping', 'with') -%}
    {{ return({'ranges': [], 'refused': p}) }}
  {%- endfor -%}
  {%- set ranges = [] -%}
  {%- set cur = namespace(s=gs) -%}
  {%- for p in range(gs, ge + 1) -%}
    {%- if p == ge or (toks[sig[p]].text == ',' and toks[sig[p]].depth == block.base) -%}
      {%- set t = toks[sig[cur.s]] -%}
      {%- if p - cur.s == 1 and t.kind == 'num' and t.text.isdigit() and t.text | int >= 1 and t.text | int <= block['items'] | length -%}
        {%- set item = block['items'][t.text | int - 1] -%}
        {%- do ranges.append([item.s, item.xe]) -%}
      {%- else -%}
        {%- do ranges.append([cur.s, p]) -%}
      {%- endif -%}
      {%- set cur.s = p + 1 -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return({'ranges': ranges, 'refused': none}) }}
{% endmacro %}

{#- True when [s, e) references a column outside the given aggregate calls. -#}
{% macro _ivm_column_outside_calls(parsed, s, e, calls) %}
  {%- set toks = parsed.tk.tokens -%}
  {%- set sig = parsed.tk.significant -%}
  {%- set skip = {} -%}
  {%- for c in calls -%}{%- for p in range(c.pos, c.end) -%}{%- do skip.update({p: true}) -%}{%- endfor -%}{%- endfor -%}
  {%- for p in range(s, e) if p not in skip -%}
    {%- set t = toks[sig[p]] -%}
    {%- set next = toks[sig[p + 1]].text if p + 1 < sig | length else '' -%}
    {%- if t.kind == 'qid' or (t.kind == 'word' and t.lower not in dbt_ivm._ivm_non_column_words() and next != '(') -%}
      {{ return(true) }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(false) }}
{% endmacro %}
