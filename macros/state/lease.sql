{#- The refresh lease: at most one refresh of a model at a time, across processes and
    machines. A lease generation is an empty Hive-format table in the state schema,
    __ivm_lease__<schema>__<table>__g<n>. The newest generation decides: odd means taken by
    the holder named in its properties (refresh id, since when, UTC), even means freed.
    Taking the lease is CREATE TABLE IF NOT EXISTS of the next odd generation, which the
    metastore performs atomically (of two creators exactly one creates it, the other is told
    it exists and does nothing), followed by reading that table's holder (one SHOW TABLE
    EXTENDED, which also shows whether a newer generation exists). A refresh frees
    its lease with its 'success' row in the refresh log, which names the generation it
    took (no statement of its own); one that fails is freed by creating the even
    generation after it (on-run-end, ivm_release_lease). A taken generation whose holder
    has neither finished nor freed it for longer than ivm_lease_timeout is presumed dead
    (its holder was killed) and taken over the same way. Properties are only ever read from
    a table by its exact name, and a generation is dropped only when four newer ones exist,
    so no reader sees a table vanish under it. -#}

{% macro _ivm_lease_prefix(schema, identifier) %}
  {%- set key = (schema ~ '__' ~ identifier) | lower -%}
  {{ return('__ivm_lease__' ~ modules.re.sub('[^a-z0-9_]', '_', key) ~ '__g') }}
{% endmacro %}

{#- {prefix: [generations]} of the lease tables whose names match the SHOW TABLES pattern
    (`*` is any string); names only, so tables dropped meanwhile cannot fail it. -#}
{% macro ivm_lease_generations(pattern) %}
  {{ return(adapter.dispatch('ivm_lease_generations', 'dbt_ivm')(pattern)) }}
{% endmacro %}

{% macro default__ivm_lease_generations(pattern) %}
  {%- set schema = dbt_ivm.ivm_refresh_log_relation().schema -%}
  {%- set found = {} -%}
  {%- for r in run_query("show tables in " ~ schema ~ " like '" ~ pattern ~ "'").rows -%}
    {%- set name = modules.re.match('(__ivm_lease__.*__g)([0-9]+)$', r[1]) -%}
    {%- if name -%}
      {%- do found.setdefault(name.group(1), []).append(name.group(2) | int) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(found) }}
{% endmacro %}

