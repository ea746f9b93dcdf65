{#- Rewrites of the parsed model used by every refresh path. -#}

{#- The model's query with
    * each upstream reference replaced by the placeholder __IVM_REL_<n>__ (then filled
      with a snapshot or a change set of that upstream, see _ivm_fill_relations), and
    * the hidden identity columns of every upstream added to every select list on the
      way to the output, so each view row says which upstream rows it came from.
    hidden: per upstream index, a list of {'column', 'name'}.
    edits: further replacements [{'s', 'e', 'text'}] of sig ranges [s, e) (the aggregate
    rewrites use them on the main query), and append: text added at the end. -#}
{% macro _ivm_rewrite_template(parsed, hidden, edits=[], append='') %}
  {%- set tk = parsed.tk -%}
  {%- set toks = tk.tokens -%}
  {%- set sig = tk.significant -%}
  {%- set provides = {} -%}
  {%- set by_name = {} -%}
  {%- for b in parsed.blocks -%}{%- do by_name.update({b.name: b}) -%}{%- endfor -%}
  {#- blocks may read blocks parsed later or earlier: resolve in passes -#}
  {%- for _ in parsed.blocks -%}
    {%- for b in parsed.blocks if b.id not in provides -%}
      {%- set ready = namespace(ok=true) -%}
      {%- for it in b.from_items if it.kind in ('cte', 'derived') and by_name[it.name].id not in provides -%}
        {%- set ready.ok = false -%}
      {%- endfor -%}
      {%- if ready.ok -%}
        {%- set cols = [] -%}
        {%- for it in b.from_items -%}
          {%- if it.kind == 'upstream' -%}
            {%- for h in hidden[it.upstream] -%}
              {%- do cols.append({'name': h.name, 'expr': dbt_ivm._ivm_quote(it.alias) ~ '.' ~ dbt_ivm._ivm_quote(h.column), 'star': false}) -%}
            {%- endfor -%}
          {%- elif it.kind in ('cte', 'derived') -%}
            {%- set starred = b['items'] | selectattr('star', 'in', ['*', it.alias]) | list -%}
            {%- for name in provides[by_name[it.name].id] -%}
              {%- do cols.append({'name': name, 'expr': dbt_ivm._ivm_quote(it.alias) ~ '.' ~ name, 'star': starred | length > 0}) -%}
            {%- endfor -%}
          {%- endif -%}
        {%- endfor -%}
        {%- do provides.update({b.id: cols | map(attribute='name') | list}) -%}
        {%- do b.update({'hidden_cols': cols}) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {#- edits keyed by token index -#}
  {%- set insert_before = {} -%}
  {%- set replace = {} -%}
  {%- for b in parsed.blocks if b.from_kw is not none -%}
    {%- set added = b.hidden_cols | rejectattr('star') | list -%}
    {%- if added -%}
      {%- set text = [] -%}
      {%- for c in added -%}{%- do text.append(c.expr ~ ' as ' ~ c.name) -%}{%- endfor -%}
      {%- do insert_before.update({sig[b.from_kw]: ', ' ~ text | join(', ') ~ ' '}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- for r in parsed.rels -%}
    {%- set alias = '' if r.alias_given else ' ' ~ dbt_ivm._ivm_quote(r.alias) -%}
    {%- do replace.update({sig[r.s]: {'end': sig[r.e - 1], 'text': dbt_ivm._ivm_placeholder(r.upstream) ~ alias}}) -%}
  {%- endfor -%}
  {%- for q in parsed.qualifiers -%}
    {%- do replace.update({sig[q.s]: {'end': sig[q.e - 1], 'text': dbt_ivm._ivm_quote(parsed.upstreams[q.upstream].parts[-1])}}) -%}
  {%- endfor -%}
  {%- for ed in edits -%}
    {%- do replace.update({sig[ed.s]: {'end': sig[ed.e - 1], 'text': ed.text}}) -%}
  {%- endfor -%}
  {{ return(dbt_ivm._ivm_edited_text(toks, 0, toks | length, insert_before, replace) ~ append) }}
{% endmacro %}

{#- Tokens [first, stop) with insertions and replacements {token index: {'end', 'text'}};
    tokens inside a replaced range are dropped, and so is the statement's `;`. -#}
{% macro _ivm_edited_text(toks, first, stop, insert_before, replace) %}
  {%- set out = [] -%}
  {%- set ns = namespace(skip_to=-1) -%}
  {%- for i in range(first, stop) -%}
    {%- if i in insert_before -%}{%- do out.append(insert_before[i]) -%}{%- endif -%}
    {%- if i <= ns.skip_to -%}
    {%- elif i in replace -%}
      {%- do out.append(replace[i].text) -%}{%- set ns.skip_to = replace[i].end -%}
    {%- elif toks[i].text != ';' -%}
      {%- do out.append(toks[i].text) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(out | join('')) }}
{% endmacro %}

{#- The text of sig range [s, e) with upstream qualifiers rewritten as in the template,
    and further replacements subs {sig position: {'end': sig position (exclusive), 'text'}}. -#}
{% macro _ivm_range_text(parsed, s, e, subs={}) %}
  {%- set sig = parsed.tk.significant -%}
  {%- if s >= e -%}{{ return('') }}{%- endif -%}
  {%- set replace = {} -%}
  {%- for q in parsed.qualifiers if q.s >= s and q.e <= e -%}
    {%- do replace.update({sig[q.s]: {'end': sig[q.e - 1], 'text': dbt_ivm._ivm_quote(parsed.upstreams[q.upstream].parts[-1])}}) -%}
  {%- endfor -%}
  {%- for p, r in subs.items() -%}
    {%- do replace.update({sig[p]: {'end': sig[r.end - 1], 'text': r.text}}) -%}
  {%- endfor -%}
  {{ return(dbt_ivm._ivm_edited_text(parsed.tk.tokens, sig[s], sig[e - 1] + 1, {}, replace)) }}
{% endmacro %}

{#- The placeholder of upstream `index` in a template. -#}
{% macro _ivm_placeholder(index) %}
  {{ return('__IVM_REL_' ~ index ~ '__') }}
{% endmacro %}

{#- Fill the placeholders of a template: relations maps upstream index to SQL text. -#}
{% macro _ivm_fill_relations(template, relations) %}
  {%- set ns = namespace(sql=template) -%}
  {%- for key, text in relations.items() -%}
    {%- set ns.sql = ns.sql.replace(dbt_ivm._ivm_placeholder(key), text) -%}
  {%- endfor -%}
  {{ return(ns.sql) }}
{% endmacro %}

{% macro _ivm_quote(name) %}
  {{ return('`' ~ (name | string).replace('`', '``') ~ '`') }}
{% endmacro %}

{% macro _ivm_quote_all(names) %}
  {%- set out = [] -%}
  {%- for n in names -%}{%- do out.append(dbt_ivm._ivm_quote(n)) -%}{%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{#- The model's definition before a full build, {'sql': for its view, 'columns': its output
    columns as Spark names them}: no column may start with __ivm_ (IVM016, the package's
    bookkeeping columns), a model stored as Delta has no column name with a character
    Delta refuses (IVM017: unnamed items like `round(x, 1)` have one), and each unnamed select item of the outermost query (`sum(x)`,
    `a + 1`) gets the name Spark gives it in a `table` model as an explicit alias, since
    Spark refuses a permanent view over auto-generated names. -#}
{% macro _ivm_checked_definition(parsed, sql, file_format) %}
  {%- set names = run_query('describe query ' ~ sql).columns[0].values() | list -%}
  {%- set reserved = [] -%}
  {%- set refused = [] -%}
  {%- for n in names -%}
    {%- if (n | lower).startswith('__ivm_') -%}{%- do reserved.append(n) -%}{%- endif -%}
    {%- if file_format == 'delta' and modules.re.search('[ ,;{}()\n\t=]', n) -%}{%- do refused.append('`' ~ n ~ '`') -%}{%- endif -%}
  {%- endfor -%}
  {%- set issues = [] -%}
  {%- if reserved -%}
    {%- do issues.append({'code': 'IVM016', 'construct': 'output column ' ~ reserved | join(', '), 'position': 'the model'}) -%}
  {%- endif -%}
  {%- if refused -%}
    {%- do issues.append({'code': 'IVM017', 'construct': 'output column ' ~ refused | join(', ') ~ " (file_format='delta')",
                          'position': 'the model'}) -%}
  {%- endif -%}
  {%- if issues -%}
    {{ exceptions.raise_compiler_error(dbt_ivm._ivm_format_issues(model.name, issues)) }}
  {%- endif -%}
  {#- a model that could not be parsed (ivm_on_unsupported=full_rebuild) is left as written -#}
  {%- set items = parsed.blocks[0]['items'] if parsed.blocks and parsed.blocks[0].ok else [] -%}
  {%- set stars = items | selectattr('star') | list -%}
  {%- set first_star = items.index(stars[0]) if stars else items | length -%}
  {%- set last_star = items.index(stars[-1]) if stars else -1 -%}
  {%- set aliases = {} -%}
  {%- for item in items -%}
    {%- set i = loop.index0 -%}
    {%- if item.star or item.name is not none -%}{%- continue -%}{%- endif -%}
    {%- if i < first_star -%}
      {%- set name = names[i] -%}
    {%- elif i > last_star -%}
      {%- set name = names[names | length - (items | length - i)] -%}
    {%- else -%}
      {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': the select item `" ~ dbt_ivm._ivm_range_text(parsed, item.s, item.e)
          ~ "` between two `*` items needs an alias (`... as name`): its name cannot be told from the columns the stars bring.") }}
    {%- endif -%}
    {%- do aliases.update({parsed.tk.significant[item.e - 1]: ' as ' ~ dbt_ivm._ivm_quote(name)}) -%}
  {%- endfor -%}
  {%- set out = [] -%}
  {%- for t in parsed.tk.tokens -%}{%- do out.append(t.text ~ aliases.get(loop.index0, '')) -%}{%- endfor -%}
  {{ return({'sql': out | join(''), 'columns': names}) }}
{% endmacro %}
