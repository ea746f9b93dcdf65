{#- Tokenizer for Spark SQL, used by the run-time analysis (Jinja cannot call Python).
    Whitespace and comments are kept as tokens so that a rewrite can rebuild the text. -#}

{% macro _ivm_token_pattern() -%}
{{ return("(?P<ws>\\s+)"
    ~ "|(?P<comment>--[^\\n]*|/\\*[\\s\\S]*?\\*/)"
    ~ "|(?P<str>'(?:[^'\\\\]|\\\\.)*'|\"(?:[^\"\\\\]|\\\\.)*\")"
    ~ "|(?P<qid>`(?:[^`]|``)*`)"
    ~ "|(?P<num>\\d+\\.?\\d*(?:[eE][+-]?\\d+)?[A-Za-z]*|\\.\\d+(?:[eE][+-]?\\d+)?[A-Za-z]*)"
    ~ "|(?P<word>[A-Za-z_][A-Za-z_0-9]*)"
    ~ "|(?P<op><=>|<=|>=|<>|!=|==|\\|\\||::|->|=>)"
    ~ "|(?P<ch>[\\s\\S])") }}
{%- endmacro %}

{#- Returns {'tokens': [{kind, text, lower, word, depth}], 'significant': [index of every
    token but whitespace and comments]}: lower is the lower-case text without backticks,
    word the lower-case word for a keyword check ('' unless kind is word: a backticked
    `select` is a name, never a keyword), depth the parenthesis depth before it. Positions
    in 'significant' are what the parser calls sig positions. -#}
{% macro _ivm_tokenize(sql) %}
  {%- set tokens = [] -%}
  {%- set sig = [] -%}
  {%- set ns = namespace(depth=0) -%}
  {%- for m in modules.re.finditer(dbt_ivm._ivm_token_pattern(), sql) -%}
    {%- set kind = m.lastgroup -%}
    {%- set text = m.group(0) -%}
    {%- if text == ')' -%}{%- set ns.depth = ns.depth - 1 -%}{%- endif -%}
    {%- set low = text[1:-1].replace('``', '`').lower() if kind == 'qid' else text.lower() -%}
    {%- do tokens.append({'kind': kind, 'text': text, 'lower': low, 'word': low if kind == 'word' else '',
                           'depth': ns.depth if text != ')' else ns.depth + 1}) -%}
    {%- if kind not in ('ws', 'comment') -%}{%- do sig.append(tokens | length - 1) -%}{%- endif -%}
    {%- if text == '(' -%}{%- set ns.depth = ns.depth + 1 -%}{%- endif -%}
  {%- endfor -%}
  {{ return({'tokens': tokens, 'significant': sig, 'balanced': ns.depth == 0}) }}
{% endmacro %}

{#- Position in sig of the parenthesis closing the one at sig position p. -#}
{% macro _ivm_match_paren(tk, p) %}
  {%- set toks = tk.tokens -%}
  {%- set depth = toks[tk.significant[p]].depth -%}
  {%- for q in range(p + 1, tk.significant | length) -%}
    {%- set t = toks[tk.significant[q]] -%}
    {%- if t.text == ')' and t.depth == depth + 1 -%}{{ return(q) }}{%- endif -%}
  {%- endfor -%}
  {{ return(-1) }}
{% endmacro %}

{#- 1-based line and column of significant token p, for error messages. -#}
{% macro _ivm_position(tk, p) %}
  {%- set ns = namespace(line=1, col=1) -%}
  {%- set stop = tk.significant[p] if p < tk.significant | length else tk.tokens | length -%}
  {%- for i in range(stop) -%}
    {%- set v = tk.tokens[i].text -%}
    {%- if '\n' in v -%}
      {%- set ns.line = ns.line + v.count('\n') -%}
      {%- set ns.col = v | length - v.rfind('\n') -%}
    {%- else -%}
      {%- set ns.col = ns.col + v | length -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return('line ' ~ ns.line ~ ', column ' ~ ns.col) }}
{% endmacro %}
