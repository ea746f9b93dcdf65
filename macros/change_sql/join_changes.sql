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
    change set as a relation in FROM), has_new, broadcast, ranges (see
    _ivm_key_range_literals), ids (see _ivm_changed_id_literals), id_types, by_ids,
    change_bound, inline_lists (see _ivm_key_listing), lists_ids (the change counts list its
    changed row keys), row_columns (see _ivm_listable_row_columns), loose_join (see
    _ivm_join_edges)}. -#}
{% macro ivm_join_insert_sql(template, plan, edges=[]) %}
  {{ return(adapter.dispatch('ivm_join_insert_sql', 'dbt_ivm')(template, plan, edges)) }}
{% endmacro %}

{% macro default__ivm_join_insert_sql(template, plan, edges=[]) %}
  {%- set terms = [] -%}
  {%- for term in dbt_ivm._ivm_join_change_terms(template, plan, edges) -%}
    {%- do terms.append('select * from (\n' ~ term ~ '\n) __ivm_term_' ~ loop.index0) -%}
  {%- endfor -%}
  {{ return(terms | join('\nunion all\n')) }}
{% endmacro %}

{#- The query evaluated on the changed slices, as disjoint terms (one per changed
    upstream i with new images): term i reads upstream i restricted to the new images of
    its changed keys, every changed upstream before i without its changed keys, and every
    other upstream at the new version; their union is the rows to insert of a join-only
    view. -#}
{% macro _ivm_join_change_terms(template, plan, edges=[]) %}
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
    {%- do terms.append(dbt_ivm._ivm_fill_relations(template, dbt_ivm._ivm_reduced_relations(edges, relations, p, plan))) -%}
  {%- endfor -%}
  {{ return(terms) }}
{% endmacro %}

