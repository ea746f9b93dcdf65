{#- The refresh lease: at most one refresh of a model at a time, across processes and
    machines. A lease is an empty Hive-format table in the state schema,
    __ivm_lease__<schema>__<table>__g<generation>, whose properties name its holder (the
    refresh id) and since when (UTC). Taking it is CREATE TABLE IF NOT EXISTS, which the
    metastore performs atomically (of two creators exactly one creates the table, the other
    is told it exists and does nothing), followed by reading who holds it. A lease older
    than ivm_lease_timeout is presumed dead (its holder was killed) and taken over by
    creating the next generation the same way; the newest generation is the lease. The
    refresh drops its lease at its end, and the on-run-end hook drops the leases of the
    refreshes of its invocation that failed. -#}

{% macro ivm_lease_prefix(target_relation) %}
  {%- set key = (target_relation.schema ~ '__' ~ target_relation.identifier) | lower -%}
  {{ return('__ivm_lease__' ~ modules.re.sub('[^a-z0-9_]', '_', key) ~ '__g') }}
{% endmacro %}

{#- {generation: {'holder', 'since' (datetime, UTC), 'name'}} of the leases whose names match
    the pattern (SHOW TABLES syntax: * is any string). -#}
{% macro ivm_read_leases(pattern) %}
  {{ return(adapter.dispatch('ivm_read_leases', 'dbt_ivm')(pattern)) }}
{% endmacro %}

{% macro default__ivm_read_leases(pattern) %}
  {%- set schema = dbt_ivm.ivm_refresh_log_relation().schema -%}
  {%- set found = {} -%}
  {%- for r in run_query("show table extended in " ~ schema ~ " like '" ~ pattern ~ "'").rows -%}
    {%- set holder = modules.re.search('dbt_ivm\\.holder=([^,\\]]*)', r[3]) -%}
    {%- set since = modules.re.search('dbt_ivm\\.since=([0-9T:-]*)', r[3]) -%}
    {%- set generation = modules.re.search('__g([0-9]+)$', r[1]) -%}
    {%- if holder and since and generation -%}
      {%- do found.update({generation.group(1) | int: {'holder': holder.group(1), 'name': r[1],
          'since': modules.datetime.datetime.strptime(since.group(1), '%Y-%m-%dT%H:%M:%S')}}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(found) }}
{% endmacro %}

{#- Take the lease of a model's table for refresh_id, waiting up to settings.lease_wait
    seconds for a running refresh; fails naming the holder when it stays busy. Returns
    {'name', 'took_over': the dead holder it replaced or none}. -#}
{% macro ivm_acquire_lease(model, target_relation, refresh_id, settings) %}
  {{ return(adapter.dispatch('ivm_acquire_lease', 'dbt_ivm')(model, target_relation, refresh_id, settings)) }}
{% endmacro %}

{% macro default__ivm_acquire_lease(model, target_relation, refresh_id, settings) %}
  {%- set schema = dbt_ivm.ivm_refresh_log_relation().schema -%}
  {%- set prefix = dbt_ivm.ivm_lease_prefix(target_relation) -%}
  {%- set deadline = modules.datetime.datetime.utcnow() + modules.datetime.timedelta(seconds=settings.lease_wait) -%}
  {%- set state = {'lease': none, 'holder': none, 'done': false} -%}
  {#- each attempt reads the leases and takes a free or dead one; attempts are 5 s apart -#}
  {%- for attempt in range(2 + (settings.lease_wait / 5) | round(0, 'ceil') | int) if not state.done -%}
    {%- if attempt > 0 -%}
      {%- do run_query("select reflect('java.lang.Thread', 'sleep', 5000L)") -%}
    {%- endif -%}
    {%- set leases = dbt_ivm.ivm_read_leases(prefix ~ '*') -%}
    {%- set top = leases.keys() | max if leases else 0 -%}
    {%- set current = leases.get(top) -%}
    {%- set now = modules.datetime.datetime.utcnow() -%}
    {%- set dead = current is not none and (now - current.since).total_seconds() > settings.lease_timeout -%}
    {%- if current is none or dead -%}
      {%- set name = prefix ~ (top + 1) -%}
      {%- do run_query('create table if not exists ' ~ schema ~ '.' ~ name ~ ' (holder string) stored as textfile tblproperties ('
          ~ "'dbt_ivm.holder' = " ~ dbt_ivm.ivm_string_literal(refresh_id) ~ ", 'dbt_ivm.since' = '" ~ now.strftime('%Y-%m-%dT%H:%M:%S') ~ "')") -%}
      {%- set winner = dbt_ivm.ivm_read_leases(name).get(top + 1) -%}
      {%- if winner and winner.holder == refresh_id -%}
        {%- for older in leases.values() -%}
          {%- do run_query('drop table if exists ' ~ schema ~ '.' ~ older.name) -%}
        {%- endfor -%}
        {%- do state.update({'lease': {'name': schema ~ '.' ~ name, 'took_over': current if dead else none}, 'done': true}) -%}
        {%- if dead -%}
          {{ log('dbt_ivm: ' ~ model.name ~ ': took over the refresh lease of ' ~ current.holder ~ ' (held since ' ~ current.since
                 ~ ' UTC, longer than ivm_lease_timeout = ' ~ settings.lease_timeout ~ ' s: presumed dead)', info=true) }}
        {%- endif -%}
      {%- else -%}
        {%- set current = winner or current -%}
      {%- endif -%}
    {%- endif -%}
    {%- if not state.lease -%}
      {%- do state.update({'holder': current, 'done': modules.datetime.datetime.utcnow() >= deadline}) -%}
      {%- if attempt == 0 and settings.lease_wait > 0 -%}
        {{ log('dbt_ivm: ' ~ model.name ~ ': waiting up to ' ~ settings.lease_wait ~ ' s for the running refresh '
               ~ (current.holder if current else '') ~ ' to finish', info=true) }}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if not state.lease -%}
    {%- set holder = state.holder.holder ~ ' (since ' ~ state.holder.since ~ ' UTC)' if state.holder else 'another refresh' -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': another refresh of " ~ target_relation ~ ' is running: ' ~ holder
        ~ '. Nothing was changed. Run again when it has finished, or set ivm_lease_wait (seconds) to wait for it. If that refresh was killed, '
        ~ 'its lease expires after ivm_lease_timeout (' ~ settings.lease_timeout ~ ' s), or release it now with: '
        ~ 'dbt run-operation dbt_ivm.ivm_release_lease --args "{model: ' ~ model.name ~ '}"') }}
  {%- endif -%}
  {{ return(state.lease) }}
{% endmacro %}

{#- The end of a refresh: drop its lease (a no-op when a newer holder took it over). -#}
{% macro ivm_drop_lease(lease) %}
  {%- if lease and lease.get('name') -%}
    {%- do run_query('drop table if exists ' ~ lease.name) -%}
  {%- endif -%}
{% endmacro %}

{#- on-run-end: drop the leases of this invocation's refreshes that failed before their end. -#}
{% macro ivm_on_run_end() %}
  {%- if execute and graph.nodes.values() | selectattr('config.materialized', 'equalto', 'ivm') | list -%}
    {%- set schema = dbt_ivm.ivm_refresh_log_relation().schema -%}
    {%- if adapter.get_relation(database=none, schema=schema, identifier='__ivm_refresh_log') is not none -%}
      {%- for lease in dbt_ivm.ivm_read_leases('__ivm_lease__*').values() if lease.holder.startswith(invocation_id ~ ':') -%}
        {%- do run_query('drop table if exists ' ~ schema ~ '.' ~ lease.name) -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endif -%}
{% endmacro %}

{#- Operation: release the lease of a model whose refresh was killed, so the next run need
    not wait for ivm_lease_timeout. dbt run-operation dbt_ivm.ivm_release_lease --args "{model: name}" -#}
{% macro ivm_release_lease(model) %}
  {%- set node = graph.nodes.values() | selectattr('resource_type', 'equalto', 'model') | selectattr('name', 'equalto', model) | first -%}
  {%- if not node -%}
    {{ exceptions.raise_compiler_error("ivm_release_lease: no model named '" ~ model ~ "' in this project.") }}
  {%- endif -%}
  {%- set relation = api.Relation.create(schema=node.schema, identifier=node.alias, type='table') -%}
  {%- set leases = dbt_ivm.ivm_read_leases(dbt_ivm.ivm_lease_prefix(relation) ~ '*') -%}
  {%- for g, lease in leases.items() -%}
    {%- do run_query('drop table if exists ' ~ dbt_ivm.ivm_refresh_log_relation().schema ~ '.' ~ lease.name) -%}
    {{ log('dbt_ivm: released the refresh lease of ' ~ model ~ ' held by ' ~ lease.holder ~ ' since ' ~ lease.since ~ ' UTC', info=true) }}
  {%- endfor -%}
  {%- if not leases -%}
    {{ log('dbt_ivm: ' ~ model ~ ' has no refresh lease', info=true) }}
  {%- endif -%}
{% endmacro %}
