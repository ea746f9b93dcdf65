-- 1: change set of raw.orders
select case when l.__ivm_is_new then l.`order_id` else f.`order_id` end as `order_id`, case when l.__ivm_is_new then l.`customer_id` else f.`customer_id` end as `customer_id`, case when l.__ivm_is_new then l.`amount` else f.`amount` end as `amount`, case when l.__ivm_is_new then l.`status` else f.`status` end as `status`, not f.__ivm_is_new as __ivm_old, l.__ivm_is_new as __ivm_new, case
  when __ivm_c_bad_type is not null then concat('IVM060 _change_type ', __ivm_c_bad_type, ' in key ', __ivm_c_key, ', versions ', __ivm_c_versions)
  when false or l.`order_id` is null then concat('IVM062 key ', __ivm_c_key, ', versions ', __ivm_c_versions)
  when __ivm_c_post != __ivm_c_pre or __ivm_c_update_versions != 0
    then concat('IVM063 key ', __ivm_c_key, ', versions ', __ivm_c_versions, ': ', __ivm_c_post, ' postimage(s), ', __ivm_c_pre, ' preimage(s)')
  when __ivm_c_new - __ivm_c_old != (case when l.__ivm_is_new then 1 else 0 end) - (case when f.__ivm_is_new then 0 else 1 end)
    then concat('IVM064 key ', __ivm_c_key, ', versions ', __ivm_c_versions, ': ', __ivm_c_new, ' new row(s) and ', __ivm_c_old,
                ' old row(s) (insert/update_postimage vs delete/update_preimage)')
end as __ivm_problem
from (
  select min_by(named_struct('order_id', `order_id`, 'customer_id', `customer_id`, 'amount', `amount`, 'status', `status`, '__ivm_is_new', _change_type in ('insert', 'update_postimage')), _commit_version * 2 + case when _change_type in ('update_preimage', 'delete') then 0 else 1 end) as f, max_by(named_struct('order_id', `order_id`, 'customer_id', `customer_id`, 'amount', `amount`, 'status', `status`, '__ivm_is_new', _change_type in ('insert', 'update_postimage')), _commit_version * 2 + case when _change_type in ('update_preimage', 'delete') then 0 else 1 end) as l,
    min(case when not coalesce(_change_type in ('insert', 'delete', 'update_preimage', 'update_postimage'), false) then coalesce(concat('\'', _change_type, '\''), 'NULL') end) as __ivm_c_bad_type,
    to_json(named_struct('order_id', `order_id`), map('ignoreNullFields', 'false')) as __ivm_c_key,
    concat(min(_commit_version), '..', max(_commit_version)) as __ivm_c_versions,
    count_if(_change_type in ('insert', 'update_postimage')) as __ivm_c_new,
    count_if(_change_type in ('delete', 'update_preimage')) as __ivm_c_old,
    count_if(_change_type = 'update_postimage') as __ivm_c_post,
    count_if(_change_type = 'update_preimage') as __ivm_c_pre,
    coalesce(sum(case when _change_type = 'update_postimage' then _commit_version when _change_type = 'update_preimage' then -_commit_version end), 0) as __ivm_c_update_versions
  from (select * from table_changes('raw.orders', 4, 7)) __ivm_log
  group by `order_id`
) __ivm_net
where (case
  when __ivm_c_bad_type is not null then concat('IVM060 _change_type ', __ivm_c_bad_type, ' in key ', __ivm_c_key, ', versions ', __ivm_c_versions)
  when false or l.`order_id` is null then concat('IVM062 key ', __ivm_c_key, ', versions ', __ivm_c_versions)
  when __ivm_c_post != __ivm_c_pre or __ivm_c_update_versions != 0
    then concat('IVM063 key ', __ivm_c_key, ', versions ', __ivm_c_versions, ': ', __ivm_c_post, ' postimage(s), ', __ivm_c_pre, ' preimage(s)')
  when __ivm_c_new - __ivm_c_old != (case when l.__ivm_is_new then 1 else 0 end) - (case when f.__ivm_is_new then 0 else 1 end)
    then concat('IVM064 key ', __ivm_c_key, ', versions ', __ivm_c_versions, ': ', __ivm_c_new, ' new row(s) and ', __ivm_c_old,
                ' old row(s) (insert/update_postimage vs delete/update_preimage)')
end) is not null or ((not f.__ivm_is_new or l.__ivm_is_new)
  and not (not f.__ivm_is_new and l.__ivm_is_new and f.`order_id` <=> l.`order_id` and f.`customer_id` <=> l.`customer_id` and f.`amount` <=> l.`amount` and f.`status` <=> l.`status`))

-- 2: change set of raw.customers
select case when l.__ivm_is_new then l.`customer_id` else f.`customer_id` end as `customer_id`, case when l.__ivm_is_new then l.`region` else f.`region` end as `region`, not f.__ivm_is_new as __ivm_old, l.__ivm_is_new as __ivm_new, case
  when __ivm_c_bad_type is not null then concat('IVM060 _change_type ', __ivm_c_bad_type, ' in key ', __ivm_c_key, ', versions ', __ivm_c_versions)
  when false or l.`customer_id` is null then concat('IVM062 key ', __ivm_c_key, ', versions ', __ivm_c_versions)
  when __ivm_c_post != __ivm_c_pre or __ivm_c_update_versions != 0
    then concat('IVM063 key ', __ivm_c_key, ', versions ', __ivm_c_versions, ': ', __ivm_c_post, ' postimage(s), ', __ivm_c_pre, ' preimage(s)')
  when __ivm_c_new - __ivm_c_old != (case when l.__ivm_is_new then 1 else 0 end) - (case when f.__ivm_is_new then 0 else 1 end)
    then concat('IVM064 key ', __ivm_c_key, ', versions ', __ivm_c_versions, ': ', __ivm_c_new, ' new row(s) and ', __ivm_c_old,
                ' old row(s) (insert/update_postimage vs delete/update_preimage)')
