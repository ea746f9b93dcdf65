{#- One row per refresh of every ivm model: the latest event of each refresh_id. -#}
{{ config(materialized='view', enabled=var('dbt_ivm_refresh_log_view', true)) }}
{%- set log = dbt_ivm.ivm_refresh_log_relation() -%}
{#- the on-run-start hook creates the log only in projects with ivm models; this view needs it always -#}
{%- if execute -%}{%- do dbt_ivm.ivm_ensure_refresh_log() -%}{%- endif -%}
select refresh_id, model, relation, status, path, reason, started_at, logged_at as finished_at,
       duration_s, versions_from, versions_to, change_rows, rows_deleted, rows_inserted, logs_advanced, message
from (
  select *, row_number() over (partition by refresh_id order by logged_at desc) as __ivm_rank
  from {{ log }}
) latest
where __ivm_rank = 1
