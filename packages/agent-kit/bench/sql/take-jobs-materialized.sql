-- PROPOSAL (a bug fix), not applied by the bench: agent_kit_take_jobs as a materialized CTE.
-- Today's form, `update … where j.id in (select … limit p_limit for update skip locked)`, lets
-- the planner turn the IN into a nested-loop semi join that re-runs the locking subquery once
-- per outer row; each re-run skips the rows this statement already updated and returns the
-- next one, so LIMIT is defeated. Seen with stale statistics (the jobs table analyzed while
-- empty, then 5,000 jobs enqueued): agent_kit_take_jobs(1, …) took all 5,000 jobs in 2.2 s, and
-- 20,000 in 70–80 s (quadratic), pushing every job's due time out by the lock interval. In this
-- form the subquery runs once and exactly p_limit rows are locked: 1 job in 6 ms, same setup.
-- Adopt as the next sql/migrations/NNNN_take_jobs_materialized.sql.
create or replace function agent_kit_take_jobs(p_limit int, p_lock interval)
returns table (job_id bigint, run_id uuid, tries int) language plpgsql as $$
begin
  if p_limit is null or p_limit < 1 or p_limit > 1000 then
    raise exception 'job limit must be 1..1000, got %', p_limit using errcode = 'AK001';
  end if;
  perform agent_kit__check_ttl('job lock', p_lock);
  return query
  with taken as materialized (
    select q.id from agent_kit_jobs q where q.due_at <= agent_kit_now()
    order by q.due_at limit p_limit for update skip locked)
  update agent_kit_jobs j set due_at = agent_kit_now() + p_lock, tries = j.tries + 1
  from taken t where j.id = t.id
  returning j.id, j.run_id, j.tries;
end $$;