end as __ivm_problem
from (
  select min_by(named_struct('customer_id', `customer_id`, 'region', `region`, '__ivm_is_new', _change_type in ('insert', 'update_postimage')), _commit_version * 2 + case when _change_type in ('update_preimage', 'delete') then 0 else 1 end) as f, max_by(named_struct('customer_id', `customer_id`, 'region', `region`, '__ivm_is_new', _change_type in ('insert', 'update_postimage')), _commit_version * 2 + case when _change_type in ('update_preimage', 'delete') then 0 else 1 end) as l,
    min(case when not coalesce(_change_type in ('insert', 'delete', 'update_preimage', 'update_postimage'), false) then coalesce(concat('\'', _change_type, '\''), 'NULL') end) as __ivm_c_bad_type,
    to_json(named_struct('customer_id', `customer_id`), map('ignoreNullFields', 'false')) as __ivm_c_key,
    concat(min(_commit_version), '..', max(_commit_version)) as __ivm_c_versions,
    count_if(_change_type in ('insert', 'update_postimage')) as __ivm_c_new,
    count_if(_change_type in ('delete', 'update_preimage')) as __ivm_c_old,
    count_if(_change_type = 'update_postimage') as __ivm_c_post,
    count_if(_change_type = 'update_preimage') as __ivm_c_pre,
    coalesce(sum(case when _change_type = 'update_postimage' then _commit_version when _change_type = 'update_preimage' then -_commit_version end), 0) as __ivm_c_update_versions
  from (select * from raw.customers_changes where _commit_version <= 7 and _commit_version > 3) __ivm_log
  group by `customer_id`
) __ivm_net
where (case
  when __ivm_c_bad_type is not null then concat('IVM060 _change_type ', __ivm_c_bad_type, ' in key ', __ivm_c_key, ', versions ', __ivm_c_versions)
  when false or l.`customer_id` is null then concat('IVM062 key ', __ivm_c_key, ', versions ', __ivm_c_versions)
  when __ivm_c_post != __ivm_c_pre or __ivm_c_update_versions != 0
    then concat('IVM063 key ', __ivm_c_key, ', versions ', __ivm_c_versions, ': ', __ivm_c_post, ' postimage(s), ', __ivm_c_pre, ' preimage(s)')
  when __ivm_c_new - __ivm_c_old != (case when l.__ivm_is_new then 1 else 0 end) - (case when f.__ivm_is_new then 0 else 1 end)
    then concat('IVM064 key ', __ivm_c_key, ', versions ', __ivm_c_versions, ': ', __ivm_c_new, ' new row(s) and ', __ivm_c_old,
                ' old row(s) (insert/update_postimage vs delete/update_preimage)')
end) is not null or ((not f.__ivm_is_new or l.__ivm_is_new)
  and not (not f.__ivm_is_new and l.__ivm_is_new and f.`customer_id` <=> l.`customer_id` and f.`region` <=> l.`region`))

-- 3: apply
insert into analytics.join_listed_keys replace where (__ivm_orders__order_id in (1L, 10L, 2L, 4L, 6L, 7L, 8L, 9L) or __ivm_customers__customer_id in (1L, 3L))
select `order_id`, `amount`, `region`, `__ivm_orders__order_id`, `__ivm_customers__customer_id` from (select * from (
select o.order_id, o.amount, c.region , `o`.`order_id` as __ivm_orders__order_id, `c`.`customer_id` as __ivm_customers__customer_id from (select /*+ BROADCAST */ * from (select `order_id`, `customer_id`, `amount`, `status` from __ivm_join_listed_keys_chg_orders where __ivm_new) __ivm_b) o join (select * from (select `customer_id`, `region` from raw.customers) __ivm_r where `customer_id` in (1L, 2L, 4L) and `customer_id` between 1L and 4L) c on o.customer_id = c.customer_id where o.status <> 'cancelled'
) __ivm_term_0
union all
select * from (
select o.order_id, o.amount, c.region , `o`.`order_id` as __ivm_orders__order_id, `c`.`customer_id` as __ivm_customers__customer_id from (select * from (select * from (select `order_id`, `customer_id`, `amount`, `status` from raw.orders version as of 7) __ivm_s where not coalesce(`order_id` in (1L, 10L, 2L, 4L, 6L, 7L, 8L, 9L), false)) __ivm_r where `customer_id` in (1L, 3L) and `customer_id` between 1L and 3L) o join (select /*+ BROADCAST */ * from (select `customer_id`, `region` from __ivm_join_listed_keys_chg_customers where __ivm_new) __ivm_b) c on o.customer_id = c.customer_id where o.status <> 'cancelled'
) __ivm_term_1) __ivm_i
