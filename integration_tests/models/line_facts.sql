{{ config(materialized='ivm', partition_by=['segment']) }}

select
    l.line_id,
    l.sku,
    l.quantity * l.price as line_total,
    o.order_id,
    o.order_date,
    c.customer_id,
    c.segment
from {{ source('shop', 'order_lines') }} l
join {{ source('shop', 'orders') }} o on l.order_id = o.order_id
join {{ source('shop', 'customers') }} c on o.customer_id = c.customer_id
