-- 1: apply
create or replace table analytics.full_rebuild using delta
partitioned by (`region`)
tblproperties ('delta.enableChangeDataFeed' = 'true')
as select o.order_id, o.amount, c.region , `o`.`order_id` as __ivm_orders__order_id, `c`.`customer_id` as __ivm_customers__customer_id from (select `order_id`, `customer_id`, `amount`, `status` from raw.orders version as of 3) o join (select `customer_id`, `region` from raw.customers) c on o.customer_id = c.customer_id where o.status <> 'cancelled'
