{#- Structural parser for the subset of Spark SQL that dbt_ivm can maintain.
    It finds the query blocks (main query, CTEs, derived tables), their select lists and
    FROM items, and records every construct that the restriction catalog names
    (see ivm_restriction_catalog). Anything it does not understand is reported as IVM001,
    never guessed. The only implementation of these rules: `dbt-ivm explain` runs these
    macros too; tests/test_analyzer.py checks them on the SQL corpus. -#}

{% macro _ivm_clause_keywords() %}
  {{ return(['from', 'where', 'group', 'having', 'order', 'limit', 'window', 'qualify', 'sort', 'cluster', 'distribute', 'union',
      'intersect', 'except', 'minus', 'lateral', 'offset']) }}
{% endmacro %}

{% macro _ivm_join_keywords() %}
  {{ return(['join', 'inner', 'left', 'right', 'full', 'cross', 'outer', 'semi', 'anti', 'natural', 'on', 'using', 'lateral']) }}
{% endmacro %}

{% macro _ivm_nondeterministic_functions() %}
  {{ return(['rand', 'random', 'randn', 'uuid', 'shuffle', 'now', 'current_timestamp', 'current_date', 'localtimestamp',
      'curdate', 'current_time', 'current_timezone', 'unix_timestamp', 'monotonically_increasing_id', 'spark_partition_id', 'input_file_name',
          'input_file_block_start', 'input_file_block_length', 'randstr', 'uniform', 'try_reflect', 'reflect', 'java_method']) }}
{% endmacro %}

{% macro _ivm_generator_functions() %}
  {{ return(['explode', 'explode_outer', 'posexplode', 'posexplode_outer', 'inline', 'inline_outer', 'stack', 'json_tuple', 'range']) }}
{% endmacro %}

{% macro _ivm_aggregate_functions() %}
  {{ return(['count', 'sum', 'avg', 'mean', 'min', 'max', 'count_if', 'collect_list', 'collect_set', 'array_agg', 'first',
      'first_value', 'last', 'last_value', 'any_value', 'any', 'some', 'every', 'bool_and', 'bool_or', 'stddev', 'stddev_pop',
          'stddev_samp', 'std', 'variance', 'var_pop', 'var_samp', 'approx_count_distinct', 'approx_percentile', 'percentile',
              'percentile_approx', 'percentile_cont', 'percentile_disc', 'median', 'mode', 'max_by', 'min_by', 'corr',
                  'covar_pop', 'covar_samp', 'kurtosis', 'skewness', 'bit_and', 'bit_or', 'bit_xor', 'regr_count', 'regr_avgx',
                      'regr_avgy', 'regr_slope', 'regr_intercept', 'regr_r2', 'regr_sxx', 'regr_sxy', 'regr_syy',
                          'histogram_numeric', 'string_agg', 'listagg', 'count_min_sketch', 'hll_sketch_agg', 'hll_union_agg',
                              'try_sum', 'try_avg', 'product']) }}
{% endmacro %}

{#- Words that are never a column reference on either side of a join equality. -#}
{% macro _ivm_non_column_words() %}
  {{ return(['null', 'true', 'false', 'and', 'or', 'not', 'is', 'as', 'in', 'like', 'between', 'case', 'when', 'then', 'else',
      'end', 'cast', 'interval', 'int', 'integer', 'bigint', 'smallint', 'tinyint', 'string', 'varchar', 'char', 'double',
          'float', 'real', 'decimal', 'numeric', 'date', 'timestamp', 'timestamp_ntz', 'boolean', 'binary', 'long', 'short', 'byte']) }}
{% endmacro %}

{#- keyed: the keyed recompute path (macros/analysis/keyed.sql) can maintain the construct. -#}
{% macro _ivm_add_issue(ctx, code, tk, p, construct, keyed=false) %}
  {%- set where = dbt_ivm._ivm_position(tk, p) if p is not none and p >= 0 else 'the model' -%}
  {%- do ctx.issues.append({'code': code, 'construct': construct, 'position': where, 'keyed': keyed}) -%}
{% endmacro %}

{#- Parse a compiled model. upstreams: list of {'name', 'parts'} where parts are the
    lower-case name parts the relation renders to in the compiled SQL. -#}
{% macro _ivm_parse_query(sql, upstreams) %}
  {%- set tk = dbt_ivm._ivm_tokenize(sql) -%}
  {%- set ctx = {'tk': tk, 'blocks': [], 'issues': [], 'rels': [], 'qualifiers': [], 'ctes': {}, 'cte_reads': {}, 'upstreams': upstreams,
                 'dropped': [], 'notes': []} -%}
  {%- if not tk.balanced -%}
    {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM001', tk, none, 'unbalanced parentheses') -%}
    {{ return(ctx) }}
  {%- endif -%}
  {%- set n = tk.significant | length -%}
  {%- set last = n - 1 if n > 0 and tk.tokens[tk.significant[n - 1]].text == ';' else n -%}
  {%- for p in range(last) if tk.tokens[tk.significant[p]].text == ';' -%}
    {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM001', tk, p, 'more than one statement') -%}
    {{ return(ctx) }}
  {%- endfor -%}
  {%- set queue = [{'kind': 'main', 'name': 'main query', 's': 0, 'e': last}] -%}
  {%- for job in queue -%}
    {%- do dbt_ivm._ivm_parse_block(ctx, job, queue) -%}
  {%- endfor -%}
  {#- an unread CTE's upstreams would be tracked, and their changes applied to rows they never made -#}
  {%- for name, p in ctx.ctes.items() if name not in ctx.cte_reads -%}
    {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM003', tk, p, 'CTE ' ~ name ~ ' never read') -%}
  {%- endfor -%}
  {#- a CTE read twice joins the upstreams it reads with themselves -#}
  {%- for name, reads in ctx.cte_reads.items() if ctx.rels -%}
    {%- for p in reads[1:] -%}{%- do dbt_ivm._ivm_add_issue(ctx, 'IVM022', tk, p, 'CTE ' ~ name ~ ' read twice', true) -%}{%- endfor -%}
  {%- endfor -%}
  {%- do dbt_ivm._ivm_drop_ordering(ctx) -%}
  {%- do dbt_ivm._ivm_scan_functions(ctx) -%}
  {%- do dbt_ivm._ivm_find_qualifiers(ctx) -%}
  {{ return(ctx) }}
{% endmacro %}

{#- Blank the tokens of ORDER BY / SORT BY clauses without LIMIT: every SQL made from the
    tokens (templates, the definition view) leaves them out, and a note says so. -#}
{% macro _ivm_drop_ordering(ctx) %}
  {%- set tk = ctx.tk -%}
  {%- for d in ctx.dropped -%}
    {%- do ctx.notes.append(d.construct ~ ' at ' ~ dbt_ivm._ivm_position(tk, d.s) ~ ' dropped: a table keeps no order') -%}
    {%- for p in range(d.s, d.e) -%}
      {%- do tk.tokens[tk.significant[p]].update({'text': '', 'lower': '', 'word': ''}) -%}
    {%- endfor -%}
  {%- endfor -%}
{% endmacro %}

{% macro _ivm_parse_block(ctx, job, queue) %}
  {%- set tk = ctx.tk -%}
  {%- set toks = tk.tokens -%}
  {%- set sig = tk.significant -%}
  {%- set ns = namespace(s=job.s, e=job.e) -%}
  {#- unwrap redundant parentheses around the whole block -#}
  {%- for _ in range(20) -%}
    {%- if ns.e - ns.s >= 2 and toks[sig[ns.s]].text == '(' and dbt_ivm._ivm_match_paren(tk, ns.s) == ns.e - 1 -%}
      {%- set ns.s = ns.s + 1 -%}{%- set ns.e = ns.e - 1 -%}
    {%- else -%}{%- break -%}{%- endif -%}
  {%- endfor -%}
  {%- set block = {'id': ctx.blocks | length, 'kind': job.kind, 'name': job.name, 's': ns.s, 'e': ns.e,
                   'distinct': false, 'items': [], 'from_kw': none, 'from_items': [], 'joins': [],
                   'clauses': {}, 'ok': false} -%}
  {%- do ctx.blocks.append(block) -%}
  {%- if ns.s >= ns.e -%}
    {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM001', tk, none, 'empty query') -%}{{ return(block) }}
  {%- endif -%}
  {%- set base = toks[sig[ns.s]].depth -%}
  {%- do block.update({'base': base}) -%}
  {#- WITH clause: every CTE becomes a block of its own -#}
  {%- if toks[sig[ns.s]].word == 'with' -%}
    {%- set c = namespace(p=ns.s + 1, ok=true) -%}
    {%- if c.p < ns.e and toks[sig[c.p]].word == 'recursive' -%}
      {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM001', tk, c.p, 'WITH RECURSIVE') -%}{{ return(block) }}
    {%- endif -%}
    {%- for _ in range(ns.e) -%}
      {%- if c.p + 2 >= ns.e or toks[sig[c.p]].kind not in ('word', 'qid') -%}{%- set c.ok = false -%}{%- break -%}{%- endif -%}
      {%- set cte_name = toks[sig[c.p]].lower -%}
      {%- set q = c.p + 2 if toks[sig[c.p + 1]].word == 'as' else c.p + 1 -%}
      {%- if toks[sig[q]].text != '(' -%}{%- set c.ok = false -%}{%- break -%}{%- endif -%}
      {%- set m = dbt_ivm._ivm_match_paren(tk, q) -%}
      {%- do ctx.ctes.update({cte_name: c.p}) -%}
      {%- do queue.append({'kind': 'cte', 'name': cte_name, 's': q + 1, 'e': m}) -%}
      {%- set c.p = m + 1 -%}
      {%- if c.p < ns.e and toks[sig[c.p]].text == ',' -%}{%- set c.p = c.p + 1 -%}{%- else -%}{%- break -%}{%- endif -%}
    {%- endfor -%}
    {%- if not c.ok -%}
      {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM001', tk, c.p, 'WITH clause (expected `name as (select ...)`)') -%}{{ return(block) }}
    {%- endif -%}
    {%- set ns.s = c.p -%}
  {%- endif -%}
  {%- if ns.s >= ns.e or toks[sig[ns.s]].word != 'select' -%}
    {%- set what = toks[sig[ns.s]].text if ns.s < ns.e else 'end of query' -%}
    {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM001', tk, ns.s, 'expected SELECT, found `' ~ what ~ '`') -%}{{ return(block) }}
  {%- endif -%}
  {#- clause keywords at this block's depth -#}
  {%- set clauses = block.clauses -%}
  {%- for p in range(ns.s + 1, ns.e) -%}
    {%- set t = toks[sig[p]] -%}
    {%- if t.depth == base and t.word in dbt_ivm._ivm_clause_keywords() and t.word not in clauses and toks[sig[p - 1]].text != '.' -%}
      {%- do clauses.update({t.lower: p}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set set_ops = [] -%}
  {%- for op in ['intersect', 'except', 'minus'] if op in clauses -%}
    {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM013', tk, clauses[op], 'set operation ' ~ op | upper) -%}
    {%- do set_ops.append(op) -%}
  {%- endfor -%}
  {%- if 'union' in clauses and not set_ops -%}
    {%- do dbt_ivm._ivm_union_branches(ctx, block, ns.s, ns.e, base, queue) -%}{{ return(block) }}
  {%- elif 'union' in clauses -%}
    {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM013', tk, clauses['union'], 'set operation UNION') -%}
  {%- endif -%}
  {%- if 'lateral' in clauses -%}
    {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM015', tk, clauses['lateral'], 'LATERAL VIEW') -%}
  {%- endif -%}
  {#- ORDER BY / SORT BY without LIMIT orders nothing a table keeps: dropped (ctx.dropped) -#}
  {%- set limited = 'limit' in clauses or 'offset' in clauses -%}
  {%- for kw in ['order', 'limit', 'offset', 'sort', 'cluster', 'distribute'] if kw in clauses -%}
    {%- if kw in ('order', 'sort') and not limited -%}
      {%- do ctx.dropped.append({'s': clauses[kw], 'e': ns.e, 'construct': kw | upper ~ ' BY'}) -%}
    {%- else -%}
      {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM012', tk, clauses[kw], kw | upper ~ (' BY' if kw not in ('limit', 'offset') else '')) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- for kw in ['window', 'qualify'] if kw in clauses -%}
    {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM011', tk, clauses[kw], kw | upper ~ ' clause', kw == 'qualify') -%}
  {%- endfor -%}
  {%- set positions = clauses.values() | list | sort -%}
  {%- if 'from' not in clauses -%}
    {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM050', tk, ns.s, 'SELECT without FROM') -%}{{ return(block) }}
  {%- endif -%}
  {%- set from_pos = clauses['from'] -%}
  {%- do block.update({'from_kw': from_pos}) -%}
  {#- select list -#}
  {%- set sel = namespace(p=ns.s + 1) -%}
  {%- if toks[sig[sel.p]].word in ('distinct', 'all') -%}
    {%- do block.update({'distinct': toks[sig[sel.p]].word == 'distinct', 'distinct_pos': sel.p}) -%}
    {%- set sel.p = sel.p + 1 -%}
  {%- endif -%}
  {%- do block.update({'select_s': sel.p}) -%}
  {%- do dbt_ivm._ivm_split_select_items(ctx, block, sel.p, from_pos, base) -%}
  {#- end of the FROM clause: the next clause keyword after it -#}
  {%- set fe = namespace(e=ns.e) -%}
  {%- for p in positions if p > from_pos and p < fe.e -%}{%- set fe.e = p -%}{%- endfor -%}
  {#- ranges of WHERE / GROUP BY / HAVING -#}
  {%- for kw in ['where', 'group', 'having', 'qualify'] if kw in clauses -%}
    {%- set r = namespace(e=ns.e) -%}
    {%- for p in positions if p > clauses[kw] and p < r.e -%}{%- set r.e = p -%}{%- endfor -%}
    {%- set start = clauses[kw] + (2 if kw == 'group' else 1) -%}
    {%- do block.update({kw ~ '_range': [start, r.e]}) -%}
  {%- endfor -%}
  {%- do dbt_ivm._ivm_parse_from(ctx, block, from_pos + 1, fe.e, base, queue) -%}
  {%- if 'where_range' in block -%}
    {%- do dbt_ivm._ivm_where_subqueries(ctx, block, queue) -%}
  {%- endif -%}
  {%- if 'having_range' in block -%}
    {%- do dbt_ivm._ivm_check_subqueries(ctx, block.having_range[0], block.having_range[1], 'HAVING') -%}
  {%- endif -%}
  {%- do block.update({'ok': true}) -%}
  {{ return(block) }}
{% endmacro %}

{#- Split the select list [s, e) at top-level commas; note stars and output names. -#}
{% macro _ivm_split_select_items(ctx, block, s, e, base) %}
  {%- set tk = ctx.tk -%}
  {%- set toks = tk.tokens -%}
  {%- set sig = tk.significant -%}
  {%- set cur = namespace(s=s) -%}
  {%- for p in range(s, e + 1) -%}
    {%- if p == e or (toks[sig[p]].text == ',' and toks[sig[p]].depth == base) -%}
      {%- set is_ = cur.s -%}
      {%- set ie = p -%}
      {%- set width = ie - is_ -%}
      {#- xe: end of the expression, before the alias -#}
      {%- set item = {'s': is_, 'e': ie, 'xe': ie, 'star': none, 'name': none} -%}
      {%- if width == 1 and toks[sig[is_]].text == '*' -%}
        {%- do item.update({'star': '*'}) -%}
      {%- elif width == 3 and toks[sig[ie - 1]].text == '*' and toks[sig[ie - 2]].text == '.' -%}
        {%- do item.update({'star': toks[sig[is_]].lower}) -%}
      {%- elif width >= 2 and toks[sig[ie - 1]].kind in ('word', 'qid') and toks[sig[ie - 2]].word == 'as' -%}
        {%- do item.update({'name': toks[sig[ie - 1]].lower, 'xe': ie - 2}) -%}
      {%- elif width >= 2 and toks[sig[ie - 1]].kind in ('word', 'qid') and toks[sig[ie - 2]].text != '.'
          and (toks[sig[ie - 2]].text == ')' or toks[sig[ie - 2]].kind in ('word', 'qid', 'num', 'str')) and toks[sig[ie - 1]].word != 'end' -%}
        {%- do item.update({'name': toks[sig[ie - 1]].lower, 'xe': ie - 1}) -%}
      {%- elif toks[sig[ie - 1]].kind in ('word', 'qid') and (width == 1 or toks[sig[ie - 2]].text == '.') -%}
        {#- a column, bare or qualified, is named after it (not `case ... end`) -#}
        {%- do item.update({'name': toks[sig[ie - 1]].lower}) -%}
      {%- endif -%}
      {%- do block['items'].append(item) -%}
      {%- do dbt_ivm._ivm_check_subqueries(ctx, is_, ie, 'SELECT list') -%}
      {%- set cur.s = p + 1 -%}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}

{% macro _ivm_check_subqueries(ctx, s, e, where_) %}
  {%- set toks = ctx.tk.tokens -%}
  {%- set sig = ctx.tk.significant -%}
  {%- for p in range(s, e - 1) -%}
    {%- if toks[sig[p]].text == '(' and toks[sig[p + 1]].word in ('select', 'with') -%}
      {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM014', ctx.tk, p, 'subquery in ' ~ where_) -%}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}

{#- UNION [ALL] of query blocks in [s, e): each branch becomes a block of its own (kind
    'branch', listed in block.union); the block's columns are its first branch's. The keyed
    path maintains it (IVM013, keyed). A final ORDER BY without LIMIT is dropped. -#}
{% macro _ivm_union_branches(ctx, block, s, e, base, queue) %}
  {%- set tk = ctx.tk -%}
  {%- set toks = tk.tokens -%}
  {%- set sig = tk.significant -%}
  {%- set cuts = [] -%}
  {%- set ns = namespace(end=e, limited=none, order=none) -%}
  {%- for p in range(s, e) if toks[sig[p]].depth == base and toks[sig[p - 1]].text != '.' -%}
    {%- if toks[sig[p]].word == 'union' -%}{%- do cuts.append(p) -%}{%- endif -%}
  {%- endfor -%}
  {%- for p in range(cuts[-1], e) if toks[sig[p]].depth == base -%}
    {%- if toks[sig[p]].word in ('order', 'sort') and ns.order is none -%}{%- set ns.order = p -%}{%- endif -%}
    {%- if toks[sig[p]].word in ('limit', 'offset') and ns.limited is none -%}{%- set ns.limited = p -%}{%- endif -%}
  {%- endfor -%}
  {%- if ns.limited is not none -%}
    {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM012', tk, ns.limited, 'LIMIT after UNION') -%}{{ return(none) }}
  {%- endif -%}
  {%- if ns.order is not none -%}
    {%- do ctx.dropped.append({'s': ns.order, 'e': e, 'construct': 'ORDER BY'}) -%}
    {%- set ns.end = ns.order -%}
  {%- endif -%}
  {%- set names = [] -%}
  {%- set starts = [s] -%}
  {%- for p in cuts -%}
    {%- do starts.append(p + (2 if toks[sig[p + 1]].word in ('all', 'distinct') else 1)) -%}
  {%- endfor -%}
  {%- for i in range(starts | length) -%}
    {%- set name = block.name ~ ' branch ' ~ (i + 1) -%}
    {%- do names.append(name) -%}
    {%- do queue.append({'kind': 'branch', 'name': name, 's': starts[i], 'e': cuts[i] if i < cuts | length else ns.end}) -%}
  {%- endfor -%}
  {%- do block.update({'union': names, 'union_cuts': cuts, 'ok': true}) -%}
  {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM013', tk, cuts[0], 'set operation UNION' ~
      (' ALL' if toks[sig[cuts[0] + 1]].word == 'all' else ''), true) -%}
{% endmacro %}

{#- Subqueries in WHERE. A top-level conjunct `[NOT] EXISTS (select ...)` or `expr IN
    (select ...)` becomes a query block of its own (kind 'subquery', listed in
    block.subqueries with the positions of its NOT and its parenthesis): the keyed path
    maintains it (IVM014, keyed). Any other subquery (NOT IN, under OR, scalar) is IVM014. -#}
{% macro _ivm_where_subqueries(ctx, block, queue) %}
  {%- set toks = ctx.tk.tokens -%}
  {%- set sig = ctx.tk.significant -%}
  {%- do block.update({'subqueries': []}) -%}
  {%- for c in dbt_ivm._ivm_conjuncts(ctx, block.where_range[0], block.where_range[1]) -%}
    {%- set ns = namespace(paren=none, neg=none, kw=none) -%}
    {%- set words = [toks[sig[c[0]]].word, toks[sig[c[0] + 1]].word if c[0] + 1 < c[1] else ''] -%}
    {%- if words[0] == 'exists' -%}
      {%- set ns.paren, ns.kw = c[0] + 1, 'exists' -%}
    {%- elif words == ['not', 'exists'] -%}
      {%- set ns.paren, ns.kw, ns.neg = c[0] + 2, 'exists', c[0] -%}
    {%- else -%}
      {%- for p in range(c[0] + 1, c[1] - 1) if ns.kw is none and toks[sig[p]].depth == toks[sig[c[0]]].depth
          and toks[sig[p]].word == 'in' and toks[sig[p + 1]].text == '(' -%}
        {%- set ns.paren, ns.kw = p + 1, 'in' -%}
        {%- if toks[sig[p - 1]].word == 'not' -%}{%- set ns.neg = p - 1 -%}{%- endif -%}
      {%- endfor -%}
    {%- endif -%}
    {%- set close = dbt_ivm._ivm_match_paren(ctx.tk, ns.paren) if ns.paren is not none else -1 -%}
    {%- set is_query = ns.paren is not none and toks[sig[ns.paren + 1]].word in ('select', 'with') and close == c[1] - 1 -%}
    {%- set head_clean = is_query and (ns.kw == 'exists' or not dbt_ivm._ivm_has_subquery(ctx, c[0], ns.paren)) -%}
    {%- if head_clean and not (ns.kw == 'in' and ns.neg is not none) -%}
      {%- set name = 'subquery ' ~ (ctx.blocks | length + queue | length) -%}
      {%- do queue.append({'kind': 'subquery', 'name': name, 's': ns.paren + 1, 'e': close}) -%}
      {%- do block.subqueries.append({'name': name, 's': c[0], 'e': c[1], 'neg': ns.neg, 'kw': ns.kw, 'paren': ns.paren}) -%}
      {%- set shown = ('NOT ' if ns.neg is not none else '') ~ ns.kw | upper ~ ' subquery in WHERE' -%}
      {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM014', ctx.tk, ns.paren, shown, true) -%}
    {%- else -%}
      {%- do dbt_ivm._ivm_check_subqueries(ctx, c[0], c[1], 'WHERE' ~ (' (NOT IN: use NOT EXISTS)' if ns.kw == 'in' and ns.neg is not none
          else '')) -%}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}

{% macro _ivm_has_subquery(ctx, s, e) %}
  {%- for p in range(s, e - 1) if ctx.tk.tokens[ctx.tk.significant[p]].text == '('
      and ctx.tk.tokens[ctx.tk.significant[p + 1]].word in ('select', 'with') -%}{{ return(true) }}{%- endfor -%}
  {{ return(false) }}
{% endmacro %}

{#- FROM items and joins in [s, e). -#}
{% macro _ivm_parse_from(ctx, block, s, e, base, queue) %}
  {%- set tk = ctx.tk -%}
  {%- set toks = tk.tokens -%}
  {%- set sig = tk.significant -%}
  {%- set c = namespace(p=s, join='from', join_pos=s, ok=true) -%}
  {%- for _ in range(e - s + 1) -%}
    {%- if c.p >= e -%}{%- break -%}{%- endif -%}
    {#- one relation -#}
    {%- set t = toks[sig[c.p]] -%}
    {%- set item = {'join': c.join, 'join_pos': c.join_pos, 'kind': none, 'alias': none, 'name': none, 'pos': c.p, 'on': none, 'using': false} -%}
    {%- if t.text == '(' -%}
      {%- set m = dbt_ivm._ivm_match_paren(tk, c.p) -%}
      {%- if toks[sig[c.p + 1]].word in ('select', 'with') -%}
        {%- set child = 'derived table ' ~ (ctx.blocks | length + queue | length) -%}
        {%- do queue.append({'kind': 'derived', 'name': child, 's': c.p + 1, 'e': m}) -%}
        {%- do item.update({'kind': 'derived', 'name': child}) -%}
      {%- else -%}
        {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM001', tk, c.p, 'parenthesised join') -%}{%- set c.ok = false -%}{%- break -%}
      {%- endif -%}
      {%- set c.p = m + 1 -%}
    {%- elif t.kind in ('word', 'qid') -%}
      {%- set parts = [t.lower] -%}
      {%- set name_s = c.p -%}
      {%- set c.p = c.p + 1 -%}
      {%- for _ in range(4) -%}
        {%- if c.p + 1 < e and toks[sig[c.p]].text == '.' and toks[sig[c.p + 1]].kind in ('word', 'qid') -%}
          {%- do parts.append(toks[sig[c.p + 1]].lower) -%}{%- set c.p = c.p + 2 -%}
        {%- else -%}{%- break -%}{%- endif -%}
      {%- endfor -%}
      {%- if c.p < e and toks[sig[c.p]].text == '(' -%}
        {%- set code = 'IVM015' if parts[-1] in dbt_ivm._ivm_generator_functions() else 'IVM002' -%}
        {%- do dbt_ivm._ivm_add_issue(ctx, code, tk, name_s, 'table function ' ~ parts | join('.') ~ '()') -%}{%- set c.ok = false -%}{%- break -%}
      {%- endif -%}
      {%- if c.p < e and toks[sig[c.p]].word == 'tablesample' -%}
        {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM010', tk, name_s,
            'TABLESAMPLE (a random sample of the upstream)') -%}{%- set c.ok = false -%}{%- break -%}
      {%- endif -%}
      {%- do item.update({'name': parts | join('.'), 'name_s': name_s, 'name_e': c.p}) -%}
      {%- set ns_up = namespace(found=none) -%}
      {%- for up in ctx.upstreams -%}{%- if up.parts == parts -%}{%- set ns_up.found = loop.index0 -%}{%- endif -%}{%- endfor -%}
      {%- if ns_up.found is not none -%}
        {%- do item.update({'kind': 'upstream', 'upstream': ns_up.found}) -%}
      {%- elif parts | length == 1 and parts[0] in ctx.ctes -%}
        {%- do item.update({'kind': 'cte'}) -%}
        {%- do ctx.cte_reads.setdefault(parts[0], []).append(name_s) -%}
      {%- else -%}
        {%- do item.update({'kind': 'unknown'}) -%}
        {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM002', tk, name_s, 'relation ' ~ parts | join('.')) -%}
      {%- endif -%}
    {%- else -%}
      {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM001', tk, c.p, 'FROM item `' ~ t.text ~ '`') -%}{%- set c.ok = false -%}{%- break -%}
    {%- endif -%}
    {#- alias -#}
    {%- if c.p < e and toks[sig[c.p]].word == 'as' and c.p + 1 < e -%}
      {%- do item.update({'alias': toks[sig[c.p + 1]].lower}) -%}{%- set c.p = c.p + 2 -%}
    {%- elif c.p < e and toks[sig[c.p]].kind in ('word', 'qid') and toks[sig[c.p]].word not in dbt_ivm._ivm_join_keywords() -%}
      {%- do item.update({'alias': toks[sig[c.p]].lower}) -%}{%- set c.p = c.p + 1 -%}
    {%- endif -%}
    {%- do item.update({'alias_given': item.alias is not none}) -%}
    {%- if item.alias is none and item.kind in ('upstream', 'cte', 'unknown') -%}
      {%- do item.update({'alias': item.name.split('.')[-1]}) -%}
    {%- endif -%}
    {%- if item.kind == 'upstream' -%}
      {%- do ctx.rels.append({'upstream': item.upstream, 's': item.name_s, 'e': item.name_e, 'alias': item.alias,
          'alias_given': item.alias_given, 'block': block.id}) -%}
    {%- endif -%}
    {#- join condition -#}
    {%- if c.p < e and toks[sig[c.p]].word in ('on', 'using') -%}
      {%- set kw = toks[sig[c.p]].lower -%}
      {%- set cs = c.p + 1 -%}
      {%- set ce = namespace(e=e) -%}
      {%- for q in range(cs, e) -%}
        {%- set tq = toks[sig[q]] -%}
        {%- set is_call = q + 1 < e and toks[sig[q + 1]].text == '(' -%}
        {%- if tq.depth == base and (tq.text == ',' or (tq.word in ('join', 'inner', 'left', 'right', 'full', 'cross', 'natural',
            'lateral') and not is_call)) -%}{%- set ce.e = q -%}{%- break -%}{%- endif -%}
      {%- endfor -%}
      {%- do item.update({'on': [cs, ce.e], 'using': kw == 'using'}) -%}
      {%- do dbt_ivm._ivm_check_subqueries(ctx, cs, ce.e, 'join condition') -%}
      {%- set c.p = ce.e -%}
    {%- endif -%}
    {%- do block.from_items.append(item) -%}
    {#- next join operator -#}
    {%- if c.p >= e -%}{%- break -%}{%- endif -%}
    {%- set c.join_pos = c.p -%}
    {%- if toks[sig[c.p]].text == ',' -%}
      {%- set c.join = 'comma' -%}{%- set c.p = c.p + 1 -%}
    {%- else -%}
      {%- set words = [] -%}
      {%- for _ in range(4) -%}
        {%- set join_word = c.p < e and toks[sig[c.p]].word in ('inner', 'left', 'right', 'full', 'cross', 'outer', 'semi', 'anti',
            'natural', 'join', 'lateral') -%}
        {%- if join_word -%}
          {%- do words.append(toks[sig[c.p]].lower) -%}{%- set c.p = c.p + 1 -%}
          {%- if words[-1] == 'join' -%}{%- break -%}{%- endif -%}
        {%- else -%}{%- break -%}{%- endif -%}
      {%- endfor -%}
      {%- if 'lateral' in words -%}
        {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM015', tk, c.p - 1, 'LATERAL join') -%}{%- set c.ok = false -%}{%- break -%}
      {%- elif words | length == 0 or words[-1] != 'join' -%}
        {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM001', tk, c.p, 'FROM clause near `' ~ toks[sig[c.p]].text ~ '`') -%}
        {%- set c.ok = false -%}{%- break -%}
      {%- endif -%}
      {%- set kinds = words | reject('in', ['join', 'outer']) | list -%}
      {%- set c.join = kinds | join(' ') if kinds else 'inner' -%}
    {%- endif -%}
  {%- endfor -%}
  {%- do dbt_ivm._ivm_check_joins(ctx, block, base) -%}
{% endmacro %}

{#- Outer, cross, semi/anti joins and joins without an equality are restrictions. -#}
{% macro _ivm_check_joins(ctx, block, base) %}
  {%- set tk = ctx.tk -%}
  {%- for item in block.from_items if item.join != 'from' -%}
    {%- set j = item.join -%}
    {%- if j in ('left', 'right', 'full') -%}
      {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM020', tk, item.join_pos, j | upper ~ ' OUTER JOIN', true) -%}
    {%- elif j in ('left semi', 'left anti', 'semi', 'anti') -%}
      {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM014', tk, item.join_pos, j | upper ~ ' JOIN', true) -%}
    {%- elif 'natural' in j -%}
      {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM021', tk, item.join_pos, 'NATURAL JOIN (name the join columns with ON)') -%}
    {%- elif j == 'cross' -%}
      {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM021', tk, item.join_pos, 'CROSS JOIN') -%}
    {%- elif j == 'comma' -%}
      {%- set rng = block.get('where_range') -%}
      {%- if rng is none or not dbt_ivm._ivm_has_equality(ctx, rng[0], rng[1]) -%}
        {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM021', tk, item.join_pos, 'comma join without an equality in WHERE') -%}
      {%- endif -%}
    {%- elif item.on is none -%}
      {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM021', tk, item.join_pos, 'JOIN without ON') -%}
    {%- elif not item.using and not dbt_ivm._ivm_has_equality(ctx, item.on[0], item.on[1]) -%}
      {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM021', tk, item.join_pos, 'join condition without an equality between columns') -%}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}

{#- True when the condition [s, e) has a top-level AND-conjunct `col-expr = col-expr`. -#}
{% macro _ivm_has_equality(ctx, s, e) %}
  {%- set toks = ctx.tk.tokens -%}
  {%- set sig = ctx.tk.significant -%}
  {%- set r = namespace(s=s, e=e) -%}
  {%- for _ in range(10) -%}
    {%- if r.e - r.s >= 2 and toks[sig[r.s]].text == '(' and dbt_ivm._ivm_match_paren(ctx.tk, r.s) == r.e - 1 -%}
      {%- set r.s = r.s + 1 -%}{%- set r.e = r.e - 1 -%}
    {%- else -%}{%- break -%}{%- endif -%}
  {%- endfor -%}
  {%- if r.s >= r.e -%}{{ return(false) }}{%- endif -%}
  {%- set d = toks[sig[r.s]].depth -%}
  {%- set bounds = [r.s] -%}
  {%- set ns = namespace(has_or=false, between=false) -%}
  {%- for p in range(r.s, r.e) -%}
    {%- set t = toks[sig[p]] -%}
    {%- if t.depth == d and t.word == 'between' -%}{%- set ns.between = true -%}{%- endif -%}
    {%- if t.depth == d and t.word == 'and' -%}
      {%- if ns.between -%}{%- set ns.between = false -%}{%- else -%}{%- do bounds.append(p) -%}{%- endif -%}
    {%- endif -%}
    {%- if t.depth == d and t.word == 'or' -%}{%- set ns.has_or = true -%}{%- endif -%}
  {%- endfor -%}
  {%- if ns.has_or -%}{{ return(false) }}{%- endif -%}
  {%- do bounds.append(r.e) -%}
  {%- for i in range(bounds | length - 1) -%}
    {%- set cs = bounds[i] + (0 if i == 0 else 1) -%}
    {%- set ce = bounds[i + 1] -%}
    {%- set eqs = [] -%}
    {%- for p in range(cs, ce) if toks[sig[p]].depth == d and toks[sig[p]].text in ('=', '==', '<=>') -%}{%- do eqs.append(p) -%}{%- endfor -%}
    {%- if eqs | length == 1 and dbt_ivm._ivm_has_column(ctx, cs, eqs[0]) and dbt_ivm._ivm_has_column(ctx, eqs[0] + 1, ce) -%}
      {{ return(true) }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(false) }}
{% endmacro %}

{% macro _ivm_has_column(ctx, s, e) %}
  {%- set toks = ctx.tk.tokens -%}
  {%- set sig = ctx.tk.significant -%}
  {%- for p in range(s, e) -%}
    {%- set t = toks[sig[p]] -%}
    {%- set next = toks[sig[p + 1]].text if p + 1 < sig | length else '' -%}
    {%- if (t.kind == 'qid' or (t.kind == 'word' and t.lower not in dbt_ivm._ivm_non_column_words())) and next != '(' -%}
      {{ return(true) }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(false) }}
{% endmacro %}

{#- Function calls anywhere in the query: window functions, non-deterministic functions,
    generators and aggregates. -#}
{% macro _ivm_scan_functions(ctx) %}
  {%- set tk = ctx.tk -%}
  {%- set toks = tk.tokens -%}
  {%- set sig = tk.significant -%}
  {%- set n = sig | length -%}
  {%- set aggs = [] -%}
  {%- for p in range(n) -%}
    {%- set t = toks[sig[p]] -%}
    {%- set next = toks[sig[p + 1]] if p + 1 < n else {'text': '', 'lower': '', 'kind': '', 'word': ''} -%}
    {%- set prev = toks[sig[p - 1]].text if p > 0 else '' -%}
    {%- if t.kind == 'word' and prev != '.' -%}
      {%- set called = next.text == '(' or t.word in ('current_timestamp', 'current_date', 'current_time', 'localtimestamp') -%}
      {#- unix_timestamp(x) converts x; only unix_timestamp() reads the clock -#}
      {%- set converts = t.lower == 'unix_timestamp' and p + 2 < n and toks[sig[p + 2]].text != ')' -%}
      {%- if t.lower in dbt_ivm._ivm_nondeterministic_functions() and called and not converts -%}
        {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM010', tk, p, t.lower ~ '()') -%}
      {%- elif next.text == '(' and t.lower in dbt_ivm._ivm_generator_functions() -%}
        {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM015', tk, p, t.lower ~ '()') -%}
      {%- elif t.word == 'over' and (next.text == '(' or next.kind in ('word', 'qid')) -%}
        {%- do dbt_ivm._ivm_add_issue(ctx, 'IVM011', tk, p, 'window function (OVER)', true) -%}
      {%- elif next.text == '(' and t.lower in dbt_ivm._ivm_aggregate_functions() -%}
        {%- do aggs.append(dbt_ivm._ivm_aggregate_call(tk, t.lower, p)) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- do ctx.update({'aggregates': aggs}) -%}
{% endmacro %}

{#- `schema.table.column` references to an upstream: a rewrite replaces the relation part
    by the alias the upstream gets. -#}
{% macro _ivm_find_qualifiers(ctx) %}
  {%- set toks = ctx.tk.tokens -%}
  {%- set sig = ctx.tk.significant -%}
  {%- set taken = [] -%}
  {%- for r in ctx.rels -%}{%- do taken.append(r.s) -%}{%- endfor -%}
  {%- for up in ctx.upstreams -%}
    {%- set upi = loop.index0 -%}
    {%- set width = up.parts | length * 2 - 1 -%}
    {%- if up.parts | length > 1 -%}
      {%- for p in range(sig | length - width) if p not in taken and toks[sig[p]].lower == up.parts[0]
          and (p == 0 or toks[sig[p - 1]].text != '.') -%}
        {%- set ns = namespace(ok=true) -%}
        {%- for i in range(up.parts | length) -%}
          {%- set part_differs = toks[sig[p + 2 * i]].lower != up.parts[i] -%}
          {%- set dot_missing = i > 0 and toks[sig[p + 2 * i - 1]].text != '.' -%}
          {%- if part_differs or dot_missing -%}{%- set ns.ok = false -%}{%- endif -%}
        {%- endfor -%}
        {%- if ns.ok and toks[sig[p + width]].text == '.' -%}
          {%- do ctx.qualifiers.append({'upstream': upi, 's': p, 'e': p + width}) -%}
        {%- endif -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}