{#- The change of an aggregate's input as signed terms, one per changed upstream i with
    images: upstream i as its new images (__ivm_sign 1) and old images (__ivm_sign -1),
    changed upstreams before i at the new version, changed upstreams after i at the old
    version, unchanged upstreams whole (all with __ivm_sign 1), in the order of their
    indexes but for the query's last upstream (in its text), which comes last. The terms
    telescope in any order: their signed sum is (query at the new versions) - (query at
    the old versions), so the new and the old side of upstream i share one evaluation.
    The terms of the changed upstreams other than the query's last one (`signed`: the
    upstreams whose sign the delta template outputs) are one term when they are at least
    two, each small (p.broadcast) and the joins cut the others to them (edges): every other
    upstream is the same relation in each of them, so it is read once, cut to the rows any
    of them joins (the fact table a query joins its dimensions to, read once for all their
    changes). Their own relations are unions over the terms, each term's rows tagged by the
    magnitude of __ivm_sign (the term's position + 1); _ivm_signed_term_sql keeps the rows
    whose tags agree, a filter on grouped columns that Spark moves into the joins. Returns
    [{sql, tagged: the upstreams whose sign carries a tag}]. -#}
{% macro _ivm_signed_change_terms(template, plan, edges=[], signed={}) %}
  {%- set changing = [] -%}
  {%- for p in plan if p.changed and (p.has_new or p.old > 0) -%}{%- do changing.append(p) -%}{%- endfor -%}
  {#- the query's last upstream (in its text) comes last in the telescoping order, so every
      other term reads it at the stored version -#}
  {%- set ns = namespace(pos=-1, last=none) -%}
  {%- for q in plan -%}
    {%- set pos = template.find(dbt_ivm._ivm_placeholder(q.index)) -%}
    {%- if pos > ns.pos -%}{%- set ns.pos = pos -%}{%- set ns.last = q.index -%}{%- endif -%}
  {%- endfor -%}
  {%- set last = ns.last -%}
  {%- set order = plan | map(attribute='index') | reject('equalto', last) | sort | list + ([last] if last is not none else []) -%}
  {%- set others = changing | rejectattr('index', 'equalto', last) | list -%}
  {%- set ns.fold = edges and others | length >= 2 -%}
  {%- for p in others if not (p.get('broadcast') and p.index in signed) -%}{%- set ns.fold = false -%}{%- endfor -%}
  {%- set terms = [] -%}
  {%- set parts = [] -%}
  {%- for p in changing -%}
    {%- set relations = {} -%}
    {%- for q in plan -%}{%- do relations.update({q.index: dbt_ivm._ivm_term_relation(p, q, order)}) -%}{%- endfor -%}
    {%- if ns.fold and p.index != last -%}
      {%- set cuts = {} -%}
      {%- do parts.append({'cut': dbt_ivm._ivm_reduced_relations(edges, relations, p, plan, cuts), 'cuts': cuts}) -%}
    {%- else -%}
      {%- do terms.append({'sql': dbt_ivm._ivm_fill_relations(template, dbt_ivm._ivm_reduced_relations(edges, relations, p, plan)),
                           'tagged': []}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if parts -%}
    {%- set tagged = others | map(attribute='index') | list -%}
    {%- set relations = {} -%}
    {%- for q in plan -%}
      {%- if q.index in tagged -%}
        {%- set cols = dbt_ivm._ivm_quote_all(q.columns | map(attribute='name')) | join(', ') -%}
        {%- set branches = [] -%}
        {%- for part in parts -%}
          {%- do branches.append('select ' ~ cols ~ ', __ivm_sign * ' ~ loop.index ~ ' as __ivm_sign from ' ~ part.cut[q.index] ~ ' __ivm_x') -%}
        {%- endfor -%}
        {%- do relations.update({q.index: '(' ~ branches | join(' union all ') ~ ')'}) -%}
      {%- else -%}
        {#- the same relation in every folded term (unchanged, or the last upstream at its
            stored version), cut to the rows some term joins when every term cuts it -#}
        {%- set cuts = [] -%}
        {%- for part in parts if q.index in part.cuts -%}{%- do cuts.append('(' ~ part.cuts[q.index] ~ ')') -%}{%- endfor -%}
        {%- set whole = dbt_ivm._ivm_term_relation(others[0], q, order) -%}
        {%- do relations.update({q.index: '(select * from ' ~ whole ~ ' __ivm_r where ' ~ cuts | join(' or ') ~ ')'
            if cuts | length == parts | length else whole}) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- do terms.insert(0, {'sql': dbt_ivm._ivm_fill_relations(template, relations), 'tagged': tagged}) -%}
  {%- endif -%}
  {{ return(terms) }}
{% endmacro %}

{#- Upstream q as the signed term of changed upstream p reads it: p's signed images; a
    changed upstream later in the telescoping order at its stored version; any other at
    its new version (unchanged ones are the same at both). -#}
{% macro _ivm_term_relation(p, q, order) %}
  {%- if q is sameas p -%}
    {{ return(dbt_ivm._ivm_broadcast(p, dbt_ivm._ivm_signed_images_sql(p))) }}
  {%- elif q.changed and order.index(q.index) > order.index(p.index) -%}
    {{ return('(select *, 1 as __ivm_sign from ' ~ dbt_ivm._ivm_old_version_sql(q) ~ ' __ivm_r)') }}
  {%- endif -%}
  {{ return('(select *, 1 as __ivm_sign from ' ~ dbt_ivm.ivm_snapshot_sql(q.up, q.columns, q.to) ~ ' __ivm_r)') }}
{% endmacro %}

{#- The images of a changed upstream with __ivm_sign: its new images 1, its old images -1.
    Both from a change set come from one read of it (each row yields its new image, its old
    image or both): every copy of the netted change set in a statement costs its own
    planning and scan, and the key filters of the other upstreams repeat this relation. -#}
{% macro _ivm_signed_images_sql(p) %}
  {%- if p.up.kind == 'change_log' and p.has_new and p.old > 0 -%}
    {%- set new = [] -%}
    {%- set old = [] -%}
    {%- for name in p.columns | map(attribute='name') -%}
      {%- set key = dbt_ivm._ivm_string_literal(name) ~ ', ' -%}
      {%- do new.append(key ~ '__ivm_c.' ~ dbt_ivm._ivm_quote(name)) -%}
      {%- do old.append(key ~ '__ivm_c.__ivm_before.' ~ dbt_ivm._ivm_quote(name)) -%}
    {%- endfor -%}
    {{ return('(select inline(filter(array(if(__ivm_c.__ivm_new, named_struct(' ~ new | join(', ')
        ~ ", '__ivm_sign', 1), null), if(__ivm_c.__ivm_old, named_struct(" ~ old | join(', ')
        ~ ", '__ivm_sign', -1), null)), __ivm_x -> __ivm_x is not null)) from " ~ p.change_view ~ ' __ivm_c)') }}
  {%- endif -%}
  {%- set halves = [] -%}
  {%- if p.has_new -%}{%- do halves.append('select *, 1 as __ivm_sign from ' ~ dbt_ivm._ivm_new_images_sql(p) ~ ' __ivm_n') -%}{%- endif -%}
  {%- if p.old > 0 -%}{%- do halves.append('select *, -1 as __ivm_sign from ' ~ dbt_ivm._ivm_old_images_sql(p) ~ ' __ivm_o') -%}{%- endif -%}
  {{ return('(' ~ halves | join(' union all ') ~ ')') }}
{% endmacro %}

{#- Old images of the changed keys of an upstream (rows it had at the stored version). -#}
{% macro _ivm_old_images_sql(p) %}
  {%- set cols = dbt_ivm._ivm_quote_all(p.columns | map(attribute='name')) | join(', ') -%}
  {{ return('(select ' ~ cols ~ ' from (select __ivm_before.* from ' ~ p.change_view ~ ' where __ivm_old) __ivm_b)') }}
{% endmacro %}

{#- A changed upstream as it was at the stored version. A Delta table is read there by time
    travel: one scan, where the new version without the changed keys plus their old images
    reads the change set twice more (the feed check before the refresh covers that version
    too: retention, recreation, schema). -#}
{% macro _ivm_old_version_sql(p) %}
  {%- set time_travel = p.up.get('feed') == 'delta' and p['from'] is not none -%}
  {%- if p.up.kind == 'change_log' and not time_travel -%}
    {{ return('(select * from ' ~ dbt_ivm._ivm_unchanged_rows_sql(p) ~ ' __ivm_u union all select * from ' ~
        dbt_ivm._ivm_old_images_sql(p) ~ ' __ivm_o)') }}
  {%- endif -%}
  {{ return(dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p['from'])) }}
{% endmacro %}

{#- Rows of a changed upstream at its new version that belong to its changed slice: its
    new images, or its rows in its key box (p.box, see _ivm_delta_key_boxes). -#}
{% macro _ivm_new_images_sql(p) %}
  {%- set cols = dbt_ivm._ivm_quote_all(p.columns | map(attribute='name')) | join(', ') -%}
  {%- if p.get('box') -%}
    {{ return('(select ' ~ cols ~ ' from ' ~ dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p.to) ~ ' __ivm_s where '
        ~ dbt_ivm._ivm_listed_ids_flag(p, dbt_ivm._ivm_quote_all(p.up.unique_key) | list) ~ ')') }}
  {%- elif p.up.kind == 'change_log' -%}
    {{ return('(select ' ~ cols ~ ' from ' ~ p.change_view ~ ' where __ivm_new)') }}
  {%- endif -%}
  {{ return('(select ' ~ cols ~ ' from ' ~ p.up.relation ~ ' where ' ~ dbt_ivm._ivm_watermark_window(p) ~ ')') }}
{% endmacro %}

{#- Rows of a changed upstream at its new version outside its changed slice: by literals
    when its changed keys are listed (p.ids) or boxed (p.box), else by an anti join with its
    change set. -#}
{% macro _ivm_unchanged_rows_sql(p) %}
  {%- if p.up.kind == 'change_log' and p.get('ids') is not none -%}
    {%- set flag = dbt_ivm._ivm_listed_ids_flag(p, dbt_ivm._ivm_quote_all(p.up.unique_key) | list) -%}
    {{ return('(select * from ' ~ dbt_ivm.ivm_snapshot_sql(p.up, p.columns, p.to) ~ ' __ivm_s where not coalesce(' ~ flag ~ ', false))') }}
  {%- elif p.up.kind == 'change_log' -%}
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
    duplicated), 'flag': a boolean that is true exactly for those rows}. Changed keys the
    change counts listed (p.ids) need no join: an IN list of literals. Upstreams whose
    changes are insert-only have no rows in the view to delete (DEL is skipped), unless a
    repair re-applies a refresh that may have inserted them already. -#}
{% macro _ivm_join_delete_predicates(plan, alias, repair) %}
  {%- set joins = [] -%}
  {%- set flags = [] -%}
  {%- for p in plan if p.changed and (repair or p.get('old', 0) > 0) -%}
    {%- if p.up.kind == 'change_log' and p.get('ids') is not none -%}
      {%- set names = [] -%}
      {%- for h in p.up.hidden -%}{%- do names.append(alias ~ '.' ~ h.name) -%}{%- endfor -%}
      {%- do flags.append(dbt_ivm._ivm_listed_ids_flag(p, names)) -%}
    {%- elif p.up.kind == 'change_log' -%}
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

{#- Whether the row key `names` (its columns, in unique_key order) is one of p's listed
    changed keys (p.ids): an IN list of literals, a tuple per key when the key has several
    columns; in its key box (p.box, see _ivm_delta_key_boxes) when it has one, an IN list
    per column. NULL when a column is NULL, which no listed key has. -#}
{% macro _ivm_listed_ids_flag(p, names) %}
  {%- if not p.ids -%}{{ return('false') }}{%- endif -%}
  {%- if p.get('box') -%}
    {%- set lists = [] -%}
    {%- for values in p.box -%}{%- do lists.append(names[loop.index0] ~ ' in (' ~ values | join(', ') ~ ')') -%}{%- endfor -%}
    {{ return('(' ~ lists | join(' and ') ~ ')') }}
  {%- endif -%}
  {%- set tuples = [] -%}
  {%- for t in p.ids -%}{%- do tuples.append(t[0] if t | length == 1 else '(' ~ t | join(', ') ~ ')') -%}{%- endfor -%}
  {%- set lhs = names[0] if names | length == 1 else '(' ~ names | join(', ') ~ ')' -%}
  {{ return(lhs ~ ' in (' ~ tuples | join(', ') ~ ')') }}
{% endmacro %}

{#- The types of columns `names` (of `columns`, in that order) when each has a text form that
    casts back to the same value (see _ivm_range_kind), else none: only such values are
    listed as literals. A changed upstream's row key columns get theirs as p.id_types
    (_ivm_key_listing); the keyed path's affected keys theirs from the table. -#}
{% macro _ivm_listable_types(columns, names) %}
  {%- set types = [] -%}
  {%- for name in names -%}
    {%- set found = [] -%}
    {%- for c in columns if c.name | lower == name | lower -%}{%- do found.append(c.data_type | lower) -%}{%- endfor -%}
    {%- if not found or not dbt_ivm._ivm_range_kind(found[0]) -%}{{ return(none) }}{%- endif -%}
    {%- do types.append(found[0]) -%}
  {%- endfor -%}
  {{ return(types or none) }}
{% endmacro %}

{#- SQL the change counts read p's changed row keys with (_ivm_key_texts_sql over its change
    set); a NULL string when they are not listable (p.id_types is none). inline: an
    aggregate of the counting pass over the change set (p.inline_lists, see
    _ivm_key_listing), else a subquery that reads it again. -#}
{% macro _ivm_changed_ids_sql(p, inline=false) %}
  {%- if p.get('id_types') is none -%}{{ return('cast(null as string)') }}{%- endif -%}
  {{ return(dbt_ivm._ivm_key_texts_sql(dbt_ivm._ivm_quote_all(p.up.unique_key) | list, p.change_view, inline)) }}
{% endmacro %}

{#- SQL of a JSON array of the distinct keys (the quoted columns `keys`) of relation, the text
    of their columns in an array per key, at most _ivm_key_list_max() + 1 of them: a scalar
    subquery, or inline an aggregate over the rows of the query it is in (under its gate
    when it is one, see _ivm_change_gate). -#}
{% macro _ivm_key_texts_sql(keys, relation, inline=false) %}
  {%- set texts = [] -%}
  {%- for k in keys -%}{%- do texts.append('cast(' ~ k ~ ' as string)') -%}{%- endfor -%}
  {%- set limit = dbt_ivm._ivm_key_list_max() + 1 -%}
  {%- if inline -%}
    {{ return(dbt_ivm._ivm_gated_aggregate('to_json(slice(collect_set({}), 1, ' ~ limit ~ '))', 'array(' ~ texts | join(', ') ~ ')', inline)) }}
  {%- endif -%}
  {{ return('(select to_json(collect_list(array(' ~ texts | join(', ') ~ '))) from (select distinct ' ~ keys | join(', ')
      ~ ' from ' ~ relation ~ ' __ivm_i limit ' ~ limit ~ ') __ivm_d)') }}
{% endmacro %}

{#- p.ids from the counted text: a list per changed row key of literals of its columns' types
    (p.id_types), or none when there are more than _ivm_key_list_max() keys or one has a NULL column (which
    only a null-safe match finds). -#}
{% macro _ivm_changed_id_literals(text, p) %}
  {%- set types = p.get('id_types') -%}
  {%- set listed = fromjson(text) if text is not none else none -%}
  {%- if types is none or listed is none or listed | length > dbt_ivm._ivm_key_list_max() -%}{{ return(none) }}{%- endif -%}
  {%- for key in listed if none in key -%}{{ return(none) }}{%- endfor -%}
  {{ return(dbt_ivm._ivm_key_literals(listed | sort, types)) }}
{% endmacro %}

{#- Keys read back as text (a list of their columns' text per key, NULL as none) as lists
    of literals of the columns' types. -#}
{% macro _ivm_key_literals(listed, types) %}
  {%- set columns = [] -%}
  {%- for values in zip(*listed) -%}{%- do columns.append(dbt_ivm._ivm_typed_literals(values, types[loop.index0])) -%}{%- endfor -%}
  {{ return(zip(*columns) | map('list') | list) }}
{% endmacro %}

{#- The equalities the query joins upstreams on: [{'a', 'ca', 'b', 'cb'}] (upstream indexes
    and column names), one per top-level conjunct `x.c = y.d` of an ON condition (or of the
    WHERE clause of a block with comma joins) whose two sides are columns of two upstreams
    read in that block. Null-safe equalities (<=>) are left out: they join NULL keys, which
    an IN filter drops. `loose`, when given, receives the upstreams some other condition
    relates to another item of their block (a theta or compound condition, USING, a derived
    table, an unqualified column): they are not leaves of the join graph the edges draw. -#}
{% macro _ivm_join_edges(parsed, loose=none) %}
  {%- set toks = parsed.tk.tokens -%}
  {%- set sig = parsed.tk.significant -%}
  {%- set edges = [] -%}
  {%- for b in parsed.blocks -%}
    {%- set aliases = {} -%}
    {%- set items = [] -%}
    {%- for it in b.from_items -%}
      {%- do items.append(it.alias) -%}
      {%- if it.kind == 'upstream' -%}{%- do aliases.update({it.alias: it.upstream}) -%}{%- endif -%}
    {%- endfor -%}
    {%- set ranges = [] -%}
    {%- for it in b.from_items if it.on is not none and not it.using -%}{%- do ranges.append([it.on, true]) -%}{%- endfor -%}
    {#- a WHERE equality joins only in a block with comma joins; elsewhere it may filter an outer join -#}
    {%- set comma = b.from_items | selectattr('join', 'equalto', 'comma') | list | length > 0 -%}
    {%- if b.get('where_range') and (comma or loose is not none) -%}{%- do ranges.append([b.where_range, comma]) -%}{%- endif -%}
    {%- if loose is not none and b.from_items | selectattr('using') | list -%}
      {%- do loose.extend(aliases.values() | list) -%}
    {%- endif -%}
    {%- for r, joining in ranges -%}
      {%- for c in dbt_ivm._ivm_conjuncts(parsed, r[0], r[1]) -%}
        {%- set t = [] -%}
        {%- for q in range(c[0], c[1]) -%}{%- do t.append(toks[sig[q]]) -%}{%- endfor -%}
        {%- set columns = t | length == 7 and t[0].kind in ('word', 'qid') and t[2].kind in ('word', 'qid')
            and t[4].kind in ('word', 'qid') and t[6].kind in ('word', 'qid') and t[1].text == '.' and t[5].text == '.'
            and t[3].text in ('=', '==') -%}
        {%- if columns and t[0].lower in aliases and t[4].lower in aliases and aliases[t[0].lower] != aliases[t[4].lower]
              and joining -%}
          {%- do edges.append({'a': aliases[t[0].lower], 'ca': t[2].lower, 'b': aliases[t[4].lower], 'cb': t[6].lower}) -%}
        {%- elif loose is not none -%}
          {%- do loose.extend(dbt_ivm._ivm_related_upstreams(parsed, c[0], c[1], items, aliases)) -%}
        {%- endif -%}
      {%- endfor -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(edges) }}
{% endmacro %}

{#- The upstreams that the condition [s, e) (significant tokens) relates to a second item of
    its block: none when it names at most one item. items: the block's item aliases;
    aliases: those of its upstreams, to their indexes. A qualified column counts its item;
    an unqualified one could be any item's, so beside a column of another item it counts
    them all. -#}
{% macro _ivm_related_upstreams(parsed, s, e, items, aliases) %}
  {%- set refs = dbt_ivm._ivm_column_refs(parsed, s, e) -%}
  {%- set named = refs | selectattr('qual') | map(attribute='qual') | select('in', items) | unique | list -%}
  {%- set bare = refs | rejectattr('qual') | map(attribute='name') | unique | list -%}
  {%- set related = [] -%}
  {%- if named | length > 1 or (bare and named | length + bare | length > 1) -%}
    {%- for a in (items if bare else named) if a in aliases -%}{%- do related.append(aliases[a]) -%}{%- endfor -%}
  {%- endif -%}
  {{ return(related) }}
{% endmacro %}

{#- The relations of a join term with the upstreams it joins to the changed one cut to the
    rows that can join it (semi-join reduction): following the join equalities from the
    changed upstream p, each upstream reached gets `(its keys) in (select the partner's keys
    from the partner, itself reduced)`. Only when p's change is small (p.broadcast): Spark
    then joins the cut relations by broadcast instead of shuffling them whole, and a
    relation joined before the changed one in the query no longer meets the others in full.
    The upstreams one equality away from p are also cut to p's key ranges (p.ranges, see
    _ivm_range_columns): literals, which skip data that the IN filter only drops after reading.
    A leaf of the join graph (an upstream joined to one other only, by equalities: not a
    loose_join upstream of the plan, see _ivm_join_edges) whose partner is bounded
    gets no IN subquery: joining it to the broadcast partner streams it once, as the cut
    would, without reading the partner again. Bounded: p, and an upstream cut by lists of
    literals on every column of its row key (plan: the upstreams, for their row keys), which
    holds at most that many rows and is then broadcast.
    `cuts`, when given, receives each cut upstream's predicate (on its relation's columns). -#}
{% macro _ivm_reduced_relations(edges, relations, p, plan, cuts=none) %}
  {%- if not p.get('broadcast') or not edges -%}{{ return(relations) }}{%- endif -%}
  {%- set out = {} -%}
  {%- do out.update(relations) -%}
  {%- set reached = [p.index] -%}
  {%- set bounded = [p.index] -%}
  {%- set hinted = [p.index] -%}
  {%- set neighbours = {} -%}
  {%- for e in edges -%}
    {%- for x, y in [(e.a, e.b), (e.b, e.a)] if y not in neighbours.get(x, []) -%}
      {%- do neighbours.update({x: neighbours.get(x, []) + [y]}) -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- set row_keys = {} -%}
  {%- for q in plan -%}{%- do row_keys.update({q.index: (q.get('up') or {}).get('unique_key') or []}) -%}{%- endfor -%}
  {%- set loose = plan | selectattr('loose_join') | map(attribute='index') | list -%}
  {#- breadth first: each round cuts the upstreams one equality away from those cut before -#}
  {%- set frontier = namespace(items=[p.index]) -%}
  {%- for _ in relations if frontier.items -%}
    {%- set next = [] -%}
    {%- for a in frontier.items -%}
      {%- set partners = {} -%}
      {%- for e in edges -%}
        {%- for x, cx, y, cy in [(e.a, e.ca, e.b, e.cb), (e.b, e.cb, e.a, e.ca)] if x == a and y not in reached and y in out -%}
          {%- do partners.setdefault(y, {'mine': [], 'theirs': []}) -%}
          {%- do partners[y].mine.append(cy) -%}
          {%- do partners[y].theirs.append(cx) -%}
        {%- endfor -%}
      {%- endfor -%}
      {%- for y, cols in partners | dictsort -%}
        {%- set ranged = [] -%}
        {%- set lists = [] -%}
        {%- set listed = [] -%}
        {%- for cy in cols.mine if a == p.index -%}
          {%- set r = (p.get('ranges') or {}).get(cols.theirs[loop.index0]) -%}
          {%- if r and (y ~ '.' ~ cy) in r.partners -%}
            {%- do ranged.append(dbt_ivm._ivm_quote(cy) ~ ' between ' ~ r.lo ~ ' and ' ~ r.hi) -%}
            {%- if r.get('keys') is not none -%}
              {%- do lists.append(dbt_ivm._ivm_quote(cy) ~ ' in (' ~ r['keys'] | join(', ') ~ ')' if r['keys'] else 'false') -%}
              {%- do listed.append(cy | lower) -%}
            {%- endif -%}
          {%- endif -%}
        {%- endfor -%}
        {#- every column listed: the lists replace the IN subquery (a superset of its rows when
            they are several columns, which the join itself then matches) -#}
        {%- set conditions = [] -%}
        {%- if lists and lists | length == cols.mine | length -%}
          {%- do conditions.append(lists | join(' and ')) -%}
          {%- set key = row_keys[y] | map('lower') | list -%}
          {%- if key and key | reject('in', listed) | list | length == 0 -%}{%- do bounded.append(y) -%}{%- endif -%}
        {%- elif neighbours[y] == [a] and a in bounded and y not in loose -%}
          {%- if a not in hinted -%}
            {%- do out.update({a: '(select /*+ BROADCAST */ * from ' ~ out[a] ~ ' __ivm_b)'}) -%}
            {%- do hinted.append(a) -%}
          {%- endif -%}
        {%- else -%}
          {%- do conditions.append('(' ~ dbt_ivm._ivm_quote_all(cols.mine) | join(', ') ~ ') in (select '
              ~ dbt_ivm._ivm_quote_all(cols.theirs) | join(', ') ~ ' from ' ~ out[a] ~ ' __ivm_p)') -%}
        {%- endif -%}
        {%- set cut = (conditions + ranged) | join(' and ') -%}
        {%- if cut -%}
          {%- do out.update({y: '(select * from ' ~ out[y] ~ ' __ivm_r where ' ~ cut ~ ')'}) -%}
          {%- if cuts is not none -%}{%- do cuts.update({y: cut}) -%}{%- endif -%}
        {%- endif -%}
        {%- do reached.append(y) -%}
        {%- do next.append(y) -%}
      {%- endfor -%}
    {%- endfor -%}
    {%- set frontier.items = next -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{#- Key ranges: an IN filter skips nothing when it reads, a range of literals does (parquet
    row groups and Delta files by their min/max statistics), so a refresh whose changed keys
    are few or clustered (new keys of appended facts) reads only that part of the upstreams
    they join. For each column of the changed upstream p that an equality joins to another
    upstream's column of the same kind, the change counts also read the least and greatest
    value among p's changed images. Kinds: integers and decimals, dates, strings of binary
    collation, whose text form casts back to the same value and whose order agrees with the
    equality. Returns {column (lower case): {name, type, partners: ['<index>.<column>']}}. -#}
{% macro _ivm_range_columns(p, plan, edges) %}
  {%- set columns = {} -%}
  {%- for q in plan -%}
    {%- for c in q.columns -%}{%- do columns.update({q.index ~ '.' ~ c.name | lower: c}) -%}{%- endfor -%}
  {%- endfor -%}
  {%- set out = {} -%}
  {%- for e in edges -%}
    {%- for x, cx, y, cy in [(e.a, e.ca, e.b, e.cb), (e.b, e.cb, e.a, e.ca)] if x == p.index -%}
      {%- set mine = columns.get(x ~ '.' ~ cx) -%}
      {%- set theirs = columns.get(y ~ '.' ~ cy) -%}
      {%- set kind = dbt_ivm._ivm_range_kind(mine.data_type) if mine is not none else none -%}
      {%- if kind and theirs is not none and kind == dbt_ivm._ivm_range_kind(theirs.data_type) -%}
        {%- do out.setdefault(cx, {'name': mine.name, 'type': mine.data_type | lower, 'partners': []}) -%}
        {%- do out[cx].partners.append(y ~ '.' ~ cy) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{#- SQL literals of type dtype from the values' text forms: integers and dates as typed
    literals (5L, DATE'2024-01-31'), strings as string literals, anything else cast from its
    text; NULL as a typed NULL. Spark parses a list of ten thousand typed literals about
    three times faster than the same casts. A list of plain integers or dates is checked by
    one match of its lines and written by one join: a hundred thousand keys cost a
    fraction of a second, where a loop over them costs seconds. -#}
{% macro _ivm_typed_literals(values, dtype) %}
  {%- set t = (dtype or '') | lower | trim -%}
  {%- set suffix = dbt_ivm._ivm_integer_suffixes().get(t) -%}
  {#- a plain value's pattern, and what its typed literal writes before and after it -#}
  {%- set plain, head, tail = ('-?[0-9]+', '', suffix) if suffix is not none
      else (('[0-9]{4}-[0-9]{2}-[0-9]{2}', "date'", "'") if t == 'date' else (none, '', '')) -%}
  {%- if plain and none not in values and modules.re.fullmatch('(?:' ~ plain ~ ')(?:\n(?:' ~ plain ~ '))*', values | join('\n')) -%}
    {%- set out = (head ~ values | join(tail ~ '\n' ~ head) ~ tail).split('\n') -%}
    {#- a value holding a line break is no plain value: then the lines outnumber the values -#}
    {%- if out | length == values | length -%}{{ return(out) }}{%- endif -%}
  {%- endif -%}
  {%- set out = [] -%}
  {%- for value in values -%}
    {%- if value is none -%}
      {%- do out.append('cast(null as ' ~ t ~ ')') -%}
    {%- elif plain and modules.re.fullmatch(plain, value | string) -%}
      {%- do out.append(head ~ value ~ tail) -%}
    {%- elif t == 'string' -%}
      {%- do out.append(dbt_ivm._ivm_string_literal(value)) -%}
    {%- else -%}
      {%- do out.append('cast(' ~ dbt_ivm._ivm_string_literal(value) ~ ' as ' ~ t ~ ')') -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{#- Spark's integer types and the suffix of their typed literals (5Y, 5S, 5, 5L). -#}
{% macro _ivm_integer_suffixes() %}
  {{ return({'tinyint': 'Y', 'smallint': 'S', 'int': '', 'bigint': 'L'}) }}
{% endmacro %}

{% macro _ivm_range_kind(dtype) %}
  {%- set t = (dtype or '') | lower | trim -%}
  {%- if t in dbt_ivm._ivm_integer_suffixes() or modules.re.fullmatch('decimal[(][0-9]+, ?[0-9]+[)]', t) -%}
    {{ return('number') }}
  {%- endif -%}
  {{ return(t if t in ('date', 'string') else none) }}
{% endmacro %}

{#- The map the change counts read p's key ranges into ('min:<column>' and 'max:<column>'
    as text): over the new images (rows where new_flag holds) and, with_old, the old images
    (__ivm_before) too, the rows p's relation has in a term. -#}
{% macro _ivm_key_ranges_sql(ranged, new_flag, with_old) %}
  {%- if not ranged -%}{{ return('cast(map() as map<string, string>)') }}{%- endif -%}
  {%- set args = [] -%}
  {%- for col, r in ranged | dictsort -%}
    {%- set q = dbt_ivm._ivm_quote(r.name) -%}
    {%- for f, pick in [('min', 'least'), ('max', 'greatest')] -%}
      {%- set v = f ~ '(case when ' ~ new_flag ~ ' then ' ~ q ~ ' end)' -%}
      {%- if with_old -%}{%- set v = pick ~ '(' ~ v ~ ', ' ~ f ~ '(__ivm_before.' ~ q ~ '))' -%}{%- endif -%}
      {%- do args.append(dbt_ivm._ivm_string_literal(f ~ ':' ~ col) ~ ', cast(' ~ v ~ ' as string)') -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return('map(' ~ args | join(', ') ~ ')') }}
{% endmacro %}

{#- The map the change counts read p's distinct keys into, per range column: a JSON array
    of the text of the non-NULL values p's relation has in a term (as _ivm_key_ranges_sql),
    at most _ivm_key_list_max() + 1 of them. DISTINCT ... LIMIT bounds what the subquery
    collects however large the change; more than the max means no list. source: the
    relation read (with its alias) and where: its filter; inline: aggregates of the
    counting pass over that relation instead (p.inline_lists, see _ivm_key_listing), where
    filtering them, under its gate when it is one (_ivm_change_gate). -#}
{% macro _ivm_key_sets_sql(ranged, source, where, new_flag, with_old, inline=false) %}
  {%- if not ranged -%}{{ return('cast(map() as map<string, string>)') }}{%- endif -%}
  {%- set args = [] -%}
  {%- set limit = dbt_ivm._ivm_key_list_max() + 1 -%}
  {%- for col, r in ranged | dictsort -%}
    {%- set q = dbt_ivm._ivm_quote(r.name) -%}
    {%- if inline -%}
      {%- set rows = ('(' ~ where ~ ') and ' ~ inline.row) if inline is mapping else where -%}
      {%- set values = 'collect_set(case when (' ~ rows ~ ') and (' ~ new_flag ~ ') then ' ~ q ~ ' end)' -%}
      {%- if with_old -%}
        {%- set values = 'array_union(' ~ values ~ ', collect_set(case when ' ~ rows ~ ' then __ivm_before.' ~ q ~ ' end))' -%}
      {%- endif -%}
      {%- set listed = 'to_json(slice(transform(' ~ values ~ ', __ivm_v -> cast(__ivm_v as string)), 1, ' ~ limit ~ '))' -%}
      {%- set listed = ('case when ' ~ inline.all ~ ' then ' ~ listed ~ ' end') if inline is mapping else listed -%}
    {%- else -%}
      {%- if with_old -%}
        {%- set pick = 'select distinct __ivm_key from ' ~ source ~ ' lateral view explode(array(case when ' ~ new_flag ~ ' then '
            ~ q ~ ' end, __ivm_before.' ~ q ~ ')) __ivm_e as __ivm_key where (' ~ where ~ ') and __ivm_key is not null' -%}
      {%- else -%}
        {%- set pick = 'select distinct ' ~ q ~ ' as __ivm_key from ' ~ source ~ ' where (' ~ where ~ ') and (' ~ new_flag ~ ') and '
            ~ q ~ ' is not null' -%}
      {%- endif -%}
      {%- set listed = '(select to_json(collect_list(cast(__ivm_key as string))) from (' ~ pick ~ ' limit ' ~ limit ~ ') __ivm_d)' -%}
    {%- endif -%}
    {%- do args.append(dbt_ivm._ivm_string_literal(col) ~ ', ' ~ listed) -%}
  {%- endfor -%}
  {{ return('map(' ~ args | join(', ') ~ ')') }}
{% endmacro %}

{#- How the change count lists p's row keys, set on p once per changed upstream: p.id_types
    (see _ivm_listable_types; none without a change log), p.by_ids (see
    _ivm_ranged_by_ids), p.change_bound (see _ivm_change_rows_bound) and p.inline_lists:
    how the lists are collected (see _ivm_change_gate): as aggregates of the counting pass
    over the change set (collect_set, trimmed to the list maximum), when the change rows
    are known to be few enough for the sets to stay small whatever they hold (true), or
    are counted in the same statement (a gate); else (false) by DISTINCT ... LIMIT
    subqueries that net the change again. -#}
{% macro _ivm_key_listing(p) %}
  {%- do p.update({'id_types': dbt_ivm._ivm_listable_types(p.columns, p.up.hidden | map(attribute='column') | list)
                   if p.up.kind == 'change_log' else none}) -%}
  {%- do p.update({'by_ids': dbt_ivm._ivm_ranged_by_ids(p), 'change_bound': dbt_ivm._ivm_change_rows_bound(p)}) -%}
  {%- do p.update({'inline_lists': dbt_ivm._ivm_change_gate(p, dbt_ivm._ivm_key_list_max() * 10)}) -%}
{% endmacro %}

{#- The range columns of p that are columns of its row key, when its row keys can be listed
    (p.id_types, see _ivm_listable_types): {column (lower case): its position in the row
    key}. -#}
{% macro _ivm_ranged_by_ids(p) %}
  {%- set out = {} -%}
  {%- if p.get('id_types') is not none -%}
    {%- for k in p.up.unique_key -%}
      {%- if k | lower in p.get('ranged', {}) -%}{%- do out.update({k | lower: loop.index0}) -%}{%- endif -%}
    {%- endfor -%}
  {%- endif -%}
  {{ return(out) }}
{% endmacro %}

{#- The most distinct keys a term's partners are cut to as a list of literals: Spark plans
    such an IN list as a hash set and Delta and parquet skip files and row groups by it, where
    an IN subquery over the change set reads the change again, as its own jobs. 10,000 lets a
    0.1% change of a million-row upstream be listed (and a Delta join-only refresh replace
    its slices, see _ivm_delta_replaced_slices) while its SQL stays some hundred kilobytes. -#}
{% macro _ivm_key_list_max() %}
  {{ return(10000) }}
{% endmacro %}

{#- The distinct literals that position of a row key holds among listed row keys (p.ids),
    sorted. Compared case-sensitively: Jinja's `unique` and `sort` ignore case by default; unique
    would fold the string keys 'AB' and 'ab' into one. -#}
{% macro _ivm_listed_id_values(ids, position) %}
  {{ return(ids | map(attribute=position) | unique(case_sensitive=true) | sort(case_sensitive=true) | list) }}
{% endmacro %}

{#- p.ranges from the counted maps: {column: {lo, hi (SQL literals of the column's type; NULL
    when p has no non-NULL value there, which no equality matches), keys (the distinct
    values as literals, or none when there are more than _ivm_key_list_max()), partners}}.
    A row key column's values come from p's listed row keys (p.ids): every changed key,
    a superset of those a term holds, which a cut may be. -#}
{% macro _ivm_key_range_literals(values, ranged, sets, p) %}
  {%- set by_ids = p.by_ids if p.get('ids') is not none else {} -%}
  {%- set out = {} -%}
  {%- for col, r in ranged.items() -%}
    {%- set bounds = dbt_ivm._ivm_typed_literals([values.get('min:' ~ col), values.get('max:' ~ col)], r.type) -%}
    {%- set listed = fromjson(sets[col]) if sets.get(col) is not none else none -%}
    {%- set keys = none -%}
    {%- if col in by_ids -%}
      {%- set keys = dbt_ivm._ivm_listed_id_values(p.ids, by_ids[col]) -%}
    {%- elif listed is not none and listed | length <= dbt_ivm._ivm_key_list_max() -%}
      {%- set keys = dbt_ivm._ivm_typed_literals(listed | sort, r.type) -%}
    {%- endif -%}
    {%- do out.update({col: {'lo': bounds[0], 'hi': bounds[1], 'keys': keys, 'partners': r.partners}}) -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}
