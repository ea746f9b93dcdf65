{{ config(materialized='ivm') }}

-- aggregate over a join: a customer moving region moves its revenue
select
    c.region,
    count(*) as orders,
    sum(o.amount) as revenue,
    avg(o.amount) as average_order
from {{ source('shop', 'orders') }} o
join {{ source('shop', 'customers') }} c on o.customer_id = c.customer_id
where o.status <> 'cancelled'
group by c.region
