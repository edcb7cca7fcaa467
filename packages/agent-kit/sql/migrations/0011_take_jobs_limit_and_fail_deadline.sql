-- Two fixes (and one index less) found by the benchmark and the simulator.
-- * agent_kit_take_jobs honours its limit whatever the planner believes. In the form
--   `update … where id in (select … limit n for update skip locked)` a planner that thinks the
--   queue is empty (analyzed while it was) runs the locking subquery once per job row; each run
--   skips the rows already updated and yields the next, so one take_jobs(1) took a whole burst.
--   A MATERIALIZED CTE runs once and locks exactly p_limit jobs.
-- * agent_kit_fail_segment gives the lease up at min(now, deadline): a failure reported after
--   the deadline must not move the expiry past it (invariant 8).

create or replace function agent_kit_take_jobs(p_limit int, p_lock interval)
returns table (job_id bigint, run_id uuid, tries int) language plpgsql as $$
begin
  if p_limit is null or p_limit < 1 or p_limit > 1000 then
    raise exception 'job limit must be 1..1000, got %', p_limit using errcode = 'AK001';
  end if;
  if p_lock is null or p_lock <= interval '0' then
    raise exception 'job lock must be a positive interval, got %', coalesce(p_lock::text, 'NULL') using errcode = 'AK001';
  end if;
  return query
  with due as materialized (
    select q.id from agent_kit_jobs q
    where q.due_at <= agent_kit_now()
    order by q.due_at
    limit p_limit
    for update skip locked
  )
  update agent_kit_jobs j set due_at = agent_kit_now() + p_lock, tries = j.tries + 1
  from due
  where j.id = due.id
  returning j.id, j.run_id, j.tries;
end $$;

create or replace function agent_kit_fail_segment(p_run_id uuid, p_owner text, p_fence bigint, p_error jsonb)
returns boolean language plpgsql as $$
declare
  v_thread_id uuid;
  v_attempts int;
  v_seq bigint;
begin
  update agent_kit_runs set
    lease_expires_at = least(agent_kit_now(), coalesce(deadline_at, agent_kit_now())),
    last_error = p_error, updated_at = now()
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  returning thread_id, attempts into v_thread_id, v_attempts;
  if not found then
    return false;
  end if;
  v_seq := agent_kit__append_event(v_thread_id, p_run_id, p_fence, 'segment-failed',
    jsonb_build_object('runId', p_run_id, 'fence', p_fence, 'attempt', v_attempts, 'error', p_error));
  return true;
end $$;

-- (And a duplicate index: unique (thread_id, turn_no) already serves every lookup it did, and
-- each index is one more write on every claim and close.)
drop index agent_kit_runs__thread_id_idx;