{#- The newest lease generation of a table (0: none yet, free). -#}
{% macro _ivm_lease_top(prefix) %}
  {{ return(dbt_ivm.ivm_lease_generations(prefix ~ '*').get(prefix, [0]) | max) }}
{% endmacro %}

{#- {generation: {'holder', 'since' (datetime, UTC)}} of those of `generations` of a
    table's leases (prefix) that exist, read by their exact names in one SHOW TABLE
    EXTENDED (whose table information lists the properties, sorted by key). also: none, or
    {'identifier': one more table of the state schema} for the same statement to list,
    updated with its 'information' text when it exists. -#}
{% macro ivm_lease_holders(prefix, generations, also=none) %}
  {{ return(adapter.dispatch('ivm_lease_holders', 'dbt_ivm')(prefix, generations, also)) }}
{% endmacro %}

{% macro default__ivm_lease_holders(prefix, generations, also=none) %}
  {%- set names = [] -%}
  {%- for g in generations -%}{%- do names.append(prefix ~ g) -%}{%- endfor -%}
  {%- if also is not none -%}{%- do names.append(also.identifier | lower) -%}{%- endif -%}
  {%- set found = {} -%}
  {%- for r in run_query('show table extended in ' ~ dbt_ivm.ivm_refresh_log_relation().schema ~ " like '" ~ names | join('|') ~ "'").rows -%}
    {%- set generation = modules.re.fullmatch(modules.re.escape(prefix) ~ '([0-9]+)', r[1] | lower) -%}
    {%- if generation -%}
      {%- set held = modules.re.search('dbt_ivm[.]holder=(.*), dbt_ivm[.]since=([0-9T:-]+)', r[3]) -%}
      {%- do found.update({generation.group(1) | int: {
          'holder': held.group(1) if held else 'unknown',
          'since': modules.datetime.datetime.strptime(held.group(2) if held else '1970-01-01T00:00:00', '%Y-%m-%dT%H:%M:%S')}}) -%}
    {%- elif also is not none and r[1] | lower == also.identifier | lower and (r[2] | string | lower) not in ('true', '1') -%}
      {%- do also.update({'information': r[3] | string}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(found) }}
{% endmacro %}

{#- {'holder', 'since'} of one lease generation ('unknown' when it does not exist). -#}
{% macro _ivm_lease_holder(prefix, generation) %}
  {{ return(dbt_ivm.ivm_lease_holders(prefix, [generation]).get(generation,
      {'holder': 'unknown', 'since': modules.datetime.datetime(1970, 1, 1)})) }}
{% endmacro %}

{#- Create lease generation n (no-op when it exists); properties name the creator. -#}
{% macro _ivm_create_lease(prefix, generation, holder) %}
  {%- do run_query('create table if not exists ' ~ dbt_ivm.ivm_refresh_log_relation().schema ~ '.' ~ prefix ~ generation
      ~ ' (holder string) stored as textfile tblproperties (' ~ "'dbt_ivm.holder' = " ~ dbt_ivm._ivm_string_literal(holder)
      ~ ", 'dbt_ivm.since' = '" ~ modules.datetime.datetime.utcnow().strftime('%Y-%m-%dT%H:%M:%S') ~ "')") -%}
{% endmacro %}

{#- Whether the read-back of a lease taken at once also lists the table (see
    ivm_acquire_lease): a parquet table in the state schema, its name one the pattern can
    carry. A Delta table's catalog entry holds neither its columns nor its properties. -#}
{% macro _ivm_lists_with_lease(target_relation, settings) %}
  {{ return(settings.get('file_format') != 'delta'
      and (target_relation.schema | lower) == (dbt_ivm.ivm_refresh_log_relation().schema | lower)
      and modules.re.fullmatch('[a-z0-9_]+', target_relation.identifier | lower) is not none) }}
{% endmacro %}

{#- Take the lease of a model's table for refresh_id, waiting up to settings.lease_wait
    seconds for a running refresh; fails naming the holder when it stays busy. finished:
    the generation that the last 'success' row of the state the refresh read freed, or
    none. Returns {'prefix', 'generation', 'fresh', 'listed'}: fresh when the lease was taken
    at the first try as the generation after that very one, and no newer one exists, so no
    refresh can have logged anything since that state was read: another one would have
    taken that same generation, or a newer one, which exists only after it (generations are
    taken one after the other, each after the newest seen, and dropped only when four newer
    exist). listed: the table's SHOW TABLE EXTENDED information, read under the lease by the
    statement that read it back (see _ivm_lists_with_lease), or none. -#}
{% macro ivm_acquire_lease(model, target_relation, refresh_id, settings, finished=none) %}
  {{ return(adapter.dispatch('ivm_acquire_lease', 'dbt_ivm')(model, target_relation, refresh_id, settings, finished)) }}
{% endmacro %}

{% macro default__ivm_acquire_lease(model, target_relation, refresh_id, settings, finished=none) %}
  {%- set prefix = dbt_ivm._ivm_lease_prefix(target_relation.schema, target_relation.identifier) -%}
  {%- set deadline = modules.datetime.datetime.utcnow() + modules.datetime.timedelta(seconds=settings.lease_wait) -%}
  {%- set state = {'lease': none, 'holder': none, 'done': false} -%}
  {#- at once: the generation after the one the state's last success freed, when it is the
      newest after this refresh created it (it and the two that would follow it are read) -#}
  {%- if finished is not none -%}
    {%- set next = finished | int + 2 -%}
    {%- do dbt_ivm._ivm_create_lease(prefix, next, refresh_id) -%}
    {%- set also = {'identifier': target_relation.identifier} if dbt_ivm._ivm_lists_with_lease(target_relation, settings) else none -%}
    {%- set held = dbt_ivm.ivm_lease_holders(prefix, [next, next + 1, next + 2], also) -%}
    {%- if held.keys() | list == [next] and held[next].holder == refresh_id -%}
      {%- do state.update({'lease': {'prefix': prefix, 'generation': next, 'fresh': true,
          'listed': (also or {}).get('information')}, 'done': true}) -%}
    {%- endif -%}
  {%- endif -%}
  {#- otherwise each attempt reads the newest generation and takes the lease when it is free
      or dead; attempts are 5 s apart -#}
  {%- for attempt in range(2 + (settings.lease_wait / 5) | round(0, 'ceil') | int) if not state.done -%}
    {%- if attempt > 0 -%}
      {%- do run_query("select reflect('java.lang.Thread', 'sleep', 5000L)") -%}
    {%- endif -%}
    {%- set top = dbt_ivm._ivm_lease_top(prefix) -%}
    {#- a taken generation is free once its holder logged success, asked of the refresh log -#}
    {%- set current = none -%}
    {%- if top is odd -%}
      {%- set current = dbt_ivm._ivm_lease_holder(prefix, top) -%}
      {%- if dbt_ivm._ivm_lease_finished(model.unique_id, current.holder) -%}{%- set current = none -%}{%- endif -%}
    {%- endif -%}
    {%- set dead = current is not none
        and (modules.datetime.datetime.utcnow() - current.since).total_seconds() > settings.lease_timeout -%}
    {%- if current is none or dead -%}
      {%- set generation = top + (2 if top is odd else 1) -%}
      {%- do dbt_ivm._ivm_create_lease(prefix, generation, refresh_id) -%}
      {%- set winner = dbt_ivm._ivm_lease_holder(prefix, generation) -%}
      {%- if winner.holder == refresh_id -%}
        {%- do state.update({'lease': {'prefix': prefix, 'generation': generation, 'fresh': false, 'listed': none},
            'done': true}) -%}
        {%- if dead -%}
          {{ log('dbt_ivm: ' ~ model.name ~ ': took over the refresh lease of ' ~ current.holder ~ ' (held since ' ~ current.since
                 ~ ' UTC, longer than ivm_lease_timeout = ' ~ settings.lease_timeout ~ ' s: presumed dead)', info=true) }}
        {%- endif -%}
      {%- else -%}
        {%- set current = winner -%}
      {%- endif -%}
    {%- endif -%}
    {%- if not state.lease -%}
      {%- do state.update({'holder': current, 'done': modules.datetime.datetime.utcnow() >= deadline}) -%}
      {%- if attempt == 0 and settings.lease_wait > 0 -%}
        {{ log('dbt_ivm: ' ~ model.name ~ ': waiting up to ' ~ settings.lease_wait ~ ' s for the running refresh '
               ~ current.holder ~ ' to finish', info=true) }}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if not state.lease -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': another refresh of " ~ target_relation ~ ' is running: '
        ~ state.holder.holder ~ ' (since ' ~ state.holder.since ~ ' UTC). Nothing was changed. Run again when it has finished, '
        ~ 'or set ivm_lease_wait (seconds) to wait for it. If that refresh was killed, its lease expires after ivm_lease_timeout ('
        ~ settings.lease_timeout ~ ' s), or release it now with: dbt run-operation dbt_ivm.ivm_release_lease --args "{model: '
        ~ model.name ~ '}"') }}
  {%- endif -%}
  {{ return(state.lease) }}
{% endmacro %}

{#- Whether the refresh `holder` (a refresh id) of model_id logged its 'success' row, which
    frees the lease it took (its partition of the refresh log: one row or none). -#}
{% macro _ivm_lease_finished(model_id, holder) %}
  {%- set log = dbt_ivm.ivm_refresh_log_relation() -%}
  {{ return(run_query('select count(*) from ' ~ log ~ ' where model = ' ~ dbt_ivm._ivm_string_literal(model_id)
      ~ ' and event = ' ~ dbt_ivm._ivm_string_literal('success:' ~ holder)).rows[0][0] > 0) }}
{% endmacro %}

{#- Free lease generation n (held by `by`) by creating the even generation after it, for a
    holder that cannot log its success (it failed or was killed); when a newer holder took
    it over, its generation is higher and this changes nothing. -#}
{% macro _ivm_free_lease(prefix, generation, by) %}
  {%- do dbt_ivm._ivm_create_lease(prefix, generation + 1, 'released:' ~ by) -%}
{% endmacro %}

{#- Free the taken leases (odd newest generation) in found ({prefix: [generations]}, from
    ivm_lease_generations) whose holders are (own) or are not (not own) refreshes of this
    invocation; only: the prefixes to consider (none: all). -#}
{% macro _ivm_free_taken_leases(found, own, only=none) %}
  {%- for prefix, generations in found.items() if only is none or prefix in only -%}
    {%- set top = generations | max -%}
    {%- if top is odd and dbt_ivm._ivm_lease_holder(prefix, top).holder.startswith(invocation_id ~ ':') == own -%}
      {%- do dbt_ivm._ivm_free_lease(prefix, top, invocation_id) -%}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}

{#- on-run-end: release the leases still held by this invocation's failed ivm refreshes, and
    drop every lease generation that has four newer ones. A run whose ivm refreshes were
    all no-ops (their result's message) took no lease and created no generation: nothing to do. -#}
{% macro ivm_on_run_end(results) %}
  {%- set ivm = results | selectattr('node.config.materialized', 'equalto', 'ivm') | list -%}
  {%- set failed = [] -%}
  {%- for r in ivm if r.status in ('error', 'fail') -%}
    {%- do failed.append(dbt_ivm._ivm_lease_prefix(r.node.schema, r.node.alias)) -%}
  {%- endfor -%}
  {#- ivm models ran, so on-run-start (or, with the hooks off, the materialization) created the state schema -#}
  {%- if execute and ivm | rejectattr('message', 'equalto', dbt_ivm._ivm_noop_message()) | list -%}
    {%- set schema = dbt_ivm.ivm_refresh_log_relation().schema -%}
    {%- set found = dbt_ivm.ivm_lease_generations('__ivm_lease__*') -%}
    {%- do dbt_ivm._ivm_free_taken_leases(found, true, failed) -%}
    {%- for prefix, generations in found.items() -%}
      {%- set top = generations | max -%}
      {%- for g in generations if g <= top - 4 -%}
        {%- do run_query('drop table if exists ' ~ schema ~ '.' ~ prefix ~ g) -%}
      {%- endfor -%}
    {%- endfor -%}
  {%- endif -%}
{% endmacro %}

{#- Operation: release the lease of a model whose refresh was killed, so the next run need
    not wait for ivm_lease_timeout. dbt run-operation dbt_ivm.ivm_release_lease --args "{model: name}" -#}
{% macro ivm_release_lease(model) %}
  {%- set node = graph.nodes.values() | selectattr('resource_type', 'equalto', 'model') | selectattr('name', 'equalto', model) | first -%}
  {%- if not node -%}
    {{ exceptions.raise_compiler_error("ivm_release_lease: no model named '" ~ model ~ "' in this project.") }}
  {%- endif -%}
  {%- set prefix = dbt_ivm._ivm_lease_prefix(node.schema, node.alias) -%}
  {%- set top = dbt_ivm._ivm_lease_top(prefix) -%}
  {%- set lease = dbt_ivm._ivm_lease_holder(prefix, top) if top is odd else none -%}
  {%- if lease is not none and not dbt_ivm._ivm_lease_finished(node.unique_id, lease.holder) -%}
    {%- do dbt_ivm._ivm_free_lease(prefix, top, invocation_id) -%}
    {{ log('dbt_ivm: released the refresh lease of ' ~ model ~ ' held by ' ~ lease.holder ~ ' since ' ~ lease.since ~ ' UTC', info=true) }}
  {%- else -%}
    {{ log('dbt_ivm: ' ~ model ~ ' has no refresh lease held', info=true) }}
  {%- endif -%}
{% endmacro %}
