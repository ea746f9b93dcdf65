-- 1: change set of raw.orders
select case when l.__ivm_is_new then l.`order_id` else f.`order_id` end as `order_id`, case when l.__ivm_is_new then l.`customer_id` else f.`customer_id` end as `customer_id`, case when l.__ivm_is_new then l.`amount` else f.`amount` end as `amount`, case when l.__ivm_is_new then l.`status` else f.`status` end as `status`, case when not f.__ivm_is_new then named_struct('order_id', f.`order_id`, 'customer_id', f.`customer_id`, 'amount', f.`amount`, 'status', f.`status`) end as __ivm_before, not f.__ivm_is_new as __ivm_old, l.__ivm_is_new as __ivm_new, case
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

-- 2: apply
merge into analytics.distinct_mixed __ivm_t
using (
select `customer_id`, `status`, sum(__ivm_sign * __ivm_count) as __ivm_count
from (
select `customer_id`, `status`, `__ivm_count`, __ivm_sign_0 as __ivm_sign from (
select  customer_id, status, count(*) as __ivm_count  , `orders`.`__ivm_sign` as __ivm_sign_0 from (select /*+ BROADCAST */ * from (select inline(filter(array(if(__ivm_c.__ivm_new, named_struct('order_id', __ivm_c.`order_id`, 'customer_id', __ivm_c.`customer_id`, 'amount', __ivm_c.`amount`, 'status', __ivm_c.`status`, '__ivm_sign', 1), null), if(__ivm_c.__ivm_old, named_struct('order_id', __ivm_c.__ivm_before.`order_id`, 'customer_id', __ivm_c.__ivm_before.`customer_id`, 'amount', __ivm_c.__ivm_before.`amount`, 'status', __ivm_c.__ivm_before.`status`, '__ivm_sign', -1), null)), __ivm_x -> __ivm_x is not null)) from __ivm_distinct_mixed_chg_orders __ivm_c) __ivm_b) `orders`
group by all
) __ivm_t
) __ivm_d
group by `customer_id`, `status`
) __ivm_s
on __ivm_t.`customer_id` <=> __ivm_s.`customer_id` and __ivm_t.`status` <=> __ivm_s.`status` and __ivm_t.__ivm_count is not null
when matched and __ivm_t.__ivm_count + __ivm_s.__ivm_count = 0 then delete
when matched then update set __ivm_t.`__ivm_count` = coalesce(__ivm_t.__ivm_count, 0) + coalesce(__ivm_s.__ivm_count, 0)
when not matched and __ivm_s.__ivm_count > 0 then insert (`customer_id`, `status`, `__ivm_count`) values (__ivm_s.`customer_id`, __ivm_s.`status`, coalesce(__ivm_s.__ivm_count, 0))
