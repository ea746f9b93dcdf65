{{ config(materialized='ivm') }}

select v.view_id, v.page, v.loaded_at, c.customer_id, c.name
from {{ source('shop', 'page_views') }} v
join {{ source('shop', 'customers') }} c on v.customer_id = c.customer_id
