{#- The keyed recompute path (seed 002's general method): a model that the join and
    aggregate algorithms cannot maintain (outer joins, aggregates in CTEs, window functions,
    semi/anti joins, an upstream read twice) is refreshed by slices of a key R, a set of its
    output columns: the slices that a change can touch are deleted and recomputed from the
    definition, restricted to their keys.

    Which slices a change touches is computed by a key term per upstream occurrence: the
    model's query with that occurrence replaced by the old and new images of its changed
    rows, every other upstream read as its current rows plus the old images of its changed
    rows (a superset of both versions), and every construct made monotone so that any view
    row (old or new) derived with a changed row keeps its key in the term:
      * an outer join whose NULL-supplying side holds the occurrence becomes inner (a FULL
        join keeps the occurrence's side), an anti join on it becomes a semi join, and an
        anti join whose kept side holds it no longer filters; an inner join keeps the
        occurrence's side (outer), which lets Spark drop partners the key does not need;
      * HAVING and QUALIFY go, and so does every WHERE / ON conjunct over a value computed
        by an aggregate or a window function (such values differ on partial input).
    Above a window function the term keeps only conditions over columns that are equal on
    all rows of a partition (window-safe: PARTITION BY columns, or columns of relations
    without a window): a changed row then meets every partner that any row of its
    partition met. The key columns themselves must be row-level values (no aggregate or
    window result), never from the NULL-supplying side of an outer join, and PARTITION BY
    columns of every window function the rows pass through (a change moves a whole
    partition), unless the window's rows are joined to the key's relation by an equality of
    window-safe columns (a join on the partition reaches every key the partition reaches).
    A join of a window's rows needs such an equality, else its key term would be a cross
    join. -#}

{#- {'key': R (output column names) or none, 'row_key': unique output columns or none,
     'terms': [{'rel', 'upstream', 'sql'}], 'issues': what prevents the path}. -#}
{% macro _ivm_keyed_rules(parsed, aggregation, unique_key) %}
  {%- set tk = parsed.tk -%}
  {%- set result = {'key': none, 'row_key': none, 'terms': [], 'issues': []} -%}
  {%- set fail = {'code': none} -%}
  {%- set windows = {} -%}
  {%- for b in parsed.blocks if b.ok -%}
    {%- set wins = dbt_ivm._ivm_windows_in(parsed, b) -%}
    {%- if wins -%}{%- do windows.update({b.id: wins}) -%}{%- endif -%}
    {%- for w in wins if w.partition is none -%}
      {%- do result.issues.append({'code': 'IVM011', 'construct': 'window function without PARTITION BY (or over a named window): '
          'a change moves every row', 'position': dbt_ivm._ivm_position(tk, w.p)}) -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- for b in parsed.blocks if b.ok and b.from_items | length > 1 and dbt_ivm._ivm_window_below(parsed, b, windows) -%}
    {%- for i in dbt_ivm._ivm_unlinked_items(parsed, b, windows)[:1] -%}
      {%- do result.issues.append({'code': 'IVM071', 'construct': b.name ~ ' joins the rows of a window function without an '
          'equality on its PARTITION BY columns, so a change to a partition could reach every key (join them on a PARTITION '
          'BY column in an ON, or keep joins below the window function)', 'position': dbt_ivm._ivm_position(tk, b.from_items[i].join_pos)}) -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- if result.issues -%}{{ return(result) }}{%- endif -%}
  {%- set main = parsed.blocks[0] -%}
  {#- the key: unique_key, else the GROUP BY items, else every output column that qualifies -#}
  {%- set primary = unique_key or dbt_ivm._ivm_group_key_names(parsed, main, aggregation) -%}
  {%- set traced = {} -%}
  {%- for name in primary -%}{%- do traced.update({name: dbt_ivm._ivm_key_column(parsed, main, name, windows)}) -%}{%- endfor -%}
  {%- if primary and traced.values() | rejectattr('ok') | list | length == 0 -%}
    {%- set key = primary -%}
  {%- else -%}
    {%- set key = [] -%}
    {#- named output columns, and PARTITION BY columns a star may pass through -#}
    {%- set names = dbt_ivm._ivm_output_names(parsed, main) -%}
    {%- for wins in windows.values() -%}{%- for w in wins -%}{%- for part in w.partition -%}
      {%- do names.append(part.split(' . ')[-1].strip('`')) -%}
    {%- endfor -%}{%- endfor -%}{%- endfor -%}
    {%- set refused = [] -%}
    {%- for name in names if name not in traced and name not in key -%}
      {%- set t = dbt_ivm._ivm_key_column(parsed, main, name, windows) -%}
      {%- if t.ok -%}
        {%- do key.append(name) -%}
      {%- else -%}
        {%- do refused.append(t.why if t.why.startswith(name) else name ~ ' is ' ~ t.why) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endif -%}
  {%- if not key -%}
    {%- set failed = traced.values() | rejectattr('ok') | list -%}
    {%- if failed -%}
      {%- set why = primary | join(', ') ~ ': ' ~ failed[0].why -%}
    {%- else -%}
      {%- set why = 'no output column qualifies' ~ (': ' ~ refused | join('; ') if refused else '') -%}
    {%- endif -%}
    {%- do result.issues.append({'code': 'IVM070', 'construct': 'no key to recompute slices by (' ~ why ~ ')',
        'position': 'the model'}) -%}
    {{ return(result) }}
  {%- endif -%}
  {%- set row_key = unique_key or (primary if primary and key == primary else none) -%}
  {%- do result.update({'key': key, 'row_key': row_key or none}) -%}
  {%- for r in parsed.rels -%}
    {%- set ri = loop.index0 -%}
    {%- for path in dbt_ivm._ivm_holder_paths(parsed, ri) -%}
      {%- set term = dbt_ivm._ivm_key_term(parsed, ri, key, windows, path) -%}
      {%- if term.no_path -%}
        {%- do result.issues.append({'code': 'IVM071', 'construct': 'upstream ' ~ parsed.upstreams[r.upstream].name ~ ': '
            ~ term.no_path, 'position': dbt_ivm._ivm_position(tk, r.s)}) -%}
      {%- endif -%}
      {%- do result.terms.append({'rel': ri, 'upstream': r.upstream, 'sql': term.sql}) -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- if result.issues -%}{%- do result.update({'key': none, 'row_key': none, 'terms': []}) -%}{{ return(result) }}{%- endif -%}
  {%- set points = dbt_ivm._ivm_key_points(parsed, key, windows) -%}
  {%- do result.update({'pruned': dbt_ivm._ivm_pruned_definition(parsed, points), 'points': points}) -%}
  {{ return(result) }}
{% endmacro %}

{#- Output column `name` traced as a key column: it must pass through every window function. -#}
{% macro _ivm_key_column(parsed, main, name, windows) %}
  {%- set t = dbt_ivm._ivm_trace_output(parsed, main, name, windows) -%}
  {%- for b in parsed.blocks if t.ok and b.id in windows and b.id not in t.windows and not dbt_ivm._ivm_window_spread(parsed, b, windows) -%}
    {{ return({'ok': false, 'why': name ~ ' does not pass through the window function in ' ~ b.name ~
        ' (a key must be one of its PARTITION BY columns, or join its rows on them)', 'windows': []}) }}
  {%- endfor -%}
  {{ return(t) }}
{% endmacro %}

{#- Names of the select items that are the GROUP BY expressions of the main query (all of them, or none). -#}
{% macro _ivm_group_key_names(parsed, main, aggregation) %}
  {%- if aggregation.kind != 'aggregate' or not aggregation.group_exprs -%}{{ return([]) }}{%- endif -%}
  {%- set names = [] -%}
  {%- for g in aggregation.group_exprs -%}
    {%- set text = dbt_ivm._ivm_norm_text(parsed, g[0], g[1]) -%}
    {%- set found = namespace(name=none) -%}
    {%- for item in main['items'] if found.name is none and item.name is not none -%}
      {%- if dbt_ivm._ivm_norm_text(parsed, item.s, item.xe) == text or text == item.name -%}{%- set found.name = item.name -%}{%- endif -%}
    {%- endfor -%}
    {%- if found.name is none -%}{{ return([]) }}{%- endif -%}
    {%- do names.append(found.name) -%}
  {%- endfor -%}
  {{ return(names) }}
{% endmacro %}

{#- Lower-case significant token texts of [s, e), joined by spaces. -#}
{% macro _ivm_norm_text(parsed, s, e) %}
  {%- set out = [] -%}
  {%- for p in range(s, e) -%}{%- do out.append(parsed.tk.tokens[parsed.tk.significant[p]].lower) -%}{%- endfor -%}
  {{ return(out | join(' ')) }}
{% endmacro %}

{#- Output column names of a block: named items, and what its stars bring from CTEs and
    derived tables (a star over an upstream brings names unknown here: left out). -#}
{% macro _ivm_output_names(parsed, block) %}
  {%- if block.get('union') -%}{{ return(dbt_ivm._ivm_output_names(parsed, dbt_ivm._ivm_block_named(parsed, block.union[0]))) }}{%- endif -%}
  {%- set names = [] -%}
  {%- for item in block['items'] -%}
    {%- if item.name is not none -%}
      {%- do names.append(item.name) -%}
    {%- elif item.star -%}
      {%- for it in block.from_items if it.kind in ('cte', 'derived') and item.star in ('*', it.alias) -%}
        {%- do names.extend(dbt_ivm._ivm_output_names(parsed, dbt_ivm._ivm_child_block(parsed, it))) -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(names) }}
{% endmacro %}

{#- The output columns of a block by position: names, none for an unnamed item; none when
    a star brings columns unknown here (over an upstream). -#}
{% macro _ivm_output_slots(parsed, block) %}
  {%- if block.get('union') -%}{{ return(dbt_ivm._ivm_output_slots(parsed, dbt_ivm._ivm_block_named(parsed, block.union[0]))) }}{%- endif -%}
  {%- set slots = [] -%}
  {%- for item in block['items'] -%}
    {%- if item.star -%}
      {%- for it in block.from_items if item.star in ('*', it.alias) -%}
        {%- set child = dbt_ivm._ivm_child_block(parsed, it) if it.kind in ('cte', 'derived') else none -%}
        {%- set more = dbt_ivm._ivm_output_slots(parsed, child) if child is not none else none -%}
        {%- if more is none -%}{{ return(none) }}{%- endif -%}
        {%- do slots.extend(more) -%}
      {%- endfor -%}
    {%- else -%}
      {%- do slots.append(item.name) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(slots) }}
{% endmacro %}

{#- Each branch of a UNION block with the name of its column at the position of the first
    branch's column `name`: [{'block', 'name'}], or none when that cannot be told. -#}
{% macro _ivm_union_columns(parsed, block, name) %}
  {%- set first = dbt_ivm._ivm_output_slots(parsed, dbt_ivm._ivm_block_named(parsed, block.union[0])) -%}
  {%- if first is none or name not in first -%}{{ return(none) }}{%- endif -%}
  {%- set i = first.index(name) -%}
  {%- set pairs = [] -%}
  {%- for branch_name in block.union -%}
    {%- set b = dbt_ivm._ivm_block_named(parsed, branch_name) -%}
    {%- set slots = dbt_ivm._ivm_output_slots(parsed, b) -%}
    {%- if slots is none or slots | length != first | length or slots[i] is none -%}{{ return(none) }}{%- endif -%}
    {%- do pairs.append({'block': b, 'name': slots[i]}) -%}
  {%- endfor -%}
  {{ return(pairs) }}
{% endmacro %}

{% macro _ivm_child_block(parsed, item) %}
  {%- for b in parsed.blocks if b.name == item.name and b.kind in ('cte', 'derived') -%}{{ return(b) }}{%- endfor -%}
  {{ return(none) }}
{% endmacro %}

{#- Trace output column `name` of block down to the upstreams: {'ok', 'why', 'windows'
    (ids of the window blocks it passes through, each checked)}. -#}
{% macro _ivm_trace_output(parsed, block, name, windows) %}
  {%- if block.get('union') -%}
    {%- set found = [] -%}
    {%- for pair in dbt_ivm._ivm_union_columns(parsed, block, name) or [] -%}
      {%- set t = dbt_ivm._ivm_trace_output(parsed, pair.block, pair.name, windows) -%}
      {%- if not t.ok -%}{{ return(t) }}{%- endif -%}
      {%- do found.extend(t.windows) -%}
    {%- endfor -%}
    {%- if not found and not dbt_ivm._ivm_union_columns(parsed, block, name) -%}
      {{ return({'ok': false, 'why': name ~ ' is not a named column of every branch of ' ~ block.name ~
          ' (name each column; a * over an upstream brings columns unknown before the run)', 'windows': []}) }}
    {%- endif -%}
    {{ return({'ok': true, 'why': none, 'windows': found | unique | list}) }}
  {%- endif -%}
  {%- for item in block['items'] if item.name == name -%}
    {{ return(dbt_ivm._ivm_trace_expr(parsed, block, item.s, item.xe, windows)) }}
  {%- endfor -%}
  {%- set stars = block['items'] | selectattr('star') | list -%}
  {%- if stars | length == 1 -%}
    {{ return(dbt_ivm._ivm_trace_ref(parsed, block, none if stars[0].star == '*' else stars[0].star, name, windows)) }}
  {%- endif -%}
  {{ return({'ok': false, 'why': name ~ ' is not a named output column of ' ~ block.name, 'windows': []}) }}
{% endmacro %}

{% macro _ivm_trace_expr(parsed, block, s, e, windows) %}
  {%- set local = dbt_ivm._ivm_local_value(parsed, block, s, e) -%}
  {%- if local -%}{{ return({'ok': false, 'why': 'computed by ' ~ local, 'windows': []}) }}{%- endif -%}
  {%- set check = dbt_ivm._ivm_window_check(parsed, block, dbt_ivm._ivm_norm_text(parsed, s, e), windows) -%}
  {%- if check -%}{{ return({'ok': false, 'why': check, 'windows': []}) }}{%- endif -%}
  {%- set seen = [block.id] if block.id in windows else [] -%}
  {%- set merged = dbt_ivm._ivm_full_join_key(parsed, block, s, e) -%}
  {%- for ref in dbt_ivm._ivm_column_refs(parsed, s, e) -%}
    {%- set t = dbt_ivm._ivm_trace_source(parsed, block, ref.qual, ref.name, windows, merged) -%}
    {%- if not t.ok -%}{{ return(t) }}{%- endif -%}
    {%- do seen.extend(t.windows) -%}
  {%- endfor -%}
  {{ return({'ok': true, 'why': none, 'windows': seen | unique | list}) }}
{% endmacro %}

{#- A column reference that a block passes through (a star): the window check, then its source. -#}
{% macro _ivm_trace_ref(parsed, block, qual, name, windows) %}
  {%- set check = dbt_ivm._ivm_window_check(parsed, block, (qual ~ ' . ' if qual else '') ~ name, windows) -%}
  {%- if check -%}{{ return({'ok': false, 'why': check, 'windows': []}) }}{%- endif -%}
  {%- set t = dbt_ivm._ivm_trace_source(parsed, block, qual, name, windows) -%}
  {%- if t.ok and block.id in windows -%}{%- do t.update({'windows': t.windows + [block.id]}) -%}{%- endif -%}
  {{ return(t) }}
{% endmacro %}

{#- The FROM item of block that column [qual.]name comes from, checked: not NULL-supplying,
    and traced further into a CTE or derived table. -#}
{#- True when [s, e) is `coalesce(a.x, b.y)` over the two sides of a FULL join whose ON has
    a.x = b.y: every row has the key of the side it comes from, never a NULL extension. -#}
{% macro _ivm_full_join_key(parsed, block, s, e) %}
  {%- set items = block.from_items -%}
  {%- set text = dbt_ivm._ivm_norm_text(parsed, s, e) -%}
  {%- set m = modules.re.match('^coalesce \\( (\\S+ \\. \\S+) , (\\S+ \\. \\S+) \\)$', text) -%}
  {%- if not m or items | length != 2 or items[1].join != 'full' or items[1].on is none -%}{{ return(false) }}{%- endif -%}
  {%- set pairs = [m.group(1) ~ ' = ' ~ m.group(2), m.group(2) ~ ' = ' ~ m.group(1)] -%}
  {%- set quals = [m.group(1).split(' . ')[0], m.group(2).split(' . ')[0]] | sort -%}
  {%- if quals != [items[0].alias, items[1].alias] | sort -%}{{ return(false) }}{%- endif -%}
  {%- for c in dbt_ivm._ivm_conjuncts(parsed, items[1].on[0], items[1].on[1]) if dbt_ivm._ivm_norm_text(parsed, c[0], c[1]) in pairs -%}
    {{ return(true) }}
  {%- endfor -%}
  {{ return(false) }}
{% endmacro %}

{% macro _ivm_trace_source(parsed, block, qual, name, windows, merged=false) %}
  {%- set items = block.from_items -%}
  {%- set candidates = [] -%}
  {%- set semi = ('left semi', 'left anti', 'semi', 'anti') -%}
  {%- for i in range(items | length) if (qual is none or items[i].alias == qual) and items[i].join not in semi -%}
    {%- set child = dbt_ivm._ivm_child_block(parsed, items[i]) if items[i].kind != 'upstream' else none -%}
    {%- if child is none or qual is not none or name in dbt_ivm._ivm_output_names(parsed, child) or child['items'] | selectattr('star') | list -%}
      {%- do candidates.append(i) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set shown = (qual ~ '.' if qual else '') ~ name -%}
  {%- if candidates | length != 1 -%}
    {{ return({'ok': false, 'why': 'cannot tell which relation ' ~ shown ~ ' in ' ~ block.name ~
        ' comes from (qualify it with its relation alias)', 'windows': []}) }}
  {%- endif -%}
  {%- set j = candidates[0] -%}
  {%- if dbt_ivm._ivm_null_supplying(items, j) and not merged -%}
    {{ return({'ok': false, 'why': shown ~ ' comes from the NULL-supplying side of an outer join in ' ~ block.name, 'windows': []}) }}
  {%- endif -%}
  {%- set it = items[j] -%}
  {%- if it.kind == 'upstream' -%}{{ return({'ok': true, 'why': none, 'windows': []}) }}{%- endif -%}
  {%- set child = dbt_ivm._ivm_child_block(parsed, it) -%}
  {{ return(dbt_ivm._ivm_trace_output(parsed, child, name, windows)) }}
{% endmacro %}

{#- True when item j of a FROM list (joined left to right) may be NULL-extended. -#}
{% macro _ivm_null_supplying(items, j) %}
  {%- for k in range(1, items | length) -%}
    {%- set join = items[k].join -%}
    {%- if (join == 'left' and k == j) or (join == 'right' and j < k) or (join == 'full' and j <= k) -%}{{ return(true) }}{%- endif -%}
  {%- endfor -%}
  {{ return(false) }}
{% endmacro %}

{#- Why expression [s, e) of block is not a row-level value, or '' : an aggregate call, a
    window function, or a column that a CTE or derived table computes so. -#}
{% macro _ivm_local_value(parsed, block, s, e) %}
  {%- set toks = parsed.tk.tokens -%}
  {%- set sig = parsed.tk.significant -%}
  {%- for call in parsed.get('aggregates', []) if call.pos >= s and call.pos < e -%}
    {{ return('the aggregate ' ~ call.name ~ '()') }}
  {%- endfor -%}
  {%- for p in range(s, e) if toks[sig[p]].word == 'over' -%}{{ return('a window function') }}{%- endfor -%}
  {%- for ref in dbt_ivm._ivm_column_refs(parsed, s, e) -%}
    {%- set why = dbt_ivm._ivm_value_column(parsed, block, ref.qual, ref.name) -%}
    {%- if why -%}{{ return(why) }}{%- endif -%}
  {%- endfor -%}
  {{ return('') }}
{% endmacro %}

{#- Why column [qual.]name of block holds a computed value (aggregate or window result in
    a CTE or derived table it may come from), or ''. -#}
{% macro _ivm_value_column(parsed, block, qual, name) %}
  {%- for it in block.from_items if it.kind in ('cte', 'derived') and (qual is none or it.alias == qual) -%}
    {%- set child = dbt_ivm._ivm_child_block(parsed, it) -%}
    {%- set named = child['items'] | selectattr('name', 'equalto', name) | list -%}
    {%- if child.get('union') -%}
      {%- for pair in dbt_ivm._ivm_union_columns(parsed, child, name) or [] -%}
        {%- set t = dbt_ivm._ivm_trace_output(parsed, pair.block, pair.name, {}) -%}
        {%- if not t.ok -%}{{ return(t.why ~ ' in ' ~ pair.block.name) }}{%- endif -%}
      {%- endfor -%}
    {%- elif named -%}
      {%- set why = dbt_ivm._ivm_local_value(parsed, child, named[0].s, named[0].xe) -%}
      {%- if why -%}{{ return(why ~ ' in ' ~ child.name) }}{%- endif -%}
    {%- else -%}
      {%- for star in child['items'] | selectattr('star') -%}
        {%- set why = dbt_ivm._ivm_value_column(parsed, child, none if star.star == '*' else star.star, name) -%}
        {%- if why -%}{{ return(why) }}{%- endif -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return('') }}
{% endmacro %}

{#- Column references in [s, e): [{'qual', 'name'}] (a qualifier of more than one part keeps its last). -#}
{% macro _ivm_column_refs(parsed, s, e) %}
  {%- set toks = parsed.tk.tokens -%}
  {%- set sig = parsed.tk.significant -%}
  {%- set n = sig | length -%}
  {%- set refs = [] -%}
  {%- for p in range(s, e) -%}
    {%- set t = toks[sig[p]] -%}
    {%- set next = toks[sig[p + 1]].text if p + 1 < n else '' -%}
    {%- set prev = toks[sig[p - 1]].text if p > 0 else '' -%}
    {%- set is_name = t.kind == 'qid' or (t.kind == 'word' and t.word and t.word not in dbt_ivm._ivm_non_column_words()) -%}
    {%- if is_name and next not in ('(', '.') and (p + 1 >= n or toks[sig[p + 1]].kind != 'str') -%}
      {%- set qual = toks[sig[p - 2]].lower if prev == '.' and p >= 2 else none -%}
      {%- do refs.append({'qual': qual, 'name': t.lower}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(refs) }}
{% endmacro %}

{#- The window functions whose OVER belongs to block: [{'p', 'partition': [normalized
    PARTITION BY expressions] or none (no PARTITION BY, or a named window)}]. -#}
{% macro _ivm_windows_in(parsed, block) %}
  {%- set toks = parsed.tk.tokens -%}
  {%- set sig = parsed.tk.significant -%}
  {%- set wins = [] -%}
  {%- for p in range(block.s, block.e) if toks[sig[p]].word == 'over' and dbt_ivm._ivm_block_at(parsed, p).id == block.id -%}
    {%- set w = {'p': p, 'partition': none} -%}
    {%- if toks[sig[p + 1]].text == '(' and toks[sig[p + 2]].word == 'partition' and toks[sig[p + 3]].word == 'by' -%}
      {%- set close = dbt_ivm._ivm_match_paren(parsed.tk, p + 1) -%}
      {%- set depth = toks[sig[p + 2]].depth -%}
      {%- set parts = [] -%}
      {%- set cur = namespace(s=p + 4, done=false) -%}
      {%- for q in range(p + 4, close + 1) if not cur.done -%}
        {%- set t = toks[sig[q]] -%}
        {%- set ends = q == close or (t.depth == depth and t.word in ('order', 'rows', 'range')) -%}
        {%- if ends or (t.depth == depth and t.text == ',') -%}
          {%- do parts.append(dbt_ivm._ivm_norm_text(parsed, cur.s, q)) -%}
          {%- set cur.s = q + 1 -%}
          {%- if ends -%}{%- set cur.done = true -%}{%- endif -%}
        {%- endif -%}
      {%- endfor -%}
      {%- do w.update({'partition': parts}) -%}
    {%- endif -%}
    {%- do wins.append(w) -%}
  {%- endfor -%}
  {{ return(wins) }}
{% endmacro %}

{#- '' when the expression (normalized text) is a PARTITION BY expression of every window
    function of block; else why not. A bare column matches its qualified form. -#}
{% macro _ivm_window_check(parsed, block, text, windows) %}
  {%- for w in windows.get(block.id, []) -%}
    {%- set ns = namespace(hit=false) -%}
    {%- for part in w.partition if part == text or part.split(' . ')[-1] == text or text.split(' . ')[-1] == part -%}
      {%- set ns.hit = true -%}
    {%- endfor -%}
    {%- if not ns.hit -%}
      {{ return(text.replace(' . ', '.') ~ ' is not a PARTITION BY column of the window function at ' ~ dbt_ivm._ivm_position(parsed.tk, w.p)) }}
    {%- endif -%}
  {%- endfor -%}
  {{ return('') }}
{% endmacro %}

{#- True when a block below block (through its CTEs and derived tables) has a window function. -#}
{% macro _ivm_window_below(parsed, block, windows) %}
  {{ return(dbt_ivm._ivm_windows_under(parsed, block, windows) | reject('equalto', block.id) | list | length > 0) }}
{% endmacro %}

{#- Ids of the blocks at or below block (through its CTEs, derived tables and UNION branches)
    that have a window function. -#}
{% macro _ivm_windows_under(parsed, block, windows) %}
  {%- set ids = [block.id] if block.id in windows else [] -%}
  {%- for it in block.from_items if it.kind in ('cte', 'derived') -%}
    {%- do ids.extend(dbt_ivm._ivm_windows_under(parsed, dbt_ivm._ivm_child_block(parsed, it), windows)) -%}
  {%- endfor -%}
  {%- for name in block.get('union') or [] -%}
    {%- do ids.extend(dbt_ivm._ivm_windows_under(parsed, dbt_ivm._ivm_block_named(parsed, name), windows)) -%}
  {%- endfor -%}
  {{ return(ids | unique | list) }}
{% endmacro %}

{#- Index of the FROM item of block that column ref names (by its qualifier, or the only
    item), or none. -#}
{% macro _ivm_ref_item(block, ref) %}
  {%- set items = block.from_items -%}
  {%- for i in range(items | length) if (ref.qual is not none and items[i].alias == ref.qual) or (ref.qual is none and items | length == 1) -%}
    {{ return(i) }}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}

{#- True when column ref of block is window-safe: it has one value on all rows of any window
    partition below it. Its FROM item has no window function at or below it, or the column
    is a PARTITION BY column of every one of them. For a key term (holding: the blocks on
    the way of its occurrence) only the windows its changed rows pass through count: the
    rows of any other window are real rows of the upstreams, whose columns hold. -#}
{% macro _ivm_window_safe(parsed, block, ref, windows, holding=none) %}
  {%- set i = dbt_ivm._ivm_ref_item(block, ref) -%}
  {%- if i is none -%}{{ return(false) }}{%- endif -%}
  {%- if block.from_items[i].kind not in ('cte', 'derived') -%}{{ return(true) }}{%- endif -%}
  {%- set child = dbt_ivm._ivm_child_block(parsed, block.from_items[i]) -%}
  {%- set under = dbt_ivm._ivm_windows_under(parsed, child, windows) -%}
  {%- if holding is not none -%}
    {%- set under = parsed.blocks | selectattr('id', 'in', under) | selectattr('name', 'in', holding) | map(attribute='id') | list -%}
  {%- endif -%}
  {%- if not under -%}{{ return(true) }}{%- endif -%}
  {%- set t = dbt_ivm._ivm_trace_output(parsed, child, ref.name, windows) -%}
  {{ return(t.ok and under | reject('in', t.windows) | list | length == 0) }}
{% endmacro %}

{#- True when every column of [s, e) in block is window-safe (for a key term: holding). -#}
{% macro _ivm_window_safe_range(parsed, block, s, e, windows, holding=none) %}
  {%- for ref in dbt_ivm._ivm_column_refs(parsed, s, e) if not dbt_ivm._ivm_window_safe(parsed, block, ref, windows, holding) -%}
    {{ return(false) }}
  {%- endfor -%}
  {{ return(true) }}
{% endmacro %}

{#- Pairs of FROM items of block that an equality conjunct (in an ON or the WHERE) of two
    window-safe columns joins: the joins a key term keeps above a window function's rows. -#}
{% macro _ivm_link_pairs(parsed, block, windows) %}
  {%- set items = block.from_items -%}
  {%- set ranges = [] -%}
  {%- for it in items if it.on is not none and not it.using -%}{%- do ranges.append(it.on) -%}{%- endfor -%}
  {%- if block.get('where_range') -%}{%- do ranges.append(block.where_range) -%}{%- endif -%}
  {%- set pairs = [] -%}
  {%- for r in ranges -%}{%- for c in dbt_ivm._ivm_conjuncts(parsed, r[0], r[1]) -%}
    {%- set at = [] -%}
    {%- for ref in dbt_ivm._ivm_equality_sides(parsed, c) or [] if ref.qual is not none and dbt_ivm._ivm_window_safe(parsed, block, ref, windows) -%}
      {%- do at.append(dbt_ivm._ivm_ref_item(block, ref)) -%}
    {%- endfor -%}
    {%- if at | length == 2 and at[0] != at[1] -%}{%- do pairs.append(at) -%}{%- endif -%}
  {%- endfor -%}{%- endfor -%}
  {{ return(pairs) }}
{% endmacro %}

{#- Indexes of the FROM items of block that its link pairs do not join to its first item,
    and of those joined by USING (a condition a key term keeps whole, unchecked): none when
    a key term that drops the other conditions above a window function has no cross join
    and keeps only window-safe ones. -#}
{% macro _ivm_unlinked_items(parsed, block, windows) %}
  {%- set pairs = dbt_ivm._ivm_link_pairs(parsed, block, windows) -%}
  {%- set reached = [0] -%}
  {%- for _ in block.from_items -%}{%- for p in pairs -%}
    {%- if p[0] in reached and p[1] not in reached -%}{%- do reached.append(p[1]) -%}{%- endif -%}
    {%- if p[1] in reached and p[0] not in reached -%}{%- do reached.append(p[0]) -%}{%- endif -%}
  {%- endfor -%}{%- endfor -%}
  {%- set out = range(block.from_items | length) | reject('in', reached) | list -%}
  {%- for i in range(block.from_items | length) if block.from_items[i].using and i not in out -%}{%- do out.append(i) -%}{%- endfor -%}
  {{ return(out | sort) }}
{% endmacro %}

{#- True when every way from window block b up to the main query meets a join of its rows
    (which _ivm_keyed_rules requires linked, _ivm_unlinked_items) through FROM items only: the
    rows of a partition then reach the keys of their partners together. -#}
{% macro _ivm_window_spread(parsed, b, windows, depth=0) %}
  {%- if b.kind == 'main' or depth > parsed.blocks | length -%}{{ return(false) }}{%- endif -%}
  {%- set ns = namespace(readers=0) -%}
  {%- for pb in parsed.blocks -%}
    {%- if (pb.get('subqueries') or []) | selectattr('name', 'equalto', b.name) | list or b.name in (pb.get('union') or []) -%}
      {{ return(false) }}
    {%- endif -%}
    {%- for i in range(pb.from_items | length) if pb.from_items[i].kind in ('cte', 'derived') and pb.from_items[i].name == b.name -%}
      {%- set ns.readers = ns.readers + 1 -%}
      {%- if pb.from_items | length < 2 and not dbt_ivm._ivm_window_spread(parsed, pb, windows, depth + 1) -%}
        {{ return(false) }}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(ns.readers > 0) }}
{% endmacro %}

{#- Top-level AND-conjuncts of [s, e) as [s, e) ranges (one conjunct when an OR is at the top). -#}
{% macro _ivm_conjuncts(parsed, s, e) %}
  {%- set toks = parsed.tk.tokens -%}
  {%- set sig = parsed.tk.significant -%}
  {%- if s >= e -%}{{ return([]) }}{%- endif -%}
  {%- set d = toks[sig[s]].depth -%}
  {%- set bounds = [s] -%}
  {%- set ns = namespace(between=false, has_or=false) -%}
  {%- for p in range(s, e) if toks[sig[p]].depth == d -%}
    {%- set w = toks[sig[p]].word -%}
    {%- if w == 'between' -%}{%- set ns.between = true -%}{%- endif -%}
    {%- if w == 'or' -%}{%- set ns.has_or = true -%}{%- endif -%}
    {%- if w == 'and' -%}
      {%- if ns.between -%}{%- set ns.between = false -%}{%- else -%}{%- do bounds.append(p) -%}{%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if ns.has_or -%}{{ return([[s, e]]) }}{%- endif -%}
  {%- do bounds.append(e) -%}
  {%- set out = [] -%}
  {%- for i in range(bounds | length - 1) -%}
    {%- do out.append([bounds[i] + (0 if i == 0 else 1), bounds[i + 1]]) -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{#- Drop from condition [s, e) of block what a key term may not keep: each conjunct over an
    aggregate or window value becomes `true`, and so does, above a window function's rows,
    each subquery conjunct and each conjunct over a column that is not window-safe for the
    term (_ivm_window_safe; below: block reads a window function's rows).
    A subquery conjunct stays, its NOT removed when it holds the occurrence (in holding).
    Adds the replacements to subs; returns how many conjuncts stay. -#}
{% macro _ivm_condition_subs(parsed, block, s, e, windows, subs, holding, below) %}
  {%- set ns = namespace(kept=0) -%}
  {%- for c in dbt_ivm._ivm_conjuncts(parsed, s, e) -%}
    {%- set sq = (block.get('subqueries') or []) | selectattr('s', 'equalto', c[0]) | list -%}
    {%- if (below and (sq or not dbt_ivm._ivm_window_safe_range(parsed, block, c[0], c[1], windows, holding)))
          or (not sq and dbt_ivm._ivm_local_value(parsed, block, c[0], c[1])) -%}
      {%- do subs.update({c[0]: {'end': c[1], 'text': 'true '}}) -%}
    {%- else -%}
      {%- set ns.kept = ns.kept + 1 -%}
      {%- if sq and sq[0].neg is not none and sq[0].name in holding -%}
        {%- do subs.update({sq[0].neg: {'end': sq[0].neg + 1, 'text': ''}}) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(ns.kept) }}
{% endmacro %}

{#- The ways upstream occurrence parsed.rels[ri] reaches the main query: [{'holder': {block
    id: index of the FROM item holding it, or none (a subquery or UNION branch)}, 'reads':
    {CTE name: position of the read on this way}}]. A CTE read twice gives two ways. -#}
{% macro _ivm_holder_paths(parsed, ri) %}
  {%- set r = parsed.rels[ri] -%}
  {%- set first = parsed.blocks[r.block] -%}
  {%- set start = namespace(item=none) -%}
  {%- for i in range(first.from_items | length) if first.from_items[i].kind == 'upstream' and first.from_items[i].name_s == r.s -%}
    {%- set start.item = i -%}
  {%- endfor -%}
  {%- set open = [{'holder': {first.id: start.item}, 'reads': {}, 'top': first}] -%}
  {%- set done = [] -%}
  {%- for _ in range(parsed.blocks | length * 4) if open -%}
    {%- set path = open.pop() -%}
    {%- set b = path.top -%}
    {%- if b.kind == 'main' -%}{%- do done.append(path) -%}{%- continue -%}{%- endif -%}
    {%- for pb in parsed.blocks -%}
      {%- set ups = [] -%}
      {%- for i in range(pb.from_items | length) if pb.from_items[i].kind in ('cte', 'derived') and pb.from_items[i].name == b.name -%}
        {%- do ups.append({'item': i, 'read': pb.from_items[i].get('name_s')}) -%}
      {%- endfor -%}
      {%- if (pb.get('subqueries') or []) | selectattr('name', 'equalto', b.name) | list or b.name in (pb.get('union') or []) -%}
        {%- do ups.append({'item': none, 'read': none}) -%}
      {%- endif -%}
      {%- for u in ups if pb.id not in path.holder -%}
        {%- set holder = {} -%}{%- do holder.update(path.holder) -%}{%- do holder.update({pb.id: u.item}) -%}
        {%- set reads = {} -%}{%- do reads.update(path.reads) -%}
        {%- if b.kind == 'cte' -%}{%- do reads.update({b.name: u.read}) -%}{%- endif -%}
        {%- do open.append({'holder': holder, 'reads': reads, 'top': pb}) -%}
      {%- endfor -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(done) }}
{% endmacro %}

{#- The key term of upstream occurrence parsed.rels[ri] along one of its ways to the main
    query (_ivm_holder_paths): {'sql': `select distinct <key> from (...)` with that
    occurrence as the placeholder __IVM_DELTA__ and every other as __IVM_REL_<upstream>__
    (see the header of this file), 'no_path': why its changed rows reach every key (an
    aggregate without GROUP BY, or a join to them without a kept equality), or none}.
    A CTE on the way that is also read elsewhere is read there as its twin
    __ivm_full_<name>: the CTE without the change (CTEs below it on the way get twins too). -#}
{% macro _ivm_key_term(parsed, ri, key, windows, path) %}
  {%- set sig = parsed.tk.significant -%}
  {%- set r = parsed.rels[ri] -%}
  {%- set holder = path.holder -%}
  {%- set holding = [] -%}
  {%- for b in parsed.blocks if b.id in holder -%}{%- do holding.append(b.name) -%}{%- endfor -%}
  {%- set base = {} -%}
  {%- do dbt_ivm._ivm_term_subs(parsed, windows, {}, [], base) -%}
  {%- set subs = {} -%}
  {%- set why = dbt_ivm._ivm_term_subs(parsed, windows, holder, holding, subs) -%}
  {%- for q in parsed.rels -%}
    {%- set alias = '' if q.alias_given else ' ' ~ dbt_ivm._ivm_quote(q.alias) -%}
    {%- set text = '__IVM_DELTA__' if loop.index0 == ri else dbt_ivm._ivm_placeholder(q.upstream) -%}
    {%- do subs.update({q.s: {'end': q.e, 'text': text ~ alias}}) -%}
    {%- do base.update({q.s: {'end': q.e, 'text': dbt_ivm._ivm_placeholder(q.upstream) ~ alias}}) -%}
  {%- endfor -%}
  {#- twins: the CTEs of the way, innermost first, up to the outermost one read twice -#}
  {%- set way = [] -%}
  {%- for b in parsed.blocks if b.id in holder and b.kind == 'cte' -%}{%- do way.append(b) -%}{%- endfor -%}
  {%- set way = way | sort(attribute='s') -%}
  {%- set last = namespace(s=-1) -%}
  {%- for b in way if parsed.cte_reads.get(b.name, []) | length > 1 -%}{%- set last.s = b.s -%}{%- endfor -%}
  {%- set twins = way | selectattr('s', 'le', last.s) | list -%}
  {%- for d in twins -%}
    {%- set twin_subs = {} -%}
    {%- do twin_subs.update(base) -%}
    {%- for e in twins -%}{%- for p in parsed.cte_reads.get(e.name, []) if d.s <= p and p < d.e -%}
      {%- do twin_subs.update({p: {'end': p + 1, 'text': dbt_ivm._ivm_twin_read(parsed, e.name, p)}}) -%}
    {%- endfor -%}{%- endfor -%}
    {%- set at = parsed.ctes[d.name] -%}
    {%- do subs.update({at: {'end': at + 1, 'text': dbt_ivm._ivm_quote('__ivm_full_' ~ d.name) ~ ' as (' ~
        dbt_ivm._ivm_range_text(parsed, d.s, d.e, twin_subs) ~ '), ' ~ parsed.tk.tokens[sig[at]].text}}) -%}
    {%- for p in parsed.cte_reads.get(d.name, []) if p != path.reads.get(d.name) -%}
      {%- do subs.update({p: {'end': p + 1, 'text': dbt_ivm._ivm_twin_read(parsed, d.name, p)}}) -%}
    {%- endfor -%}
  {%- endfor -%}
  {#- branches of a UNION holding the occurrence that do not hold it add no row of theirs -#}
  {%- set tail = namespace(text='') -%}
  {%- for b in parsed.blocks if b.get('union') and b.id in holder -%}
    {%- for name in b.union if name not in holding -%}
      {%- set branch = dbt_ivm._ivm_block_named(parsed, name) -%}
      {%- do subs.update({branch.s: {'end': branch.s + 1, 'text': 'select * from (select'}}) -%}
      {%- if branch.e < sig | length -%}
        {%- do subs.update({branch.e: {'end': branch.e + 1, 'text': ') __ivm_nb where false ' ~ parsed.tk.tokens[sig[branch.e]].text}}) -%}
      {%- else -%}
        {%- set tail.text = ') __ivm_nb where false' -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- set non_null = dbt_ivm._ivm_key_from_occurrence(parsed, key, holder, subs) -%}
  {%- set body = dbt_ivm._ivm_range_text(parsed, 0, sig | length, subs) ~ tail.text -%}
  {%- set where = [] -%}
  {%- for name in non_null -%}{%- do where.append(dbt_ivm._ivm_quote(name) ~ ' is not null') -%}{%- endfor -%}
  {{ return({'sql': 'select distinct ' ~ dbt_ivm._ivm_quote_all(key) | join(', ') ~ ' from (\n' ~ body ~ '\n) __ivm_kt'
             ~ (' where ' ~ where | join(' and ') if where else ''), 'no_path': why}) }}
{% endmacro %}

{#- A key term's key read from the changed occurrence's own FROM item: in the first block on
    its way down from the main query (through columns passed on by name or star) where a key
    column comes from another item, each such column that a kept equality of their join
    equates with a column of the occurrence's item is read from that column (and grouped
    by it, when the block groups by the column written out or by its ordinal), and the
    occurrence's join keeps its rows (a right join), so Spark drops the partner the key no
    longer reads (a DISTINCT over one side of an outer join). Term rows where the equality
    holds keep their values; the others only add keys. All key columns or none (a partner
    still read gains nothing). Adds the edits to subs; returns the key names read so, those
    through NULL-safe equalities left out (a NULL key from them is a real one; from the
    others it comes only from rows without a partner, which the caller filters). -#}
{% macro _ivm_key_from_occurrence(parsed, key, holder, subs) %}
  {%- set at = namespace(block=parsed.blocks[0], names=key, j=none, cols=[], found=false) -%}
  {%- for _ in parsed.blocks -%}
    {%- set b = at.block -%}
    {%- set j = holder.get(b.id) -%}
    {%- if j is none or not b.ok or b.get('union') or (j > 0 and b.from_items[j].join not in ('inner', 'left', 'right', 'full')) -%}
      {{ return([]) }}
    {%- endif -%}
    {%- set cols = [] -%}
    {%- for name in at.names -%}
      {%- set named = b['items'] | selectattr('name', 'equalto', name) | list -%}
      {%- set ref = dbt_ivm._ivm_output_ref(parsed, b, name) -%}
      {%- set i = dbt_ivm._ivm_ref_item(b, ref) if ref else none -%}
      {%- if i is none -%}{{ return([]) }}{%- endif -%}
      {%- do cols.append({'item': named[0] if named else none, 'ref': ref, 'i': i}) -%}
    {%- endfor -%}
    {%- if cols | rejectattr('i', 'equalto', j) | list -%}
      {%- set at.j, at.cols, at.found = j, cols, true -%}{%- break -%}
    {%- endif -%}
    {#- every key column comes from the occurrence's item: follow them into it (through a
        GROUP BY too: a key column is one of its expressions) -#}
    {%- set child = dbt_ivm._ivm_child_block(parsed, b.from_items[j]) if b.from_items[j].kind in ('cte', 'derived') else none -%}
    {%- if child is none or child.id not in holder -%}{{ return([]) }}{%- endif -%}
    {%- set at.names = cols | map(attribute='ref') | map(attribute='name') | list -%}
    {%- set at.block = child -%}
  {%- endfor -%}
  {%- set b, j, cols = at.block, at.j, at.cols -%}
  {%- set groups = dbt_ivm._ivm_group_ranges(parsed, b) if b.get('group_range') else {'ranges': [], 'refused': none} -%}
  {%- if not at.found or groups.refused is not none or (not b.get('group_range') and dbt_ivm._ivm_block_aggregates(parsed, b)) -%}
    {{ return([]) }}
  {%- endif -%}
  {%- set edits = {} -%}
  {%- set non_null = [] -%}
  {%- for n in range(cols | length) if cols[n].i != j -%}
    {%- set col = cols[n] -%}
    {%- set it = b.from_items[[col.i, j] | max] -%}
    {%- set found = namespace(side=none) -%}
    {#- the key's item is never NULL-supplying on the join that equates it -#}
    {%- if col.item and it.join in (['inner', 'right'] if col.i > j else ['inner', 'left']) and it.on is not none and not it.using -%}
      {%- for c in dbt_ivm._ivm_conjuncts(parsed, it.on[0], it.on[1]) if c[0] not in subs -%}
        {%- set sides = dbt_ivm._ivm_equality_sides(parsed, c) or [] -%}
        {%- for k in range(sides | length) if sides[k].qual == col.ref.qual and sides[k].name == col.ref.name
              and dbt_ivm._ivm_ref_item(b, sides[1 - k]) == j -%}
          {%- set found.side = sides[1 - k] -%}
        {%- endfor -%}
      {%- endfor -%}
    {%- endif -%}
    {%- if found.side is none -%}{{ return([]) }}{%- endif -%}
    {%- set alias = '' if col.item.xe < col.item.e else ' as ' ~ dbt_ivm._ivm_quote(col.item.name) -%}
    {%- set text = dbt_ivm._ivm_range_text(parsed, found.side.span[0], found.side.span[1]) -%}
    {%- do edits.update({col.item.s: {'end': col.item.xe, 'text': text ~ alias}}) -%}
    {#- a GROUP BY groups by the same column, written out (an ordinal follows the item) -#}
    {%- if b.get('group_range') -%}
      {%- set same = [] -%}
      {%- set expr = dbt_ivm._ivm_norm_text(parsed, col.item.s, col.item.xe) -%}
      {%- for g in groups.ranges if dbt_ivm._ivm_norm_text(parsed, g[0], g[1]) == expr -%}
        {%- do same.append(g) -%}
        {%- if g[0] != col.item.s -%}{%- do edits.update({g[0]: {'end': g[1], 'text': text}}) -%}{%- endif -%}
      {%- endfor -%}
      {%- if not same -%}{{ return([]) }}{%- endif -%}
    {%- endif -%}
    {%- if not found.side.null_safe -%}{%- do non_null.append(key[n]) -%}{%- endif -%}
  {%- endfor -%}
  {%- if j > 0 and b.from_items[j].join in ('inner', 'left') -%}
    {%- do edits.update({b.from_items[j].join_pos: {'end': b.from_items[j].pos, 'text': 'right join '}}) -%}
  {%- endif -%}
  {%- do subs.update(edits) -%}
  {{ return(non_null) }}
{% endmacro %}

{#- A read of CTE `name` at position p turned into a read of its twin (same alias). -#}
{% macro _ivm_twin_read(parsed, name, p) %}
  {%- set ns = namespace(alias=dbt_ivm._ivm_quote(name)) -%}
  {%- for b in parsed.blocks -%}{%- for it in b.from_items if it.get('name_s') == p and it.alias_given -%}
    {%- set ns.alias = '' -%}
  {%- endfor -%}{%- endfor -%}
  {{ return(dbt_ivm._ivm_quote('__ivm_full_' ~ name) ~ (' ' ~ ns.alias if ns.alias else '')) }}
{% endmacro %}

{#- The edits of a key term that depend on where the occurrence is (holder, holding: see
    _ivm_key_term; empty for a read without the change): outer and anti joins turned,
    conditions cut to what a term may keep, HAVING and QUALIFY dropped. Adds them to subs;
    returns why the occurrence has no key path, or none. -#}
{% macro _ivm_term_subs(parsed, windows, holder, holding, subs) %}
  {%- set path = {'why': none} -%}
  {%- for b in parsed.blocks if b.ok -%}
    {%- set j = holder.get(b.id) -%}
    {#- above a window function _ivm_keyed_rules has checked the joins (_ivm_unlinked_items) -#}
    {%- set below = dbt_ivm._ivm_window_below(parsed, b, windows) -%}
    {%- set global_aggregate = b.id != 0 and not b.get('group_range') and dbt_ivm._ivm_block_aggregates(parsed, b) -%}
    {%- if b.id in holder and global_aggregate -%}
      {%- do path.update({'why': b.name ~ ' aggregates it without GROUP BY, so every key can change'}) -%}
    {%- endif -%}
    {%- for k in range(1, b.from_items | length) -%}
      {%- set it = b.from_items[k] -%}
      {%- set join = none -%}
      {%- set on = none -%}
      {%- if j is not none -%}
        {%- if (it.join == 'left' and k == j) or (it.join == 'right' and j < k) -%}{%- set join = 'inner join ' -%}
        {%- elif it.join == 'full' and k == j -%}{%- set join = 'right join ' -%}
        {%- elif it.join == 'full' and j < k -%}{%- set join = 'left join ' -%}
        {%- elif it.join in ('left anti', 'anti') and k == j -%}{%- set join = 'left semi join ' -%}
        {%- elif it.join in ('left anti', 'anti') and j < k -%}{%- set on = 'false' -%}
        {#- an inner join keeps the occurrence's rows even without a partner (more rows, more
            keys, still all the right ones): Spark then drops a join whose columns the key
            does not need (a lineitem joined only for an aggregate's values is never read) -#}
        {%- elif it.join == 'inner' and k == j -%}{%- set join = 'right join ' -%}
        {%- elif it.join == 'inner' and j < k -%}{%- set join = 'left join ' -%}
        {%- endif -%}
      {%- endif -%}
      {%- if join -%}{%- do subs.update({it.join_pos: {'end': it.pos, 'text': join}}) -%}{%- endif -%}
      {%- if it.on is not none and not it.using and on -%}
        {%- do subs.update({it.on[0]: {'end': it.on[1], 'text': on ~ ' '}}) -%}
      {%- elif it.on is not none and not it.using -%}
        {%- set kept = dbt_ivm._ivm_condition_subs(parsed, b, it.on[0], it.on[1], windows, subs, holding, below) -%}
        {%- if k == j and not kept and not below -%}
          {%- do path.update({'why': 'joined in ' ~ b.name ~ ' without a row-level condition, so every key can change'}) -%}
        {%- endif -%}
      {%- endif -%}
    {%- endfor -%}
    {%- if b.get('where_range') -%}
      {%- do dbt_ivm._ivm_condition_subs(parsed, b, b.where_range[0], b.where_range[1], windows, subs, holding, below) -%}
    {%- endif -%}
    {%- for sq in b.get('subqueries') or [] if sq.kw == 'exists' and sq.name in holding -%}
      {%- if not dbt_ivm._ivm_correlated(parsed, dbt_ivm._ivm_block_named(parsed, sq.name)) -%}
        {%- do path.update({'why': 'an EXISTS subquery in ' ~ b.name ~ ' reads it without a correlated equality, so every key can change'}) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- for kw in ['having', 'qualify'] if b.get(kw ~ '_range') -%}
      {%- do subs.update({b[kw ~ '_range'][0] - 1: {'end': b[kw ~ '_range'][1], 'text': ''}}) -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(path.why) }}
{% endmacro %}

{% macro _ivm_block_named(parsed, name) %}
  {%- for b in parsed.blocks if b.name == name -%}{{ return(b) }}{%- endfor -%}
  {{ return(none) }}
{% endmacro %}

{#- True when a subquery's WHERE has a conjunct `x = y` naming a relation of an enclosing block. -#}
{% macro _ivm_correlated(parsed, block) %}
  {%- set own = block.from_items | map(attribute='alias') | list -%}
  {%- set toks = parsed.tk.tokens -%}
  {%- set sig = parsed.tk.significant -%}
  {%- set rng = block.get('where_range') or [0, 0] -%}
  {%- for c in dbt_ivm._ivm_conjuncts(parsed, rng[0], rng[1]) -%}
    {%- set eq = namespace(found=false) -%}
    {%- for p in range(c[0], c[1]) if toks[sig[p]].text in ('=', '==', '<=>') -%}{%- set eq.found = true -%}{%- endfor -%}
    {%- for ref in dbt_ivm._ivm_column_refs(parsed, c[0], c[1]) if eq.found and ref.qual is not none and ref.qual not in own -%}
      {{ return(true) }}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(false) }}
{% endmacro %}

{#- True when block's own select list or HAVING calls an aggregate. -#}
{% macro _ivm_block_aggregates(parsed, block) %}
  {%- for call in parsed.get('aggregates', []) if dbt_ivm._ivm_block_at(parsed, call.pos).id == block.id -%}
    {%- if dbt_ivm._ivm_window_call(parsed, call) is none -%}{{ return(true) }}{%- endif -%}
  {%- endfor -%}
  {{ return(false) }}
{% endmacro %}

{#- The OVER position when an aggregate call is a window function, else none. -#}
{% macro _ivm_window_call(parsed, call) %}
  {%- set sig = parsed.tk.significant -%}
  {%- if call.end < sig | length and parsed.tk.tokens[sig[call.end]].word == 'over' -%}{{ return(call.end) }}{%- endif -%}
  {{ return(none) }}
{% endmacro %}

{#- Where the recompute of the affected slices can prune its reads: {rel index: [[upstream
    column, key column]]} for the upstream occurrences whose every row that reaches a view
    row has that column equal to the row's key column: through plain column projections,
    equality conjuncts of ON / WHERE, GROUP BY columns, UNION branches and the correlation
    equalities of WHERE subqueries. Reading only those rows whose column is an affected key
    gives the affected slices exactly (rows of other slices are cut by the key afterwards). -#}
{% macro _ivm_key_points(parsed, key, windows) %}
  {%- set points = {} -%}
  {%- set main = parsed.blocks[0] -%}
  {%- for name in key -%}
    {%- set refs = [] -%}
    {%- for item in main['items'] if item.name == name -%}
      {%- set ref = dbt_ivm._ivm_plain_ref(parsed, item.s, item.xe) -%}
      {%- if ref -%}{%- do refs.append(ref) -%}{%- endif -%}
    {%- endfor -%}
    {%- if not refs and main['items'] | selectattr('star') | list | length == 1 -%}
      {%- set star = (main['items'] | selectattr('star') | first).star -%}
      {%- do refs.append({'qual': none if star == '*' else star, 'name': name}) -%}
    {%- endif -%}
    {%- for ref in refs -%}
      {%- do dbt_ivm._ivm_equivalent_columns(parsed, main, ref, name, points, [], [], windows) -%}
    {%- endfor -%}
  {%- endfor -%}
  {#- an occurrence reached several ways (a CTE read twice) is pruned only by the columns
      equal to the key on every way -#}
  {%- set pruned = {} -%}
  {%- for ri, by_way in points.items() -%}
    {%- set ways = [] -%}
    {%- for path in dbt_ivm._ivm_holder_paths(parsed, ri) -%}{%- do ways.append(path.reads.values() | sort | join(',')) -%}{%- endfor -%}
    {%- set common = namespace(pairs=none) -%}
    {%- for way in ways -%}
      {%- set here = by_way.get(way, []) -%}
      {%- set common.pairs = here if common.pairs is none else common.pairs | select('in', here) | list -%}
    {%- endfor -%}
    {%- if common.pairs -%}{%- do pruned.update({ri: common.pairs | unique(attribute='1') | list}) -%}{%- endif -%}
  {%- endfor -%}
  {{ return(pruned) }}
{% endmacro %}

{#- The column reference that block's output column `name` reads: its named item's, when
    that is a plain column, or the one star's column of that name; else none. -#}
{% macro _ivm_output_ref(parsed, block, name) %}
  {%- set named = block['items'] | selectattr('name', 'equalto', name) | list -%}
  {%- set stars = block['items'] | selectattr('star') | list -%}
  {%- if named -%}{{ return(dbt_ivm._ivm_plain_ref(parsed, named[0].s, named[0].xe)) }}{%- endif -%}
  {%- if stars | length == 1 -%}{{ return({'qual': none if stars[0].star == '*' else stars[0].star, 'name': name}) }}{%- endif -%}
  {{ return(none) }}
{% endmacro %}

{#- The column reference that [s, e) is, or none. -#}
{% macro _ivm_plain_ref(parsed, s, e) %}
  {%- set toks = parsed.tk.tokens -%}
  {%- set sig = parsed.tk.significant -%}
  {%- set refs = dbt_ivm._ivm_column_refs(parsed, s, e) -%}
  {%- set width = e - s -%}
  {%- if refs | length == 1 and (width == 1 or (width == 3 and toks[sig[s + 1]].text == '.')) -%}{{ return(refs[0]) }}{%- endif -%}
  {{ return(none) }}
{% endmacro %}

{#- Add to points the upstream columns equal to column ref (of block) in every row. -#}
{% macro _ivm_equivalent_columns(parsed, block, ref, key_name, points, seen, via, windows) %}
  {%- set sig_key = block.id ~ ':' ~ (ref.qual or '') ~ '.' ~ ref.name ~ ':' ~ via | sort | join(',') -%}
  {%- if sig_key in seen -%}{{ return(none) }}{%- endif -%}
  {%- do seen.append(sig_key) -%}
  {%- set items = block.from_items -%}
  {%- set found = dbt_ivm._ivm_ref_item(block, ref) -%}
  {%- for i in ([found] if found is not none else []) -%}
    {%- set it = items[i] -%}
    {%- if it.kind == 'upstream' -%}
      {%- for ri in range(parsed.rels | length) if parsed.rels[ri].s == it.name_s -%}
        {%- do points.setdefault(ri, {}).setdefault(via | sort | join(','), []).append([ref.name, key_name]) -%}
      {%- endfor -%}
    {#- into a window function's rows only by a PARTITION BY column: a filter on another
        column would change the window's values -#}
    {%- elif it.kind in ('cte', 'derived') and dbt_ivm._ivm_window_safe(parsed, block, ref, windows) -%}
      {%- set child = dbt_ivm._ivm_child_block(parsed, it) -%}
      {%- set branches = [] -%}
      {%- if child.get('union') -%}
        {%- for pair in dbt_ivm._ivm_union_columns(parsed, child, ref.name) or [] -%}{%- do branches.append(pair) -%}{%- endfor -%}
      {%- else -%}
        {%- do branches.append({'block': child, 'name': ref.name}) -%}
      {%- endif -%}
      {%- for pair in branches -%}
        {%- set inner = dbt_ivm._ivm_output_ref(parsed, pair.block, pair.name) -%}
        {%- set deeper = via + ([it.name_s] if it.kind == 'cte' else []) -%}
        {%- if inner -%}{%- do dbt_ivm._ivm_equivalent_columns(parsed, pair.block, inner, key_name, points, seen, deeper, windows) -%}{%- endif -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}
  {#- columns equal to it by an equality conjunct of this block (or a subquery's correlation) -#}
  {%- set conditions = [] -%}
  {%- for it in items if it.on is not none and not it.using -%}{%- do conditions.append([block, it.on]) -%}{%- endfor -%}
  {%- if block.get('where_range') -%}{%- do conditions.append([block, block.where_range]) -%}{%- endif -%}
  {%- for sq in block.get('subqueries') or [] if sq.kw == 'exists' -%}
    {%- set sub = dbt_ivm._ivm_block_named(parsed, sq.name) -%}
    {%- if sub.get('where_range') -%}{%- do conditions.append([sub, sub.where_range]) -%}{%- endif -%}
  {%- endfor -%}
  {%- for pair in conditions -%}
    {%- for c in dbt_ivm._ivm_conjuncts(parsed, pair[1][0], pair[1][1]) -%}
      {%- set other = dbt_ivm._ivm_equality_partner(parsed, c, ref) -%}
      {%- if other -%}{%- do dbt_ivm._ivm_equivalent_columns(parsed, pair[0], other, key_name, points, seen, via, windows) -%}{%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
{% endmacro %}

{#- For conjunct c = [s, e) of the form `a = b` (two column references): [a, b], else none.
    Each side also carries its token range ('span') and whether the equality is NULL-safe. -#}
{% macro _ivm_equality_sides(parsed, c) %}
  {%- set toks = parsed.tk.tokens -%}
  {%- set sig = parsed.tk.significant -%}
  {%- set eqs = [] -%}
  {%- for p in range(c[0], c[1]) if toks[sig[p]].text in ('=', '==', '<=>') and toks[sig[p]].depth == toks[sig[c[0]]].depth -%}
    {%- do eqs.append(p) -%}
  {%- endfor -%}
  {%- if eqs | length != 1 -%}{{ return(none) }}{%- endif -%}
  {%- set left = dbt_ivm._ivm_plain_ref(parsed, c[0], eqs[0]) -%}
  {%- set right = dbt_ivm._ivm_plain_ref(parsed, eqs[0] + 1, c[1]) -%}
  {%- if not (left and right) -%}{{ return(none) }}{%- endif -%}
  {%- set null_safe = toks[sig[eqs[0]]].text == '<=>' -%}
  {%- do left.update({'span': [c[0], eqs[0]], 'null_safe': null_safe}) -%}
  {%- do right.update({'span': [eqs[0] + 1, c[1]], 'null_safe': null_safe}) -%}
  {{ return([left, right]) }}
{% endmacro %}

{#- For conjunct c = [s, e) of the form `a = b` (two column references) with one side
    ref: the other side; else none. -#}
{% macro _ivm_equality_partner(parsed, c, ref) %}
  {%- set sides = dbt_ivm._ivm_equality_sides(parsed, c) -%}
  {%- if not sides or ref.qual is none -%}{{ return(none) }}{%- endif -%}
  {%- set left, right = sides -%}
  {%- if left.qual == ref.qual and left.name == ref.name -%}{{ return(right if right.qual else none) }}{%- endif -%}
  {%- if right.qual == ref.qual and right.name == ref.name -%}{{ return(left if left.qual else none) }}{%- endif -%}
  {{ return(none) }}
{% endmacro %}

{#- The definition with the reads of the key points pruned to the affected keys: each such
    upstream occurrence read through a semi join with __IVM_KEYS__ (the affected keys),
    every upstream as __IVM_REL_<upstream>__. -#}
{% macro _ivm_pruned_definition(parsed, points) %}
  {%- set subs = {} -%}
  {%- for q in parsed.rels -%}
    {%- set ri = loop.index0 -%}
    {%- set alias = ' ' ~ dbt_ivm._ivm_quote(q.alias) if not q.alias_given else '' -%}
    {%- set rel = dbt_ivm._ivm_placeholder(q.upstream) -%}
    {%- if points.get(ri) -%}
      {%- set on = [] -%}
      {%- for pair in points[ri] -%}
        {%- do on.append('__ivm_u.' ~ dbt_ivm._ivm_quote(pair[0]) ~ ' <=> __ivm_k.' ~ dbt_ivm._ivm_quote(pair[1])) -%}
      {%- endfor -%}
      {%- set rel = '(select __ivm_u.* from ' ~ rel ~ ' __ivm_u left semi join __IVM_KEYS__ __ivm_k on ' ~ on | join(' and ') ~ ')' -%}
    {%- endif -%}
    {%- do subs.update({q.s: {'end': q.e, 'text': rel ~ alias}}) -%}
  {%- endfor -%}
  {{ return(dbt_ivm._ivm_range_text(parsed, 0, parsed.tk.significant | length, subs)) }}
{% endmacro %}
