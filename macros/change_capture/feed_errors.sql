{#- Delta change-feed errors: what happened, and what the model does about it
    (config ivm_on_change_feed_error: 'fail' with an explanation, or 'rebuild' in full,
    logged as the refresh's reason). dbt's Jinja cannot catch a failed query, so a refresh
    checks the table history before it reads table_changes() (ivm_delta_feed_problem) and
    names the Delta error the read would raise; the same classifier also reads any
    error text that contains one of these error classes. -#}

{% macro ivm_change_feed_errors() %}
  {{ return({
    'DELTA_CDC_START_VERSION_AFTER_LATEST': {
      'what': 'the version stored by the last refresh is newer than the latest version of the table (the table was recreated or restored)',
      'fix': 'rebuild the model: dbt run --full-refresh -s <model>, or set ivm_on_change_feed_error: rebuild'},
    'DELTA_MISSING_CHANGE_DATA': {
      'what': 'change data was not recorded for part of the versions since the last refresh (delta.enableChangeDataFeed was off)',
      'fix': "enable it for good (ALTER TABLE <t> SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')), then rebuild the model once: dbt run --full-refresh -s <model>"},
    'DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION': {
      'what': 'the last refresh is older than the retention of the table (delta.deletedFileRetentionDuration, 7 days by default; Delta >= 4.1 refuses such change reads even without VACUUM)',
      'fix': 'refresh more often than the retention, or raise delta.deletedFileRetentionDuration on the upstream; now rebuild: dbt run --full-refresh -s <model>, or set ivm_on_change_feed_error: rebuild'},
    'DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE': {
      'what': 'the schema of the table changed incompatibly (columns renamed, dropped or retyped, or the table replaced) since the last refresh',
      'fix': 'rebuild the model on the new schema: dbt run --full-refresh -s <model>, or set ivm_on_change_feed_error: rebuild'},
  }) }}
{% endmacro %}

{#- The Delta change-feed error class named in an error text, with what it means and what
    to do: {'code', 'what', 'fix'}, or none for any other text. -#}
{% macro ivm_classify_change_feed_error(message) %}
  {%- set errors = dbt_ivm.ivm_change_feed_errors() -%}
  {%- for code in errors | sort(reverse=true) if code in (message | string) -%}
    {{ return({'code': code, 'what': errors[code].what, 'fix': errors[code].fix}) }}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}

{#- What a refresh does about a change-feed error text of upstream `upstream_name`:
    {'action': 'fail' | 'rebuild' | 'unknown', 'text': the explanation or the reason to log}. -#}
{% macro ivm_change_feed_decision(model_name, upstream_name, message, on_error) %}
  {%- set e = dbt_ivm.ivm_classify_change_feed_error(message) -%}
  {%- if e is none -%}
    {{ return({'action': 'unknown', 'text': message}) }}
  {%- endif -%}
  {%- if on_error == 'rebuild' -%}
    {{ return({'action': 'rebuild', 'text': 'change feed of ' ~ upstream_name ~ ' unreadable (' ~ e.code ~ ': ' ~ e.what ~ '); ivm_on_change_feed_error=rebuild'}) }}
  {%- endif -%}
  {{ return({'action': 'fail', 'text': "Model '" ~ model_name ~ "' cannot read the changes of upstream " ~ upstream_name ~ ' since its last refresh:\n  ' ~ e.code ~ ': ' ~ e.what ~ '.\n  Delta said: ' ~ message ~ '\n  fix: ' ~ e.fix | replace('<model>', model_name) ~ '.'}) }}
{% endmacro %}

{#- Before reading table_changes(t, after + 1, upto): the Delta error that read would
    raise, as an error text, or none. Reads the table history and properties. -#}
{% macro ivm_delta_feed_problem(up, after, upto) %}
  {{ return(adapter.dispatch('ivm_delta_feed_problem', 'dbt_ivm')(up, after, upto)) }}
{% endmacro %}

{% macro default__ivm_delta_feed_problem(up, after, upto) %}
  {%- if after is none or upto is none -%}{{ return(none) }}{%- endif -%}
  {%- set start = (after | int) + 1 -%}
  {%- if start > (upto | int) + 1 -%}
    {{ return('DELTA_CDC_START_VERSION_AFTER_LATEST: start version ' ~ start ~ ' is after the latest version ' ~ upto ~ ' of ' ~ up.relation) }}
  {%- endif -%}
  {#- DESCRIBE cannot be a subquery: read the whole history and pick the columns by name -#}
  {%- set history = run_query('describe history ' ~ up.relation) -%}
  {%- set names = history.column_names | map('lower') | list -%}
  {%- set rows = [] -%}
  {%- for row in history.rows -%}
    {%- do rows.append([row[names.index('version')] | int, row[names.index('timestamp')], row[names.index('operation')] | string, row[names.index('operationparameters')] | string]) -%}
  {%- endfor -%}
  {%- set ns = namespace(earliest=none, start_ts=none) -%}
  {%- for r in rows -%}
    {%- if ns.earliest is none or r[0] < ns.earliest -%}{%- set ns.earliest = r[0] -%}{%- endif -%}
    {%- if r[0] == start -%}{%- set ns.start_ts = r[1] -%}{%- endif -%}
    {%- if r[0] >= start and r[2] in ('RENAME COLUMN', 'DROP COLUMNS', 'CHANGE COLUMN', 'REPLACE COLUMNS', 'CREATE OR REPLACE TABLE', 'REPLACE TABLE', 'CREATE OR REPLACE TABLE AS SELECT', 'REPLACE TABLE AS SELECT', 'RESTORE') -%}
      {{ return('DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE: version ' ~ r[0] ~ ' of ' ~ up.relation ~ ' is a ' ~ r[2]) }}
    {%- endif -%}
    {%- if r[0] >= start and r[2] == 'SET TBLPROPERTIES' and 'enableChangeDataFeed' in (r[3] or '') -%}
      {{ return('DELTA_MISSING_CHANGE_DATA: version ' ~ r[0] ~ ' of ' ~ up.relation ~ ' changed delta.enableChangeDataFeed') }}
    {%- endif -%}
  {%- endfor -%}
  {%- if ns.earliest is none or ns.earliest > (after | int) -%}
    {{ return('DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION: the history of ' ~ up.relation ~ ' no longer reaches version ' ~ start) }}
  {%- endif -%}
  {%- set props = {} -%}
  {%- for r in run_query('show tblproperties ' ~ up.relation).rows -%}{%- do props.update({r[0] | lower: r[1] | string}) -%}{%- endfor -%}
  {%- if props.get('delta.enablechangedatafeed', 'false') | lower != 'true' -%}
    {{ return('DELTA_MISSING_CHANGE_DATA: delta.enableChangeDataFeed is not enabled on ' ~ up.relation) }}
  {%- endif -%}
  {%- set m = modules.re.match('^\\s*(?:interval\\s+)?(\\d+)\\s+(week|day|hour|minute)s?\\s*$', props.get('delta.deletedfileretentionduration', 'interval 1 week') | lower) -%}
  {%- if m and ns.start_ts is not none -%}
    {%- set unit = {'week': 604800, 'day': 86400, 'hour': 3600, 'minute': 60}[m.group(2)] -%}
    {%- set age = (modules.datetime.datetime.utcnow() - ns.start_ts.replace(tzinfo=none)).total_seconds() if ns.start_ts is not string else 0 -%}
    {%- if age > (m.group(1) | int) * unit -%}
      {{ return('DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION: version ' ~ start ~ ' of ' ~ up.relation ~ ' is older than delta.deletedFileRetentionDuration') }}
    {%- endif -%}
  {%- endif -%}
  {{ return(none) }}
{% endmacro %}

{#- Before an incremental refresh: check the change feed of every Delta upstream that
    changed. Fails with the explanation, or returns the reason to rebuild in full
    (ivm_on_change_feed_error=rebuild), or none. An upstream that is another ivm model and
    was rebuilt in full (CREATE OR REPLACE) always means a rebuild, with that reason. -#}
{% macro ivm_check_change_feeds(model, plan, state, versions_to, settings) %}
  {%- for p in plan if p.up.get('feed') == 'delta' -%}
    {%- set after = state.last_success.versions.get(p.up.name) -%}
    {%- set upto = versions_to[p.up.name] -%}
    {%- if after != upto -%}
      {%- set problem = dbt_ivm.ivm_delta_feed_problem(p.up, after, upto) -%}
      {%- if problem and p.up.get('ivm_model') and 'DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE' in problem -%}
        {#- an ivm upstream's full build is a CREATE OR REPLACE: expected, rebuild -#}
        {%- set reason = 'upstream ' ~ p.up.name ~ ' (an ivm model) was rebuilt in full since the last refresh of this model (' ~ problem ~ ')' -%}
        {{ log('dbt_ivm: ' ~ model.name ~ ': ' ~ reason, info=true) }}
        {{ return(reason) }}
      {%- endif -%}
      {%- if problem -%}
        {%- set decision = dbt_ivm.ivm_change_feed_decision(model.name, p.up.name, problem, settings.on_change_feed_error) -%}
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
