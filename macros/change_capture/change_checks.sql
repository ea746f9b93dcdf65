{#- Checks of the change data a refresh reads, made inside the statements that read it
    (the netting aggregation, the version query), so they cost no extra scan. A violation
    is a named error and nothing is applied: the refresh stops before its 'started' row. -#}

{#- The change data errors: one entry per code, with why it cannot be applied and the fix. -#}
{% macro ivm_change_data_errors() %}
  {{ return({
    'IVM060': {'what': 'change row with an unknown _change_type',
        'why': 'only insert, delete, update_preimage and update_postimage say what happened to a row',
        'fix': 'write one of the four change types; correct or delete the rows shown, then dbt run'},
    'IVM061': {'what': 'change row without a _commit_version (NULL)',
        'why': 'a row without a version belongs to no refresh window, so it would never be applied',
        'fix': 'give the rows shown the version of the commit that wrote them, then dbt run'},
    'IVM062': {'what': 'change row with NULL in a unique_key column',
        'why': 'a row key identifies one upstream row; a NULL key identifies none',
        'fix': 'declare a unique_key whose columns are never NULL, or fix the rows shown; then dbt run --full-refresh'},
    'IVM063': {'what': 'update_postimage without its update_preimage in the same version (or the reverse)',
        'why': 'an update must say which row it replaced; a lone postimage would be applied as a second row',
        'fix': 'log every update as an update_preimage and an update_postimage row with the same _commit_version, then dbt run'},
    'IVM064': {'what': 'unique_key not unique: the changes of one key do not alternate between an old and a new row',
        'why': 'two rows with one key (inserted twice, or deleted twice) cannot be told apart, so deleting one would delete both',
        'fix': 'declare a unique_key that is unique in the upstream (add columns to it), then dbt run --full-refresh'},
    'IVM065': {'what': 'upstream version went backwards since the last refresh',
        'why': 'the change log was recreated, truncated or restored, so the changes since the stored version are gone',
        'fix': 'rebuild the model from the upstream as it is now: dbt run --full-refresh -s <model>'},
    'IVM066': {'what': 'upstream column dropped that the model reads',
        'why': 'the model SQL no longer matches its upstream',
        'fix': 'change the model so it does not read the dropped column (or restore the column), then dbt run'},
  }) }}
{% endmacro %}

{#- The error text of a change data violation of model `model_name` in upstream `upstream`. -#}
{% macro _ivm_change_data_error(model_name, code, upstream, detail) %}
  {%- set e = dbt_ivm.ivm_change_data_errors()[code] -%}
  {{ return("Model '" ~ model_name ~ "', upstream " ~ upstream ~ ': ' ~ code ~ ' ' ~ e.what ~ '.\n  ' ~ detail ~ '\n  why: ' ~ e.why
            ~ '.\n  Nothing was applied. fix: ' ~ e.fix | replace('<model>', model_name) ~ '.') }}
{% endmacro %}

{#- SQL over the netting aggregation's columns (see ivm_netted_changes_sql): the first
    violation of one key's change rows as 'IVM06x <detail>', or NULL. `first_new` and
    `last_new` say whether the first and last image are new rows, `key_null` whether the
    key holds a NULL. Without violations a key's rows alternate between old and new
    images, so (new images - old images) = last_new - (not first_new). -#}
{% macro _ivm_change_problem_sql(first_new, last_new, key_null) %}
  {%- set sql -%}
case
  when __ivm_c_bad_type is not null then concat('IVM060 _change_type ', __ivm_c_bad_type, ' in key ', __ivm_c_key, ', versions ', __ivm_c_versions)
  when {{ key_null }} then concat('IVM062 key ', __ivm_c_key, ', versions ', __ivm_c_versions)
  when __ivm_c_post != __ivm_c_pre or __ivm_c_update_versions != 0
    then concat('IVM063 key ', __ivm_c_key, ', versions ', __ivm_c_versions, ': ', __ivm_c_post, ' postimage(s), ', __ivm_c_pre, ' preimage(s)')
  when __ivm_c_new - __ivm_c_old != (case when {{ last_new }} then 1 else 0 end) - (case when {{ first_new }} then 0 else 1 end)
    then concat('IVM064 key ', __ivm_c_key, ', versions ', __ivm_c_versions, ': ', __ivm_c_new, ' new row(s) and ', __ivm_c_old,
                ' old row(s) (insert/update_postimage vs delete/update_preimage)')
end
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}

{#- The counting columns _ivm_change_problem_sql reads, as aggregate select items over the
    change rows of one key (`key`: its quoted columns). -#}
{% macro _ivm_change_check_items(key) %}
  {%- set pairs = [] -%}
  {%- for k in key -%}{%- do pairs.append(dbt_ivm._ivm_string_literal(k | replace('`', '')) ~ ', ' ~ k) -%}{%- endfor -%}
  {%- set known = "_change_type in ('insert', 'delete', 'update_preimage', 'update_postimage')" -%}
  {{ return([
    "min(case when not coalesce(" ~ known ~ ", false) then coalesce(concat('\\'', _change_type, '\\''), 'NULL') end) as __ivm_c_bad_type",
    'to_json(named_struct(' ~ pairs | join(', ') ~ "), map('ignoreNullFields', 'false')) as __ivm_c_key",
    "concat(min(_commit_version), '..', max(_commit_version)) as __ivm_c_versions",
    "count_if(_change_type in ('insert', 'update_postimage')) as __ivm_c_new",
    "count_if(_change_type in ('delete', 'update_preimage')) as __ivm_c_old",
    "count_if(_change_type = 'update_postimage') as __ivm_c_post",
    "count_if(_change_type = 'update_preimage') as __ivm_c_pre",
    "coalesce(sum(case when _change_type = 'update_postimage' then _commit_version when _change_type = 'update_preimage' "
      ~ "then -_commit_version end), 0) as __ivm_c_update_versions"]) }}
{% endmacro %}

{#- The versions read at the start of a refresh (ivm_current_versions): a change log with
    rows without a version ('null:<rows>') fails with IVM061. versions_from: the stored
    versions when the refresh would be incremental, else none; a change log's version must
    not be below the stored one (a log recreated from version 1 would otherwise look like
    a window without changes). -#}
{% macro _ivm_check_versions(model_name, plan, versions_from, versions_to) %}
  {%- for p in plan if (versions_to.get(p.up.name) or '') is string and (versions_to.get(p.up.name) or '').startswith('null:') -%}
    {{ exceptions.raise_compiler_error(dbt_ivm._ivm_change_data_error(model_name, 'IVM061', p.up.name, (versions_to[p.up.name][5:])
        ~ ' row(s) of ' ~ p.up.change_log ~ ' have _commit_version NULL (select * from ' ~ p.up.change_log ~ ' where _commit_version is null).')) }}
  {%- endfor -%}
  {%- for p in plan if versions_from is not none and p.up.kind == 'change_log' and p.up.get('feed') not in ('delta', 'diff')
        and versions_from.get(p.up.name) is not none -%}
    {%- set after = versions_from[p.up.name] | int -%}
    {%- set now = versions_to.get(p.up.name) -%}
    {%- if now is none or (now | int) < after -%}
      {%- set where = ('the change log ' ~ p.up.change_log) if p.up.get('feed') != 'ivm' else ('the refresh log of ' ~ p.up.relation) -%}
      {{ exceptions.raise_compiler_error(dbt_ivm._ivm_change_data_error(model_name, 'IVM065', p.up.name,
          'The last refresh read up to version ' ~ after ~ '; ' ~ where ~ ' now ends at '
          ~ (now if now is not none else 'no version (it is empty)') ~ '.')) }}
    {%- endif -%}
  {%- endfor -%}
{% endmacro %}

{#- The columns of a relation as stored in the refresh log: 'name type; ...' (names lower-case). -#}
{% macro _ivm_columns_signature(columns) %}
  {%- set items = [] -%}
  {%- for c in columns -%}{%- do items.append((c.name | lower) ~ ' ' ~ (c.data_type | lower)) -%}{%- endfor -%}
  {{ return(items | join('; ')) }}
{% endmacro %}

{#- Schema drift of the upstreams since the last refresh (stored: the signatures of its
    log row, current: the signatures now; an upstream without a stored one is not
    compared). A dropped column that the model names (a word of its SQL) fails with
    IVM066, as a rebuild could not run; any other change (a column added, retyped, or
    dropped but not named, as with select *) returns the reason to rebuild; none without
    drift. -#}
{% macro _ivm_schema_drift_reason(model_name, tk, stored, current) %}
  {%- set changes = [] -%}
  {%- set words = tk.tokens | selectattr('kind', 'in', ['word', 'qid']) | map(attribute='lower') | list -%}
  {%- for name, now in current.items() if stored.get(name) is not none and stored[name] != now -%}
    {%- set before = {} -%}
    {%- for item in stored[name].split('; ') -%}{%- do before.update({item.split(' ', 1)[0]: item.split(' ', 1)[1]}) -%}{%- endfor -%}
    {%- set after = {} -%}
    {%- for item in now.split('; ') if item -%}{%- do after.update({item.split(' ', 1)[0]: item.split(' ', 1)[1]}) -%}{%- endfor -%}
    {%- set named = [] -%}
    {%- for c in before if c not in after -%}
      {%- if c in words -%}{%- do named.append(c) -%}{%- endif -%}
      {%- do changes.append(c ~ ' dropped') -%}
    {%- endfor -%}
    {%- if named -%}
      {{ exceptions.raise_compiler_error(dbt_ivm._ivm_change_data_error(model_name, 'IVM066', name, 'Column(s) ' ~ named | join(', ')
          ~ ' of ' ~ name ~ ' were there at the last refresh and are gone now; the model SQL names them. If that name belongs to another'
          ~ ' relation of the model, rebuild instead: dbt run --full-refresh -s ' ~ model_name ~ '.')) }}
    {%- endif -%}
    {%- for c, t in after.items() -%}
      {%- if c not in before -%}{%- do changes.append(c ~ ' added') -%}
      {%- elif before[c] != t -%}{%- do changes.append(c ~ ' ' ~ before[c] ~ ' -> ' ~ t) -%}{%- endif -%}
    {%- endfor -%}
    {%- if not changes -%}{%- do changes.append('columns reordered') -%}{%- endif -%}
    {{ return('upstream ' ~ name ~ ' changed its columns since the last refresh (' ~ changes | join(', ') ~ '): rebuilding on the new schema') }}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}
