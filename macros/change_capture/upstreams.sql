{#- Upstream declarations. Every ref() or source() of an ivm model declares, in the
    `ivm` key of its meta, how its changes are read:
      change log : {unique_key: [...], change_log: <relation>}   (Delta CDF schema)
      Delta CDF  : {unique_key: [...]}, optionally with change_feed: delta (table_changes
                   of the table itself; with the key alone, feed 'detect': the
                   materialization checks that the table is Delta with its change data
                   feed on, see ivm_detect_change_feeds)
      append-only: {watermark: <column>}                         (rows above the last value)
      diff capture: {unique_key: [...], change_feed: diff}       (any table: the changes are
                   the difference between the table and the snapshot of it this model
                   kept at its last refresh, see diff_capture.sql)
    A ref() of another ivm model with no `ivm` meta needs no declaration (feed 'ivm'): its
    row key and how its changes are read are resolved at run time (ivm_detect_change_feeds).
    Returns one dict per upstream: name, relation, parts (how it renders in SQL), kind,
    unique_key, change_log, watermark, hidden identity columns and config problems. -#}
{% macro ivm_upstreams(model) %}
  {{ return(adapter.dispatch('ivm_upstreams', 'dbt_ivm')(model)) }}
{% endmacro %}

{% macro default__ivm_upstreams(model) %}
  {%- set result = [] -%}
  {%- set used_names = [] -%}
  {%- for uid in model.depends_on.nodes -%}
    {%- set node = graph.nodes.get(uid) or graph.sources.get(uid) -%}
    {%- if node is none or node.resource_type not in ('model', 'seed', 'source', 'snapshot') -%}{%- continue -%}{%- endif -%}
    {%- set is_source = node.resource_type == 'source' -%}
    {%- set identifier = node.identifier if is_source else (node.alias or node.name) -%}
    {%- set relation = api.Relation.create(database=node.database, schema=node.schema, identifier=identifier) -%}
    {%- set meta = {} -%}
    {%- do meta.update(node.get('source_meta', {}).get('ivm', {}) if is_source else {}) -%}
    {%- do meta.update(node.config.get('meta', {}).get('ivm', {})) -%}
    {%- do meta.update(node.get('meta', {}).get('ivm', {})) -%}
    {%- set display = (node.source_name ~ '.' ~ node.name) if is_source else node.name -%}
    {%- set rendered = relation.render() -%}
    {%- set parts = dbt_ivm._ivm_tokenize(rendered).tokens | rejectattr('text', 'equalto', '.') | map(attribute='lower') | list -%}
    {%- set key = meta.get('unique_key') -%}
    {%- set key = [key] if key is string else (key or []) -%}
    {%- do dbt_ivm._ivm_check_declared_names(model, display, meta, key) -%}
    {%- set problems = [] -%}
    {%- set yaml_where = ("sources: [{name: " ~ node.source_name ~ ", tables: [{name: " ~ node.name ~
        ", config: {meta: {ivm: {") if is_source else (node.resource_type ~ "s: [{name: " ~ node.name ~ ", config: {meta: {ivm: {") -%}
    {%- set yaml_end = '}}}}]}]' if is_source else '}}}}]' -%}
    {%- if meta.get('change_feed') is not none and meta.get('change_feed') not in ('delta', 'diff') -%}
      {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': upstream " ~ display ~ " declares change_feed '" ~
          meta.get('change_feed') ~ "': write change_feed: delta (a Delta table's change data feed) or change_feed: diff "
              "(dbt_ivm compares the table with a snapshot it keeps), or leave it out (nothing was run).") }}
    {%- endif -%}
    {%- set feed = meta.get('change_feed') if meta.get('change_feed') and not meta.get('change_log') else none -%}
    {%- if not feed and key and not meta.get('change_log') and not meta.get('watermark') -%}
      {%- set feed = 'detect' -%}
    {%- endif -%}
    {%- if not meta and node.resource_type == 'model' and node.config.get('materialized') == 'ivm' -%}
      {#- another ivm model, undeclared: its row key and change feed are read at run time
          (ivm_detect_change_feeds) -#}
      {%- set feed = 'ivm' -%}
      {%- set kind = 'change_log' -%}
      {%- set change_log = none -%}
    {%- elif feed -%}
      {#- a Delta table with change data feed: its own table_changes() is the change log;
          diff capture: the changes are the difference between two snapshots dbt_ivm keeps -#}
      {%- set kind = 'change_log' -%}
      {%- set change_log = relation if feed != 'diff' else none -%}
      {%- if not key -%}
        {%- do problems.append({'code': 'IVM030',
            'fix': 'a change feed is netted per row key: add `unique_key: [<key column>, ...]` next to change_feed in ' ~
                yaml_where ~ "change_feed: " ~ (feed if feed != 'detect' else 'delta') ~ ", unique_key: [id]" ~ yaml_end}) -%}
      {%- endif -%}
    {%- elif meta.get('change_log') -%}
      {%- set kind = 'change_log' -%}
      {%- set log_text = meta.change_log -%}
      {%- set log_parts = log_text.split('.') -%}
      {%- set change_log = api.Relation.create(database=node.database,
          schema=(log_parts[-2] if log_parts | length > 1 else node.schema), identifier=log_parts[-1]) -%}
      {%- if not key -%}
        {%- do problems.append({'code': 'IVM030',
            'fix': 'a change log is netted per row key: add `unique_key: [<key column>, ...]` next to change_log in ' ~
                yaml_where ~ "change_log: " ~ log_text ~ ", unique_key: [id]" ~ yaml_end}) -%}
      {%- endif -%}
    {%- elif meta.get('watermark') -%}
      {%- set kind = 'append_only' -%}
      {%- set change_log = none -%}
    {%- else -%}
      {%- set kind = none -%}
      {%- set change_log = none -%}
      {%- do problems.append({'code': 'IVM031', 'fix': 'declare how changes of ' ~ display ~ ' are read, e.g. ' ~ yaml_where ~
          "unique_key: [id], change_log: " ~ identifier ~ "_changes" ~ yaml_end ~
              "  or, for a Delta table with change data feed, only its key {ivm: {unique_key: [id]}}, or, for an append-only "
                  "table, {ivm: {watermark: loaded_at}}, or, for any other table (a seed, a table model, a full reload), "
                      "{ivm: {unique_key: [id], change_feed: diff}}"}) -%}
    {%- endif -%}
    {%- set base_name = modules.re.sub('[^a-z0-9_]', '_', node.name.lower()) -%}
    {%- set short = base_name if base_name not in used_names else base_name ~ '_' ~ loop.index0 -%}
    {%- do used_names.append(short) -%}
    {%- set identity = key if kind == 'change_log' else ([meta.watermark] if kind == 'append_only' else []) -%}
    {%- set hidden = [] -%}
    {%- for c in identity -%}
      {%- do hidden.append({'column': c, 'name': '__ivm_' ~ short ~ '__' ~ modules.re.sub('[^A-Za-z0-9_]', '_', c)}) -%}
    {%- endfor -%}
    {%- if feed == 'diff' -%}
      {#- this model's snapshots of the upstream: one table per version, next to the model -#}
      {%- set snapshot_prefix = modules.re.sub('[^a-z0-9_]', '_', ('__ivm_snap__' ~ (model.alias or model.name) ~ '__' ~ short ~ '__v') | lower) -%}
      {%- set snapshots = {'database': model.get('database'), 'schema': model.schema, 'prefix': snapshot_prefix} -%}
    {%- else -%}
      {%- set snapshots = none -%}
    {%- endif -%}
    {%- do result.append({'uid': uid, 'name': display, 'short': short, 'relation': relation, 'parts': parts, 'snapshots': snapshots,
                          'kind': kind, 'feed': feed, 'unique_key': key, 'change_log': change_log, 'watermark': meta.get('watermark'),
                          'hidden': hidden, 'problems': problems}) -%}
  {%- endfor -%}
  {{ return(result) }}
{% endmacro %}

{#- Upstreams that declare only a row key (feed 'detect') are read through Delta's change
    data feed: check, with one DESCRIBE each, that they are Delta tables with
    delta.enableChangeDataFeed=true. A detected upstream becomes feed 'delta'; any other
    gets IVM031 saying what it is and what to declare. With defer, a table the listing of
    the model's sources shows to be a Delta table becomes feed 'delta' unverified, without
    a DESCRIBE: the refresh describes it once its version moved or it writes anyway, and
    raises IVM031 then if its feed is off (_ivm_check_detected_feed); a no-op needs
    neither, as turning the feed off is a commit. Returns the upstreams. -#}
{% macro ivm_detect_change_feeds(model, upstreams, defer=false, hidden_rows=false) %}
  {{ return(adapter.dispatch('ivm_detect_change_feeds', 'dbt_ivm')(model, upstreams, defer, hidden_rows)) }}
{% endmacro %}

{% macro default__ivm_detect_change_feeds(model, upstreams, defer=false, hidden_rows=false) %}
  {%- do dbt_ivm._ivm_list_sources(upstreams) -%}
  {%- for up in upstreams if up.feed in ('detect', 'ivm') -%}
    {%- set r = up.relation -%}
    {%- set listed = dbt_ivm._ivm_listed(up, r) -%}
    {%- if listed is none -%}
      {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': upstream " ~ up.name ~ ' (' ~ r ~
          ') does not exist. Build or load it first.') }}
    {%- endif -%}
    {#- an --empty or --sample run left a view where the ivm model's table will be: no row
        key to read, and this run reads no changes -#}
    {%- set found = adapter.get_relation(database=r.database, schema=r.schema, identifier=r.identifier)
        if hidden_rows and up.feed == 'ivm' else none -%}
    {%- if found is not none and found.type == 'view' -%}{%- continue -%}{%- endif -%}
    {%- if defer and up.feed == 'detect' and 'Provider: delta' in listed -%}
      {%- do up.update({'feed': 'delta', 'feed_unverified': true}) -%}
      {%- continue -%}
    {%- endif -%}
    {%- set described = dbt_ivm._ivm_describe_upstream(up) -%}
    {%- if up.feed == 'ivm' -%}
      {%- do dbt_ivm.ivm_resolve_ivm_upstream(up, described) -%}
      {%- continue -%}
    {%- endif -%}
    {%- set found = dbt_ivm._ivm_delta_change_feed_status(described) -%}
    {%- if found.ok -%}
      {%- do up.update({'feed': 'delta'}) -%}
    {%- else -%}
      {%- do up.update({'kind': none, 'feed': none, 'change_log': none, 'hidden': [], 'problems': [{'code': 'IVM031',
          'fix': dbt_ivm._ivm_no_feed_fix(up, found.what)}]}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(upstreams) }}
{% endmacro %}

{#- The fix of IVM031 for an upstream that declares only its row key but is `what`. -#}
{% macro _ivm_no_feed_fix(up, what) %}
  {{ return(up.name ~ ' declares only unique_key, which is enough for a Delta table with change data feed, but it is ' ~ what
      ~ ": turn the feed on (ALTER TABLE " ~ up.relation ~ " SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')) on a"
      ~ " Delta table, or declare change_log: <relation>, watermark: <column> or change_feed: diff next to unique_key") }}
{% endmacro %}

{#- The deferred check of an upstream ivm_detect_change_feeds found to be a Delta table by
    its listing (feed_unverified), from the rows of its DESCRIBE: IVM031 at its first read
    in the model (plan entry p, p.read_at in the model's tokens) when its change feed is off, as the detection would
    have failed before. -#}
{% macro _ivm_check_detected_feed(model, p, described, tokens) %}
  {%- set found = dbt_ivm._ivm_delta_change_feed_status(described) -%}
  {%- if not found.ok -%}
    {{ exceptions.raise_compiler_error(dbt_ivm._ivm_format_issues(model.name, [{'code': 'IVM031', 'construct': 'upstream ' ~ p.up.name,
        'position': dbt_ivm._ivm_position(tokens, p.read_at), 'fix': dbt_ivm._ivm_no_feed_fix(p.up, found.what)}])) }}
  {%- endif -%}
  {%- do p.up.update({'feed_unverified': false}) -%}
{% endmacro %}

{#- One DESCRIBE TABLE EXTENDED of an upstream's table: its columns and its properties (what
    a change feed check reads) kept on the upstream. Returns the rows. -#}
{% macro _ivm_describe_upstream(up) %}
  {%- set described = run_query('describe table extended ' ~ up.relation).rows -%}
  {%- do up.update({'described_columns': dbt_ivm._ivm_described_columns(described),
                    'described_properties': dbt_ivm._ivm_table_info(described).properties}) -%}
  {{ return(described) }}
{% endmacro %}

{#- The SHOW TABLE EXTENDED rows of the tables a model's sources read (each source and its
    declared change log), from one statement per schema whose pattern names just them, kept
    on each source upstream (up.listing: {'asked': keys, 'info': {key: information text}},
    see _ivm_listed). dbt's get_relation lists the whole schema instead (every table of it
    described, a cost that grows with the schema), and caches that only for the schemas of
    models, so every model sent it again. dbt builds no source during the run, so the
    listing stays current. Names the pattern cannot carry are left to get_relation. -#}
{% macro _ivm_list_sources(upstreams) %}
  {%- set by_schema = {} -%}
  {%- set listing = {'asked': [], 'info': {}} -%}
  {%- for up in upstreams if up.uid.startswith('source.') -%}
    {%- for r in [up.relation, up.change_log] if r is not none and r is not string
        and modules.re.fullmatch('[a-z0-9_]+', r.identifier | lower) -%}
      {%- do by_schema.setdefault(r.include(identifier=false) | string, []).append(r.identifier | lower) -%}
      {%- do listing.asked.append(dbt_ivm._ivm_listing_key(r.include(identifier=false) | string, r.identifier)) -%}
    {%- endfor -%}
    {%- do up.update({'listing': listing}) -%}
  {%- endfor -%}
  {%- for schema, names in by_schema | dictsort -%}
    {%- set rows = run_query('show table extended in ' ~ schema ~ ' like '
        ~ dbt_ivm._ivm_string_literal(names | unique | join('|'))).rows -%}
    {#- a temporary view is listed in every schema: not a table of this one -#}
    {%- for row in rows if (row[2] | string | lower) not in ('true', '1') -%}
      {%- do listing.info.update({dbt_ivm._ivm_listing_key(schema, row[1]): row[3] | string}) -%}
    {%- endfor -%}
  {%- endfor -%}
{% endmacro %}

{% macro _ivm_listing_key(schema, name) %}
  {{ return((schema ~ '|' ~ name) | lower) }}
{% endmacro %}

{#- A relation an upstream reads, as listed: its information text ('' when the listing says
    nothing of it), none when it does not exist. From the model's listing of its sources
    (see _ivm_list_sources), else from dbt's get_relation. -#}
{% macro _ivm_listed(up, relation) %}
  {%- set listing = up.get('listing') -%}
  {%- set key = dbt_ivm._ivm_listing_key(relation.include(identifier=false) | string, relation.identifier) -%}
  {%- if listing is not none and key in listing.asked -%}{{ return(listing.info.get(key)) }}{%- endif -%}
  {%- set found = adapter.get_relation(database=relation.database, schema=relation.schema, identifier=relation.identifier) -%}
  {{ return((found.information or '') if found is not none else none) }}
{% endmacro %}

{#- An upstream that is another ivm model (feed 'ivm'), from the rows of its DESCRIBE TABLE
    EXTENDED: its row key is the table property dbt_ivm.row_key, written when it was
    built. A Delta table is read through its change data feed (feed 'delta'); a parquet
    table through the change log __ivm_changes__<table> it writes for its ivm dependents
    (feed stays 'ivm'; its versions come from the refresh log, see ivm_current_versions).
    No row key: IVM030 saying why. Updates the upstream in place. -#}
{% macro ivm_resolve_ivm_upstream(up, described) %}
  {{ return(adapter.dispatch('ivm_resolve_ivm_upstream', 'dbt_ivm')(up, described)) }}
{% endmacro %}

{% macro default__ivm_resolve_ivm_upstream(up, described) %}
  {%- set info = dbt_ivm._ivm_table_info(described) -%}
  {%- set key = info.properties.get('dbt_ivm.row_key', '') | trim -%}
  {%- set key = key.split(',') | map('trim') | reject('equalto', '') | list -%}
  {%- if not key -%}
    {%- do up.update({'kind': none, 'feed': none, 'change_log': none, 'hidden': [], 'problems': [{'code': 'IVM030',
        'fix': up.name ~ ' is an ivm model, but its table ' ~ up.relation ~ ' records no row key (table property dbt_ivm.row_key): '
               ~ 'its rows have no identity when it is an aggregate without GROUP BY, a join over an append-only (watermark) upstream '
               ~ 'or a model rebuilt in full as not maintainable; a table built by an older dbt_ivm has none yet: run it once with '
               ~ '`dbt run --full-refresh -s ' ~ up.name ~ '`. Otherwise declare how to read it in models: [{name: ' ~ up.name
               ~ ', config: {meta: {ivm: {...}}}}]'}]}) -%}
    {{ return(up) }}
  {%- endif -%}
  {%- set hidden = [] -%}
  {%- for c in key -%}
    {%- do hidden.append({'column': c, 'name': '__ivm_' ~ up.short ~ '__' ~ modules.re.sub('[^A-Za-z0-9_]', '_', c)}) -%}
  {%- endfor -%}
  {%- do up.update({'unique_key': key, 'hidden': hidden, 'ivm_model': true}) -%}
  {%- if info.provider == 'delta' -%}
    {%- do up.update({'feed': 'delta', 'change_log': up.relation}) -%}
  {%- else -%}
    {%- do up.update({'change_log': dbt_ivm._ivm_change_log_relation(up.relation)}) -%}
  {%- endif -%}
  {{ return(up) }}
{% endmacro %}

{#- From the rows of DESCRIBE TABLE EXTENDED: {'provider': lower case, 'properties': dict}.
    Spark lists the properties as [k1=v1,k2=v2,...]: a part without '=' continues the
    value before it (a row key lists its columns separated by commas). -#}
{% macro _ivm_table_info(rows) %}
  {%- set info = {} -%}
  {%- for row in rows if row[0] -%}{%- do info.update({row[0] | trim | lower: (row[1] or '') | string}) -%}{%- endfor -%}
  {%- set text = info.get('table properties', '') | trim -%}
  {%- set text = text[1:-1] if text.startswith('[') and text.endswith(']') else text -%}
  {%- set properties = {} -%}
  {%- set last = namespace(key=none) -%}
  {%- for part in text.split(',') -%}
    {%- if '=' in part -%}
      {%- set kv = part.split('=', 1) -%}
      {%- set last.key = kv[0] | trim -%}
      {%- do properties.update({last.key: kv[1]}) -%}
    {%- elif last.key is not none -%}
      {%- do properties.update({last.key: properties[last.key] ~ ',' ~ part}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return({'provider': info.get('provider', 'unknown') | trim | lower, 'properties': properties}) }}
{% endmacro %}

{#- The columns in the rows of DESCRIBE TABLE EXTENDED (those before the first blank or
    '#' row), as dbt's adapter.get_columns_in_relation reads them from the same rows. -#}
{% macro _ivm_described_columns(rows) %}
  {%- set columns = [] -%}
  {%- set ns = namespace(done=false) -%}
  {%- for r in rows if not ns.done -%}
    {%- if not r[0] or r[0].startswith('#') -%}
      {%- set ns.done = true -%}
    {%- else -%}
      {%- do columns.append(api.Column(r[0], r[1])) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(columns) }}
{% endmacro %}

{#- The columns of a relation an upstream reads (the table or its declared change log; []
    when it does not exist). A source's come from the listing of its tables (one statement
    per schema instead of a DESCRIBE per table, see _ivm_list_sources), or from dbt's
    listing of its schema for a name that listing could not carry. Anything else, or what
    the listing cannot say (see _ivm_listing_columns), is described. -#}
{% macro _ivm_upstream_columns(up, relation) %}
  {%- if up.uid.startswith('source.') -%}
    {%- set listed = dbt_ivm._ivm_listed(up, relation) -%}
    {%- if listed is none -%}{{ return([]) }}{%- endif -%}
    {%- set columns = dbt_ivm._ivm_listing_columns(listed) -%}
    {%- if columns -%}{{ return(columns) }}{%- endif -%}
  {%- endif -%}
  {{ return(adapter.get_columns_in_relation(relation)) }}
{% endmacro %}

{#- The columns in the information text of a SHOW TABLE EXTENDED row (its "Schema: root"
    tree), with the type names DESCRIBE gives them; none unless every column is a plain
    type the tree names unambiguously: not for a Delta table (its catalog entry holds no
    columns), a nested type, or information in another form. nested: also a column of a
    nested type, typed with the tree's one word for it (map, struct, array), which DESCRIBE
    spells out: for a caller that needs only the names. -#}
{% macro _ivm_listing_columns(text, nested=false) %}
  {%- set parts = (text or '').split('\nSchema: root\n', 1) -%}
  {%- if parts | length < 2 or 'Provider: delta' in parts[0] -%}{{ return(none) }}{%- endif -%}
  {%- set names = {'long': 'bigint', 'integer': 'int', 'short': 'smallint', 'byte': 'tinyint'} -%}
  {%- set columns = [] -%}
  {%- set types = 'string|double|float|boolean|binary|date|timestamp|timestamp_ntz|long|integer|short|byte|decimal[(][0-9]+,[0-9]+[)]'
      ~ ('|map|struct|array' if nested else '') -%}
  {#- a nested type's own fields and elements are the lines indented below it -#}
  {%- for line in parts[1].split('\n') if line.strip() and not (nested and line.startswith(' |    ')) -%}
    {%- set m = modules.re.fullmatch(' [|]-- (.+): (' ~ types ~ ') [(]nullable = (?:true|false)[)]', line) -%}
    {%- if m is none -%}{{ return(none) }}{%- endif -%}
    {%- do columns.append(api.Column(m.group(1), names.get(m.group(2), m.group(2)))) -%}
  {%- endfor -%}
  {{ return(columns or none) }}
{% endmacro %}

{#- The change log an ivm table stored as parquet writes for its ivm dependents. -#}
{% macro _ivm_change_log_relation(relation) %}
  {{ return(api.Relation.create(database=relation.database, schema=relation.schema,
                                identifier='__ivm_changes__' ~ relation.identifier, type='table')) }}
{% endmacro %}

{#- True when the ivm model must write its own change log: it is stored as parquet, declares
    no `ivm` meta of its own and some ivm model reads it (a model without ivm dependents
    pays nothing). -#}
{% macro _ivm_writes_change_log(model, settings) %}
  {%- if settings.get('file_format') == 'delta' or (model.config.get('meta') or {}).get('ivm') or (model.get('meta') or {}).get('ivm') -%}
    {{ return(false) }}
  {%- endif -%}
  {{ return(dbt_ivm._ivm_has_ivm_dependents(model)) }}
{% endmacro %}

{#- Whether an ivm model of the project reads this model (through ref()). -#}
{% macro _ivm_has_ivm_dependents(model) %}
  {%- for node in graph.nodes.values() if node.resource_type == 'model' and node.config.get('materialized') == 'ivm' -%}
    {%- if model.unique_id in node.depends_on.nodes -%}{{ return(true) }}{%- endif -%}
  {%- endfor -%}
  {{ return(false) }}
{% endmacro %}

{#- From the rows of DESCRIBE TABLE EXTENDED: {'ok': a Delta table with its change data
    feed on, 'what': what the table is when not}. -#}
{% macro _ivm_delta_change_feed_status(rows) %}
  {%- set info = {} -%}
  {%- for row in rows if row[0] -%}{%- do info.update({row[0] | trim | lower: (row[1] or '') | string}) -%}{%- endfor -%}
  {%- set provider = info.get('provider', 'unknown') | trim | lower -%}
  {%- set properties = info.get('table properties', '') | lower | replace(' ', '') -%}
  {%- set feed_on = 'delta.enablechangedatafeed=true' in properties -%}
  {%- if provider == 'delta' and feed_on -%}{{ return({'ok': true, 'what': 'a Delta table with change data feed'}) }}{%- endif -%}
  {%- if provider == 'delta' -%}{{ return({'ok': false, 'what': 'a Delta table without delta.enableChangeDataFeed=true'}) }}{%- endif -%}
  {{ return({'ok': false, 'what': 'a ' ~ provider ~ ' table, not a Delta table'}) }}
{% endmacro %}

{#- Declared names reach SQL: a change_log must be [schema.]table of plain identifiers (it is
    rendered unquoted), keys and watermarks column names without backticks, semicolons or
    line breaks (they are quoted). Fails before any statement runs. -#}
{% macro _ivm_check_declared_names(model, upstream, meta, key) %}
  {%- set log = meta.get('change_log') -%}
  {%- if log is not none and (log is not string or not modules.re.fullmatch('[A-Za-z_][A-Za-z0-9_]*([.][A-Za-z_][A-Za-z0-9_]*)?', log)) -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': upstream " ~ upstream ~ " declares change_log '" ~ log
        ~ "', which is not a table name: write it as table or schema.table, of letters, digits and _ (nothing was run).") }}
  {%- endif -%}
  {%- set columns = key + ([meta.watermark] if meta.get('watermark') is not none else []) -%}
  {%- for c in columns if c is not string or not c or modules.re.search('[`;\n\r]', c) -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': upstream " ~ upstream ~ " declares the column name '" ~ c
        ~ "' (unique_key or watermark), which is not a column name: no backticks, semicolons or line breaks (nothing was run).") }}
  {%- endfor -%}
{% endmacro %}

{#- Whether an upstream's row keys may be NULL: only an ivm model's, whose row key may be a
    group key (a group of NULL); a declared key's NULL is IVM062. -#}
{% macro _ivm_keys_may_be_null(up) %}
  {{ return(up.get('ivm_model', false)) }}
{% endmacro %}
