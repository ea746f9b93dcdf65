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

-- 2: change set of raw.customers
select case when l.__ivm_is_new then l.`customer_id` else f.`customer_id` end as `customer_id`, case when l.__ivm_is_new then l.`region` else f.`region` end as `region`, case when not f.__ivm_is_new then named_struct('customer_id', f.`customer_id`, 'region', f.`region`) end as __ivm_before, not f.__ivm_is_new as __ivm_old, l.__ivm_is_new as __ivm_new, case
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
merge into analytics.agg_mixed __ivm_t
using (
select `__ivm_g_0`, any_value(`region`) as `region`, sum(__ivm_sign * __ivm_count) as __ivm_count, sum(__ivm_sign * __ivm_s0) as __ivm_s0, sum(__ivm_sign * __ivm_s1) as __ivm_s1, sum(__ivm_sign * __ivm_n1) as __ivm_n1
from (
select `region`, `__ivm_g_0`, `__ivm_count`, `__ivm_s0`, `__ivm_s1`, `__ivm_n1`, __ivm_sign_0 * __ivm_sign_1 as __ivm_sign from (
select  c.region, c.region as __ivm_g_0, count(*) as __ivm_count, count(*) as __ivm_s0, sum(o.amount) as __ivm_s1, count(o.amount) as __ivm_n1  , `o`.`__ivm_sign` as __ivm_sign_0, `c`.`__ivm_sign` as __ivm_sign_1 from (select /*+ BROADCAST */ * from (select inline(filter(array(if(__ivm_c.__ivm_new, named_struct('order_id', __ivm_c.`order_id`, 'customer_id', __ivm_c.`customer_id`, 'amount', __ivm_c.`amount`, 'status', __ivm_c.`status`, '__ivm_sign', 1), null), if(__ivm_c.__ivm_old, named_struct('order_id', __ivm_c.__ivm_before.`order_id`, 'customer_id', __ivm_c.__ivm_before.`customer_id`, 'amount', __ivm_c.__ivm_before.`amount`, 'status', __ivm_c.__ivm_before.`status`, '__ivm_sign', -1), null)), __ivm_x -> __ivm_x is not null)) from __ivm_agg_mixed_chg_orders __ivm_c) __ivm_b) o join (select *, 1 as __ivm_sign from (select * from (select __ivm_s.* from (select `customer_id`, `region` from raw.customers) __ivm_s left anti join (select /*+ BROADCAST */ * from __ivm_agg_mixed_chg_customers __ivm_b) __ivm_k on __ivm_s.`customer_id` <=> __ivm_k.`customer_id`) __ivm_u union all select * from (select `customer_id`, `region` from (select __ivm_before.* from __ivm_agg_mixed_chg_customers where __ivm_old) __ivm_b) __ivm_o) __ivm_r) c on o.customer_id = c.customer_id group by c.region
, `o`.`__ivm_sign`, `c`.`__ivm_sign`
) __ivm_t(`region`, `__ivm_g_0`, `__ivm_count`, `__ivm_s0`, `__ivm_s1`, `__ivm_n1`, __ivm_sign_0, __ivm_sign_1)
union all
select `region`, `__ivm_g_0`, `__ivm_count`, `__ivm_s0`, `__ivm_s1`, `__ivm_n1`, __ivm_sign_0 * __ivm_sign_1 as __ivm_sign from (
select  c.region, c.region as __ivm_g_0, count(*) as __ivm_count, count(*) as __ivm_s0, sum(o.amount) as __ivm_s1, count(o.amount) as __ivm_n1  , `o`.`__ivm_sign` as __ivm_sign_0, `c`.`__ivm_sign` as __ivm_sign_1 from (select *, 1 as __ivm_sign from (select `order_id`, `customer_id`, `amount`, `status` from raw.orders version as of 7) __ivm_r) o join (select /*+ BROADCAST */ * from (select inline(filter(array(if(__ivm_c.__ivm_new, named_struct('customer_id', __ivm_c.`customer_id`, 'region', __ivm_c.`region`, '__ivm_sign', 1), null), if(__ivm_c.__ivm_old, named_struct('customer_id', __ivm_c.__ivm_before.`customer_id`, 'region', __ivm_c.__ivm_before.`region`, '__ivm_sign', -1), null)), __ivm_x -> __ivm_x is not null)) from __ivm_agg_mixed_chg_customers __ivm_c) __ivm_b) c on o.customer_id = c.customer_id group by c.region
, `o`.`__ivm_sign`, `c`.`__ivm_sign`
) __ivm_t(`region`, `__ivm_g_0`, `__ivm_count`, `__ivm_s0`, `__ivm_s1`, `__ivm_n1`, __ivm_sign_0, __ivm_sign_1)
) __ivm_d
group by `__ivm_g_0`
) __ivm_s
on __ivm_t.`__ivm_g_0` <=> __ivm_s.`__ivm_g_0` and __ivm_t.__ivm_count is not null
when matched and __ivm_t.__ivm_count + __ivm_s.__ivm_count = 0 then delete
when matched then update set __ivm_t.`region` = __ivm_s.`region`, __ivm_t.`n` = (cast(coalesce(__ivm_t.__ivm_s0, 0) + coalesce(__ivm_s.__ivm_s0, 0) as bigint)), __ivm_t.`revenue` = case when (cast(coalesce(__ivm_t.__ivm_n1, 0) + coalesce(__ivm_s.__ivm_n1, 0) as bigint)) > 0 then (cast(coalesce(__ivm_t.__ivm_s1, 0) + coalesce(__ivm_s.__ivm_s1, 0) as decimal(20,2))) end, __ivm_t.`__ivm_count` = coalesce(__ivm_t.__ivm_count, 0) + coalesce(__ivm_s.__ivm_count, 0), __ivm_t.`__ivm_s0` = cast(coalesce(__ivm_t.__ivm_s0, 0) + coalesce(__ivm_s.__ivm_s0, 0) as bigint), __ivm_t.`__ivm_s1` = cast(coalesce(__ivm_t.__ivm_s1, 0) + coalesce(__ivm_s.__ivm_s1, 0) as decimal(20,2)), __ivm_t.`__ivm_n1` = cast(coalesce(__ivm_t.__ivm_n1, 0) + coalesce(__ivm_s.__ivm_n1, 0) as bigint)
when not matched and __ivm_s.__ivm_count > 0 then insert (`region`, `n`, `revenue`, `__ivm_g_0`, `__ivm_count`, `__ivm_s0`, `__ivm_s1`, `__ivm_n1`) values (__ivm_s.`region`, (cast(coalesce(__ivm_s.__ivm_s0, 0) as bigint)), case when (cast(coalesce(__ivm_s.__ivm_n1, 0) as bigint)) > 0 then (cast(coalesce(__ivm_s.__ivm_s1, 0) as decimal(20,2))) end, __ivm_s.`__ivm_g_0`, coalesce(__ivm_s.__ivm_count, 0), cast(coalesce(__ivm_s.__ivm_s0, 0) as bigint), cast(coalesce(__ivm_s.__ivm_s1, 0) as decimal(20,2)), cast(coalesce(__ivm_s.__ivm_n1, 0) as bigint))
