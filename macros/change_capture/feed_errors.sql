{#- Delta change-feed errors: what happened, and what the model does about it
    (config ivm_on_change_feed_error: 'fail' with an explanation, or 'rebuild' in full,
    logged as the refresh's reason). dbt's Jinja cannot catch a failed query, so a refresh
    checks the table history before it reads table_changes() (ivm_delta_feed_problem) and
    names the Delta error the read would raise; the same classifier also reads any
    error text that contains one of these error classes. -#}

{% macro _ivm_change_feed_errors() %}
  {%- set schema_change = {
      'what': 'the schema of the table changed incompatibly (columns renamed, dropped or retyped, or the table replaced with another'
              ~ ' schema) since the last refresh',
      'fix': 'rebuild the model on the new schema: dbt run --full-refresh -s <model>, or set ivm_on_change_feed_error: rebuild'
             ~ ' in the model\'s config meta'} -%}
  {{ return({
    'DELTA_CDC_START_VERSION_AFTER_LATEST': {
      'what': 'the table was recreated or restored since the last refresh (the version it read is newer than the latest version,'
              ~ ' belongs to an earlier table of that name, or a RESTORE rolled the table back), so its change feed does not continue from there',
      'fix': 'rebuild the model: dbt run --full-refresh -s <model>, or set ivm_on_change_feed_error: rebuild in the model\'s config meta'},
    'DELTA_MISSING_CHANGE_DATA': {
      'what': 'change data was not recorded for part of the versions since the last refresh (delta.enableChangeDataFeed was off)',
      'fix': "enable it for good (ALTER TABLE <t> SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')),"
             ~ ' then rebuild the model once: dbt run --full-refresh -s <model>'},
    'DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION': {
      'what': 'the last refresh is older than the retention of the table (delta.deletedFileRetentionDuration, 7 days by default;'
              ~ ' Delta >= 4.1 refuses such change reads even without VACUUM)',
      'fix': 'refresh more often than the retention, or raise delta.deletedFileRetentionDuration on the upstream; now rebuild:'
             ~ ' dbt run --full-refresh -s <model>, or set ivm_on_change_feed_error: rebuild in the model\'s config meta'},
    'DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA': schema_change,
    'DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE': schema_change,
  }) }}
{% endmacro %}

{#- The Delta change-feed error class named in an error text, with what it means and what
    to do: {'code', 'what', 'fix'}, or none for any other text. -#}
{% macro _ivm_classify_change_feed_error(message) %}
  {%- set errors = dbt_ivm._ivm_change_feed_errors() -%}
  {%- for code in errors | sort(reverse=true) if code in (message | string) -%}
    {{ return({'code': code, 'what': errors[code].what, 'fix': errors[code].fix}) }}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}

{#- What a refresh does about a change-feed error text of upstream `upstream_name`:
    {'action': 'fail' | 'rebuild' | 'unknown', 'text': the explanation or the reason to log}.
    A text in Delta's form ('[CODE] ...') is what Delta said; any other is what the check
    before the read (ivm_delta_feed_problem) found. -#}
{% macro _ivm_change_feed_decision(model_name, upstream_name, message, on_error) %}
  {%- set e = dbt_ivm._ivm_classify_change_feed_error(message) -%}
  {%- if e is none -%}
    {{ return({'action': 'unknown', 'text': message}) }}
  {%- endif -%}
  {%- if on_error == 'rebuild' -%}
    {{ return({'action': 'rebuild',
               'text': 'change feed of ' ~ upstream_name ~ ' unreadable (' ~ e.code ~ ': ' ~ e.what ~ '); ivm_on_change_feed_error=rebuild'}) }}
  {%- endif -%}
  {%- set source = 'Delta said: ' if (message | string).startswith('[') else 'found before reading it: ' -%}
  {{ return({'action': 'fail', 'text': "Model '" ~ model_name ~ "' cannot read the changes of upstream " ~ upstream_name
             ~ ' since its last refresh:\n  ' ~ e.code ~ ': ' ~ e.what ~ '.\n  ' ~ source ~ message
             ~ '\n  fix: ' ~ e.fix | replace('<model>', model_name) ~ '.'}) }}
{% endmacro %}

{#- Before reading table_changes(t, after + 1, upto): the Delta error that read would
    raise, as an error text ('CODE: what was found'), or none. `since`: when the last
    refresh that read version `after` was logged (a timestamp read back from Spark), or
    none. Reads the table history (and, only when needed, the properties, the clock and
    the schema at version `after`). What Delta 4.4 does, checked by
    tests/test_delta_feed_errors.py:
    * start after the latest version: DELTA_CDC_START_VERSION_AFTER_LATEST. A table
      dropped and recreated with as many versions, or a RESTORE, is read by Delta without
      an error (the RESTORE as file-level deletes and inserts): the check reports both
      under the same class, so they are never read as a normal change window;
    * a version whose commit leaves delta.enableChangeDataFeed off (SET to false, UNSET,
      created without it): DELTA_MISSING_CHANGE_DATA; the version that turns it on is fine;
    * the start version committed longer than delta.deletedFileRetentionDuration ago and
      not the latest version (the latest stays readable however old):
      DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION, even without
      VACUUM (flagged a little early, so a read racing the boundary cannot fail raw);
    * a column dropped, renamed or changed (column mapping), or the table replaced with
      another schema: DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA. Delta raises it
      only when the range starts before the change; a range starting at a replacement
      is read silently with the old rows in the new schema. A replacement with the same
      schema (an upstream ivm model rebuilt) is read correctly (deletes and inserts). -#}
{% macro ivm_delta_feed_problem(up, after, upto, since, commits) %}
  {{ return(adapter.dispatch('ivm_delta_feed_problem', 'dbt_ivm')(up, after, upto, since, commits)) }}
{% endmacro %}

{% macro default__ivm_delta_feed_problem(up, after, upto, since, commits) %}
  {%- set after = after | int -%}
  {%- set upto = upto | int -%}
  {%- set start = after + 1 -%}
  {%- if start > upto + 1 -%}
    {{ return('DELTA_CDC_START_VERSION_AFTER_LATEST: start version ' ~ start ~ ' is after the latest version ' ~ upto ~ ' of ' ~ up.relation) }}
  {%- endif -%}
  {%- set versions = commits.keys() | sort -%}
  {%- if not versions or versions[0] > start -%}
    {{ return('DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION: the history of ' ~ up.relation
              ~ ' no longer reaches version ' ~ start) }}
  {%- endif -%}
  {#- recreated: version `after` of this table was committed after the last refresh read it -#}
  {%- if since is not none and after in commits and dbt_ivm._ivm_seconds_between(since, commits[after].ts) > 0 -%}
    {{ return('DELTA_CDC_START_VERSION_AFTER_LATEST: ' ~ up.relation ~ ' was recreated after the last refresh (its version ' ~ after
              ~ ' was committed at ' ~ commits[after].ts ~ ')') }}
  {%- endif -%}
  {%- set cdf = namespace(on=none) -%}
  {%- set schema = namespace(always=none, replaced=none) -%}
  {%- for v in versions if v <= upto -%}
    {%- set c = commits[v] -%}
    {%- set text = (c.params.get('properties') or c.params.get('text') or '') | string -%}
    {%- set found = modules.re.search('enableChangeDataFeed\\W+(true|false)', text, modules.re.I) -%}
    {%- set replaces = c.op.startswith('CREATE OR REPLACE') or c.op.startswith('REPLACE TABLE') -%}
    {%- if replaces or c.op in ('CREATE TABLE', 'CREATE TABLE AS SELECT') -%}
      {%- set cdf.on = found is not none and found.group(1) | lower == 'true' -%}
    {%- elif c.op == 'SET TBLPROPERTIES' and found -%}
      {%- set cdf.on = found.group(1) | lower == 'true' -%}
    {%- elif c.op == 'UNSET TBLPROPERTIES' and 'enableChangeDataFeed' in text -%}
      {%- set cdf.on = false -%}
    {%- endif -%}
    {%- if v >= start -%}
      {%- if c.op == 'RESTORE' -%}
        {{ return('DELTA_CDC_START_VERSION_AFTER_LATEST: version ' ~ v ~ ' of ' ~ up.relation ~ ' is a RESTORE (' ~ text ~ ')') }}
      {%- endif -%}
      {%- if cdf.on is sameas false -%}
        {{ return('DELTA_MISSING_CHANGE_DATA: delta.enableChangeDataFeed was off at version ' ~ v ~ ' of ' ~ up.relation ~ ' (' ~ c.op ~ ')') }}
      {%- endif -%}
      {#- as Delta: a column change at the start version itself is read in the new schema -#}
      {%- set column_change = c.op in ('RENAME COLUMN', 'DROP COLUMNS', 'CHANGE COLUMN', 'CHANGE COLUMNS', 'REPLACE COLUMNS') -%}
      {%- if v > start and column_change and schema.always is none -%}
        {%- set schema.always = 'version ' ~ v ~ ' of ' ~ up.relation ~ ' is a ' ~ c.op -%}
      {%- elif (replaces or (c.op == 'WRITE' and 'overwrite' in (c.params | string) | lower)) and schema.replaced is none -%}
        {%- set schema.replaced = v -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {#- the properties as this refresh's DESCRIBE of the table read them (the feed's detection, or the read of its columns) -#}
  {%- set props = {} -%}
  {%- if up.get('described_properties') is not none -%}
    {%- for k, v in up.described_properties.items() -%}{%- do props.update({k | lower: v | string}) -%}{%- endfor -%}
  {%- else -%}
    {%- for r in run_query('show tblproperties ' ~ up.relation).rows -%}{%- do props.update({r[0] | lower: r[1] | string}) -%}{%- endfor -%}
  {%- endif -%}
  {%- if props.get('delta.enablechangedatafeed', 'false') | lower != 'true' -%}
    {{ return('DELTA_MISSING_CHANGE_DATA: delta.enableChangeDataFeed is not enabled on ' ~ up.relation) }}
  {%- endif -%}
  {#- retention: the start version must be younger than delta.deletedFileRetentionDuration -#}
  {%- set retention = dbt_ivm._ivm_interval_seconds(props.get('delta.deletedfileretentionduration', 'interval 1 week')) -%}
  {%- if retention is not none and start in commits and start < versions | max -%}
    {%- set age = dbt_ivm._ivm_seconds_between(commits[start].ts, none) -%}
    {%- if age + [60, retention / 10] | min > retention -%}
      {{ return('DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION: version ' ~ start ~ ' of ' ~ up.relation ~ ' was committed '
                ~ age | round | int ~ ' s ago, beyond delta.deletedFileRetentionDuration ('
                ~ props.get('delta.deletedfileretentionduration', '1 week') ~ ')') }}
    {%- endif -%}
  {%- endif -%}
  {%- if schema.always -%}
    {{ return('DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA: ' ~ schema.always) }}
  {%- endif -%}
  {%- if schema.replaced is not none -%}
    {#- the schema before the replacement: at the start version (what Delta compares), or,
        for a replacement at the start version itself (which Delta reads silently in the new
        schema), at version `after` while it is still readable -#}
    {%- set before = start if schema.replaced > start else after -%}
    {%- if before == after and (after not in commits or (retention is not none
          and dbt_ivm._ivm_seconds_between(commits[after].ts, none) + [60, retention / 10] | min > retention)) -%}
      {{ return('DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA: version ' ~ schema.replaced ~ ' of ' ~ up.relation
                ~ ' replaced the table, and its schema before can no longer be read') }}
    {%- endif -%}
    {%- set was = run_query('describe query select * from ' ~ up.relation ~ ' version as of ' ~ before).rows -%}
    {%- set now = run_query('describe query select * from ' ~ up.relation).rows -%}
    {%- set a = [] -%}{%- set b = [] -%}
    {%- for r in was -%}{%- do a.append((r[0] | lower) ~ ' ' ~ (r[1] | lower)) -%}{%- endfor -%}
    {%- for r in now -%}{%- do b.append((r[0] | lower) ~ ' ' ~ (r[1] | lower)) -%}{%- endfor -%}
    {%- if a != b -%}
      {{ return('DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA: version ' ~ schema.replaced ~ ' of ' ~ up.relation
                ~ ' replaced the table with another schema ('
                ~ a | join(', ') ~ ' -> ' ~ b | join(', ') ~ ')') }}
    {%- endif -%}
  {%- endif -%}
  {{ return(none) }}
{% endmacro %}

{#- Seconds of a Delta interval property ('interval 1 week', '7 days', 'interval 2 hours 30 minutes'),
    or none when it cannot be read. -#}
{% macro _ivm_interval_seconds(text) %}
  {%- set units = {'week': 604800, 'day': 86400, 'hour': 3600, 'minute': 60, 'second': 1, 'millisecond': 0.001, 'microsecond': 0.000001} -%}
  {%- set rest = modules.re.sub('^\\s*interval\\s+', '', (text | string) | lower) -%}
  {%- set parts = modules.re.findall('(\\d+)\\s*(week|day|hour|minute|second|millisecond|microsecond)s?\\b', rest) -%}
  {%- if not parts or modules.re.sub('(\\d+)\\s*(week|day|hour|minute|second|millisecond|microsecond)s?\\b', '', rest) | trim -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set ns = namespace(total=0) -%}
  {%- for n, unit in parts -%}{%- set ns.total = ns.total + (n | int) * units[unit] -%}{%- endfor -%}
  {{ return(ns.total) }}
{% endmacro %}

{#- Seconds from timestamp `a` to timestamp `b` (none: Spark's current time), both as a query
    returned them (datetimes from the session cursor, in the same zone; strings over other
    connections are compared by Spark itself). -#}
{% macro _ivm_seconds_between(a, b) %}
  {%- if b is none -%}
    {%- set b = run_query('select current_timestamp()').rows[0][0] -%}
  {%- endif -%}
  {%- if a is string or b is string -%}
    {%- set sql = "select (unix_micros(cast('" ~ b ~ "' as timestamp)) - unix_micros(cast('" ~ a ~ "' as timestamp))) / 1e6" -%}
    {{ return(run_query(sql).rows[0][0] | float) }}
  {%- endif -%}
  {{ return((b.replace(tzinfo=none) - a.replace(tzinfo=none)).total_seconds()) }}
{% endmacro %}

{#- Before an incremental refresh: check the change feed of every Delta upstream that
    changed. Fails with the explanation, or returns the reason to rebuild in full
    (ivm_on_change_feed_error=rebuild), or none. An upstream that is another ivm model and
    was rebuilt in full since (a CREATE OR REPLACE) always means a rebuild, with that
    reason: the rebuild is the package's own doing, never an error. -#}
{% macro _ivm_check_change_feeds(model, plan, state, versions_to, settings) %}
  {%- for p in plan if p.up.get('feed') == 'delta' -%}
    {%- set after = state.last_success.versions.get(p.up.name) -%}
    {%- set upto = versions_to[p.up.name] -%}
    {%- if after != upto and after is not none and upto is not none -%}
      {#- the commits the version read kept, else those since the stored version, else all -#}
      {%- set commits = p.up.get('recent_commits') or {} -%}
      {%- if not dbt_ivm._ivm_delta_window_suffices(commits, after) -%}
        {%- set commits = dbt_ivm._ivm_delta_commits(p.up.relation, (upto | int) - (after | int) + 1) -%}
      {%- endif -%}
      {%- if not dbt_ivm._ivm_delta_window_suffices(commits, after) -%}
        {%- set commits = dbt_ivm._ivm_delta_commits(p.up.relation, none) -%}
      {%- endif -%}
      {%- set rebuilt = dbt_ivm._ivm_delta_rebuilt_at(commits, after) if p.up.get('ivm_model') else none -%}
      {%- if rebuilt is not none -%}
        {#- an ivm upstream's full build is a CREATE OR REPLACE: expected, rebuild, logged -#}
        {%- set reason = 'upstream ' ~ p.up.name ~ ' (an ivm model) was rebuilt in full at its version ' ~ rebuilt
                         ~ ', after the last refresh of this model' -%}
        {{ log('dbt_ivm: ' ~ model.name ~ ': ' ~ reason, info=true) }}
        {{ return(reason) }}
      {%- endif -%}
      {%- set problem = dbt_ivm.ivm_delta_feed_problem(p.up, after, upto, state.last_success.get('logged_at'), commits) -%}
      {%- if problem -%}
        {%- set decision = dbt_ivm._ivm_change_feed_decision(model.name, p.up.name, problem, settings.on_change_feed_error) -%}
        {%- if decision.action == 'rebuild' -%}
          {{ log('dbt_ivm: ' ~ model.name ~ ': ' ~ decision.text, info=true) }}
          {{ return(decision.text) }}
        {%- endif -%}
        {{ exceptions.raise_compiler_error(decision.text) }}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}

{#- The commits of a Delta table, {version: {'ts', 'op', 'params', 'rows'}}, from one DESCRIBE HISTORY
    (it cannot be a subquery: its columns are picked by name): the latest `limit` of them,
    or all with limit none. -#}
{% macro _ivm_delta_commits(relation, limit) %}
  {%- set history = run_query('describe history ' ~ relation ~ (' limit ' ~ limit if limit is not none else '')) -%}
  {%- set names = history.column_names | map('lower') | list -%}
  {%- set commits = {} -%}
  {%- for row in history.rows -%}
    {%- set params = row[names.index('operationparameters')] -%}
    {%- set op = row[names.index('operation')] | string -%}
    {%- do commits.update({row[names.index('version')] | int: {'ts': row[names.index('timestamp')], 'op': op,
        'params': params if params is mapping else {'text': params | string},
        'rows': dbt_ivm._ivm_delta_commit_rows(op, params, row[names.index('operationmetrics')])}}) -%}
  {%- endfor -%}
  {{ return(commits) }}
{% endmacro %}

{#- A bound on the change rows a Delta commit adds to the change data feed, from its metrics
    (the rows an append wrote, a MERGE inserted, updated and deleted, an UPDATE updated, a
    DELETE deleted; none for other operations, and 0 for those that change no data): what
    decides whether a change set is small enough to list (_ivm_changed_rows_sql). -#}
{% macro _ivm_delta_commit_rows(op, params, metrics) %}
  {%- if op in ('OPTIMIZE', 'SET TBLPROPERTIES', 'UNSET TBLPROPERTIES') -%}{{ return(0) }}{%- endif -%}
  {%- set params = dbt_ivm._ivm_as_mapping(params) -%}
  {%- set metrics = dbt_ivm._ivm_as_mapping(metrics) -%}
  {%- set counted = {'WRITE': ['numOutputRows'], 'MERGE': ['numTargetRowsInserted', 'numTargetRowsUpdated', 'numTargetRowsDeleted'],
                     'UPDATE': ['numUpdatedRows'], 'DELETE': ['numDeletedRows']}.get(op) -%}
  {#- an overwrite also deletes every row the table had -#}
  {%- if counted is none or (op == 'WRITE' and params.get('mode') != 'Append') -%}{{ return(none) }}{%- endif -%}
  {%- set n = namespace(rows=0) -%}
  {%- for name in counted -%}
    {%- if metrics.get(name) is none -%}{{ return(none) }}{%- endif -%}
    {%- set n.rows = n.rows + (metrics[name] | int) -%}
  {%- endfor -%}
  {{ return(n.rows) }}
{% endmacro %}

{#- A map column's value as a mapping: dbt's result tables hold maps as JSON text; {} when it
    is neither. -#}
{% macro _ivm_as_mapping(value) %}
  {%- if value is mapping -%}{{ return(value) }}{%- endif -%}
  {%- set parsed = fromjson(value | string, none) if value is string else none -%}
  {{ return(parsed if parsed is mapping else {}) }}
{% endmacro %}

{#- Whether the commits of versions after..latest (a limited DESCRIBE HISTORY) are enough for
    ivm_delta_feed_problem: they reach version `after` (no commit since the versions were
    fixed pushed it out of the limit), and none of the later ones creates the table or sets
    its properties. Then the change feed was on or off through the whole range as the
    properties read at the start of the refresh say, and the table's older history (which
    a long-lived table has thousands of commits of) need not be read. -#}
{% macro _ivm_delta_window_suffices(commits, after) %}
  {%- for v, c in commits.items() if v > (after | int) and (c.op.startswith('CREATE') or c.op.startswith('REPLACE')
      or c.op in ('SET TBLPROPERTIES', 'UNSET TBLPROPERTIES')) -%}
    {{ return(false) }}
  {%- endfor -%}
  {{ return((after | int) in commits) }}
{% endmacro %}

{#- The first version after `after` at which a Delta table was replaced (CREATE OR REPLACE,
    REPLACE TABLE: an ivm model's full build), or none; commits from _ivm_delta_commits. -#}
{% macro _ivm_delta_rebuilt_at(commits, after) %}
  {%- for v in commits.keys() | sort if v > (after | int) and (commits[v].op.startswith('CREATE OR '
      'REPLACE') or commits[v].op.startswith('REPLACE TABLE')) -%}
    {{ return(v) }}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}
