{#- The model config of an ivm model, read and validated in one place (dbt run and dbt-ivm explain). -#}

{#- The package's own config key `key` of the model, from its config meta (`+meta` in
    dbt_project.yml, `config: {meta: {...}}` in YAML, `config(meta={...})` in SQL, merged by
    dbt per key), where dbt >= 1.10 wants custom keys; else the top-level key, as projects
    written before that set it; else `default`. -#}
{% macro _ivm_config(key, default) %}
  {%- set value = config.meta_get(key) -%}
  {%- set value = config.get(key) if value is none else value -%}
  {{ return(default if value is none else value) }}
{% endmacro %}

{#- Model config keys, validated. -#}
{% macro _ivm_model_settings(model) %}
  {%- set on_unsupported = dbt_ivm._ivm_config('ivm_on_unsupported', 'error') -%}
  {%- if on_unsupported not in ('error', 'full_rebuild') -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': ivm_on_unsupported must be 'error' or 'full_rebuild', got '" ~
        on_unsupported ~ "'.") }}
  {%- endif -%}
  {%- set file_format = config.get('file_format') or 'parquet' -%}
  {%- if file_format not in ('parquet', 'delta') -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~
        "': materialized='ivm' stores tables as parquet or delta; file_format='" ~ file_format ~
            "' is not supported. Remove file_format or set it to 'parquet' or 'delta'.") }}
  {%- endif -%}
  {%- set on_feed_error = dbt_ivm._ivm_config('ivm_on_change_feed_error', 'fail') -%}
  {%- if on_feed_error not in ('fail', 'rebuild') -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': ivm_on_change_feed_error must be 'fail' or 'rebuild', got '" ~
        on_feed_error ~ "'.") }}
  {%- endif -%}
  {%- set partition_by = config.get('partition_by') -%}
  {%- set partition_by = [partition_by] if partition_by is string else (partition_by or []) -%}
  {%- set rebuild_above = dbt_ivm._ivm_config('ivm_rebuild_above', 0.05) -%}
  {%- if rebuild_above is not none and rebuild_above is not false
        and (rebuild_above is sameas true or rebuild_above is not number or rebuild_above <= 0) -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~
        "': ivm_rebuild_above must be a positive number (changed rows as a fraction of the changed upstreams' rows, e.g. 0.05) or "
            "false to never rebuild for size, got '" ~ rebuild_above ~ "'.") }}
  {%- endif -%}
  {%- set compact_log_above = dbt_ivm._ivm_config('ivm_compact_log_above', 64) -%}
  {%- if compact_log_above is not false and (compact_log_above is sameas true or compact_log_above is not integer or compact_log_above < 1) -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~
        "': ivm_compact_log_above must be a whole number of refresh log partitions above 0 (e.g. 64) or false to never compact "
            "the model's refresh log history, got '" ~ compact_log_above ~ "'.") }}
  {%- endif -%}
  {#- the model's row key, as dbt's incremental models name it: keys the slices of the keyed path -#}
  {%- set unique_key = config.get('unique_key') -%}
  {%- set unique_key = [unique_key] if unique_key is string else unique_key -%}
  {%- if unique_key is not none and (unique_key is mapping or unique_key is not iterable or not unique_key
        or unique_key | reject('string') | list) -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': unique_key must be a column name or a list of column names, got '"
        ~ unique_key ~ "'.") }}
  {%- endif -%}
  {%- set settings = {'lease_wait': dbt_ivm._ivm_config('ivm_lease_wait', 0),
                      'lease_timeout': dbt_ivm._ivm_config('ivm_lease_timeout', 3600)} -%}
  {%- for key, value in settings.items() if value is sameas true or value is not number or value < 0 or (key == 'lease_timeout' and value == 0) -%}
    {{ exceptions.raise_compiler_error("Model '" ~ model.name ~ "': ivm_" ~ key ~ ' must be a number of seconds'
        ~ (' above 0' if key == 'lease_timeout' else ' (0: do not wait)') ~ ", got '" ~ value ~ "'.") }}
  {%- endfor -%}
  {%- do settings.update({'unique_key': unique_key | map('lower') | list if unique_key else none,
                          'on_unsupported': on_unsupported, 'partition_by': partition_by | map('lower') | list,
                          'rebuild_above': rebuild_above or none, 'file_format': file_format,
                          'on_change_feed_error': on_feed_error, 'compact_log_above': compact_log_above or none}) -%}
  {%- do settings.update(dbt_ivm._ivm_table_settings(model, file_format, partition_by)) -%}
  {{ return(settings) }}
{% endmacro %}

