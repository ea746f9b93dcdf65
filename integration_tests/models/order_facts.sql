{{ config(materialized='ivm') }}

with orders as (
    select * from {{ source('shop', 'orders') }}
),

customers as (
    select * from {{ source('shop', 'customers') }}
)

select
    orders.order_id,
    orders.order_date,
    orders.amount,
    customers.customer_id,
    customers.name as customer_name,
    upper(customers.region) as region
from orders
join customers on orders.customer_id = customers.customer_id
where orders.status <> 'cancelled'
