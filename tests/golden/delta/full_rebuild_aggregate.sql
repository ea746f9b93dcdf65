-- 1: apply
create or replace table analytics.full_rebuild_aggregate using delta
tblproperties ('delta.enableChangeDataFeed' = 'true')
as select  c.region, count(*) as n, sum(o.amount) as revenue, c.region as __ivm_g_0, count(*) as __ivm_count, count(*) as __ivm_s0, sum(o.amount) as __ivm_s1, count(o.amount) as __ivm_n1  from (select `order_id`, `customer_id`, `amount`, `status` from raw.orders version as of 3) o join (select `customer_id`, `region` from raw.customers version as of 3) c on o.customer_id = c.customer_id group by c.region