{#- dbt's table configs: honoured (tblproperties, location_root, persist_docs; grants in
    _ivm_apply_grants) or rejected, never ignored. -#}
{% macro _ivm_table_settings(model, file_format, partition_by) %}
  {%- set prefix = "Model '" ~ model.name ~ "': " -%}
  {%- set bucketing = 'a refresh rewrites only the rows or partitions that change, and Spark writes buckets only when it '
      ~ 'writes a whole table' -%}
  {%- set unsupported = {'clustered_by': bucketing, 'buckets': bucketing,
                         'options': 'dbt_ivm writes its tables with its own data source options'} -%}
  {%- for key, why in unsupported.items() if config.get(key) is not none -%}
    {{ exceptions.raise_compiler_error(prefix ~ "materialized='ivm' does not support the config " ~ key ~ ': ' ~ why ~
        '. Remove ' ~ key ~ (' (partition_by is supported)' if key != 'options' else '') ~ '.') }}
  {%- endfor -%}
  {%- set tblproperties = config.get('tblproperties') or {} -%}
  {%- if tblproperties is not mapping -%}
    {{ exceptions.raise_compiler_error(prefix ~ "tblproperties must be a mapping of property names to values, got '" ~
        tblproperties ~ "'.") }}
  {%- endif -%}
  {%- set properties = {} -%}
  {%- for name, value in tblproperties.items() -%}
    {%- set reserved = (name | lower).startswith('dbt_ivm.') or name | lower == 'delta.enablechangedatafeed' -%}
    {%- if reserved -%}
      {{ exceptions.raise_compiler_error(prefix ~ 'the table property ' ~ name ~
          ' is set by dbt_ivm (its row key, and the change data feed that downstream ivm models read). Remove it from tblproperties.') }}
    {%- endif -%}
    {%- do properties.update({name: value | string}) -%}
  {%- endfor -%}
  {%- set location_root = config.get('location_root') -%}
  {%- if location_root is not none and (location_root is not string or not location_root) -%}
    {{ exceptions.raise_compiler_error(prefix ~ "location_root must be a path, got '" ~ location_root ~ "'.") }}
  {%- endif -%}
  {%- if location_root and partition_by and file_format == 'parquet' -%}
    {{ exceptions.raise_compiler_error(prefix ~ 'location_root with partition_by is not supported for parquet tables: a '
        ~ 'rebuild would have to write into the directory the table reads. Set file_format: delta, or remove one of the two.') }}
  {%- endif -%}
  {#- dbt checks that persist_docs is a mapping when it parses the project -#}
  {%- set persist_docs = config.get('persist_docs') or {} -%}
  {#- the table's directory under location_root, as dbt-spark's location_clause places it -#}
  {{ return({'tblproperties': properties, 'location': location_root.rstrip('/') ~ '/' ~ model.alias if location_root else none,
             'persist_docs': {'relation': persist_docs.get('relation') is sameas true,
                              'columns': persist_docs.get('columns') is sameas true}}) }}
{% endmacro %}

{#- The model's enforced dbt contract as text: each column's name, data type and
    constraints, then the model-level constraints (descriptions left out); none without an
    enforced contract. It is part of the definition hash: a changed contract rebuilds the
    table, and a full build checks it (_ivm_check_contract). -#}
{% macro _ivm_contract_signature(model) %}
  {%- if not model.get('contract', {}).get('enforced') -%}{{ return(none) }}{%- endif -%}
  {%- set columns = [] -%}
  {%- for name, c in model.columns.items() -%}
    {%- do columns.append([name, c.get('data_type'), c.get('constraints') or []]) -%}
  {%- endfor -%}
  {{ return(tojson([columns, model.get('constraints') or []])) }}
{% endmacro %}

{#- An enforced contract: the columns and types the SQL yields must be the YAML's, checked
    with dbt's own macro (its error lists the differences) before the table is written. -#}
{% macro _ivm_check_contract(model, sql) %}
  {%- if model.get('contract', {}).get('enforced') -%}{%- do get_assert_columns_equivalent(sql) -%}{%- endif -%}
{% endmacro %}

{#- An enforced contract's constraints on a Delta table (parquet tables have none), added
    after each of its full builds (a CREATE OR REPLACE drops them) as Delta CHECK
    constraints, which Delta then enforces on every refresh's write: each `check`, and each
    `not_null` column as `<column> is not null` (named `<column>_not_null`: Spark cannot
    make an existing column NOT NULL). Spark enforces no other type: a warning names them. -#}
{% macro _ivm_add_contract_constraints(model, target) %}
  {%- if not model.get('contract', {}).get('enforced') -%}{{ return(none) }}{%- endif -%}
  {%- set checks = [] -%}
  {%- set owners = [[none, model.get('constraints') or []]] -%}
  {%- for name, column in model.columns.items() -%}{%- do owners.append([name, column.get('constraints') or []]) -%}{%- endfor -%}
  {%- for column, constraints in owners -%}
    {%- for c in constraints -%}
      {%- if c.type == 'check' and c.expression -%}
        {%- do checks.append([c.name or ('check_' ~ local_md5(c.expression)[:12]), c.expression]) -%}
      {%- elif c.type == 'not_null' and column -%}
        {%- do checks.append([c.name or (column ~ '_not_null'), adapter.quote(column) ~ ' is not null']) -%}
      {%- else -%}
        {%- do exceptions.warn('dbt_ivm: model ' ~ model.name ~ ': its contract\'s ' ~ c.type ~ ' constraint' ~
            (' on ' ~ column if column else '') ~ ' is not enforced: Spark enforces check and not_null constraints, on Delta') -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- for name, expression in checks -%}
    {%- do run_query('alter table ' ~ target ~ ' add constraint ' ~ adapter.quote(name) ~ ' check (' ~ expression ~ ')') -%}
  {%- endfor -%}
{% endmacro %}
