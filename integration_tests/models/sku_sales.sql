{{ config(materialized='ivm') }}

-- single-upstream aggregate: count/sum merge from the change set; min/max merge on
-- inserts and recompute the affected skus after deletes or updates
select
    l.sku,
    count(*) as lines,
    sum(l.quantity) as units,
    min(l.price) as lowest_price,
    max(l.price) as highest_price
from {{ source('shop', 'order_lines') }} l
group by l.sku
