-- A run parked for a model retry (0029) is queued with its job due when the provider said to
-- come back, but a claim by id looked only at the run: a retried chat request for the turn, or an
-- answer or cancel that reached a segment registry while the run's segment was still parking,
-- claimed it again at once. The new segment asked the provider before its time, was refused
-- again, and spent another attempt: a few of those salvaged a turn the provider would have
-- answered (ADR-0098).
--
-- The run now says when it may be claimed again: retry_due_at, set by the park for a retry and
-- cleared by the next claim. Until then agent_kit_claim_run leaves it queued (unless a cancel is
-- pending: the segment that closes it asks no model). The job cannot say it: its due time is also
-- the lock a take puts on it, and a fresh turn's job is late on purpose so that the request that
-- made it claims first.
--
-- A job that comes due before its run (an operator's release enqueues it due now, as does a
-- custom loop over agent_kit_take_jobs) is settled to the run's time instead of being made due
-- again, so no drain spins on it.

alter table agent_kit_runs add column retry_due_at timestamptz;

create or replace function agent_kit_claim_run(p_run_id uuid, p_owner text, p_ttl interval, p_budget interval)
returns setof agent_kit_runs language plpgsql rows 1 as $$
declare
  v_now timestamptz := agent_kit_now();
begin
  if p_owner is null or p_owner = '' then
    raise exception 'owner is required' using errcode = 'AK001';
  end if;
  if p_ttl is null or p_ttl <= interval '0' then
    raise exception 'lease ttl must be a positive interval, got %', coalesce(p_ttl::text, 'NULL') using errcode = 'AK001';
  end if;
  if p_budget is null or p_budget <= interval '0' then
    raise exception 'invocation budget must be a positive interval, got %', coalesce(p_budget::text, 'NULL')
      using errcode = 'AK001';
  end if;
  return query
  with claimed as (
    update agent_kit_runs r set
      status = 'running', owner = p_owner, fence = r.fence + 1, attempts = r.attempts + 1,
      deadline_at = v_now + p_budget, lease_expires_at = v_now + least(p_ttl, p_budget),
      heartbeat_at = v_now, retry_due_at = null, updated_at = now()
    where r.id = p_run_id
      and ((r.status = 'queued'
          and (r.retry_due_at is null or r.retry_due_at <= v_now or r.cancel_requested_at is not null))
        or (r.status = 'running' and r.lease_expires_at <= v_now)
        or (r.status in ('waiting_input', 'waiting_takeover') and r.cancel_requested_at is not null))
      and not exists (
        select 1 from agent_kit_runs e
        where e.thread_id = r.thread_id and e.turn_no < r.turn_no and e.status = 'queued')
      and not exists (
        select 1 from agent_kit_runs e
        where e.thread_id = r.thread_id and e.turn_no < r.turn_no
          and e.status in ('running', 'waiting_input', 'waiting_takeover'))
    returning r.*
  ), dropped as (
    delete from agent_kit_jobs j using claimed c where j.run_id = c.id
  )
  select * from claimed;
end $$;

alter function agent_kit_claim_run(uuid, text, interval, interval) rows 1;

create or replace function agent_kit_park_for_retry(
  p_run_id uuid, p_owner text, p_fence bigint, p_delay interval, p_data jsonb)
returns bigint language plpgsql as $$
declare
  v_run agent_kit_runs;
  v_status text := 'queued';
  v_due timestamptz;
  v_seq bigint;
begin
  if p_delay is null or p_delay < interval '0' then
    raise exception 'a retry waits a delay of zero or more, got %', coalesce(p_delay::text, 'NULL') using errcode = 'AK001';
  end if;
  select * into v_run from agent_kit_runs
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  for update;
  if not found then
    return null;
  end if;
  v_due := agent_kit_now() + p_delay;
  if v_run.cancel_requested_at is not null then
    v_due := agent_kit_now();
  elsif v_run.takeover_requested_at is not null then
    v_status := 'waiting_takeover';
  end if;
  update agent_kit_runs set
    status = v_status, owner = null, lease_expires_at = null, deadline_at = null,
    takeover_requested_at = null, updated_at = now(),
    retry_due_at = case when v_status = 'queued' and v_due > agent_kit_now() then v_due end
  where id = p_run_id;
  v_seq := agent_kit__append_event(v_run.thread_id, p_run_id, p_fence, 'model-retry',
    coalesce(p_data, '{}') || jsonb_build_object('text', v_run.partial, 'dueAt', v_due));
  perform agent_kit__append_event(v_run.thread_id, p_run_id, p_fence, 'run-parked',
    jsonb_build_object('runId', p_run_id, 'fence', p_fence, 'status', v_status,
      'requested', 'queued', 'waitingFor', v_run.waiting_for, 'dueAt', v_due));
  if v_status = 'queued' then
    perform agent_kit__enqueue(p_run_id, v_due);
  end if;
  return v_seq;
end $$;

create or replace function agent_kit_settle_job(p_job_id bigint)
returns text language plpgsql as $$
declare
  v_run_id uuid;
  v_run agent_kit_runs;
begin
  select run_id into v_run_id from agent_kit_jobs where id = p_job_id;
  if not found then
    return 'gone';
  end if;
  select * into v_run from agent_kit_runs where id = v_run_id for share;
  if not found then
    return 'gone';
  end if;
  -- The job's row lock before deciding (after the run's: runs before jobs, as everywhere). A
  -- concurrent enqueue of this run (the close of the turn before it) now waits for this settle,
  -- then inserts a fresh job if this one was dropped; without the lock it could update the job
  -- between the check below and the delete, and the delete took the re-enqueued job with it.
  perform 1 from agent_kit_jobs where id = p_job_id for update;
  if not found then
    return 'gone';
  end if;
  if v_run.status in ('completed', 'failed', 'aborted') then
    delete from agent_kit_jobs where id = p_job_id;
    return 'dropped';
  end if;
  if v_run.status = 'running' and v_run.lease_expires_at > agent_kit_now() then
    update agent_kit_jobs set due_at = v_run.lease_expires_at
    where id = p_job_id and due_at > agent_kit_now();
    return 'rescheduled';
  end if;
  if (v_run.status in ('queued', 'running') or v_run.cancel_requested_at is not null)
      and not exists (
        select 1 from agent_kit_runs e
        where e.thread_id = v_run.thread_id and e.turn_no < v_run.turn_no and e.status = 'queued')
      and not exists (
        select 1 from agent_kit_runs e
        where e.thread_id = v_run.thread_id and e.turn_no < v_run.turn_no
          and e.status in ('running', 'waiting_input', 'waiting_takeover')) then
    if v_run.status = 'queued' and v_run.retry_due_at > agent_kit_now() and v_run.cancel_requested_at is null then
      update agent_kit_jobs set due_at = v_run.retry_due_at where id = p_job_id;
      return 'rescheduled';
    end if;
    update agent_kit_jobs set due_at = agent_kit_now() where id = p_job_id;
    return 'due';
  end if;
  delete from agent_kit_jobs where id = p_job_id and due_at > agent_kit_now();
  if not found then
    return 'due'; -- re-enqueued since it was taken: whoever did so made it claimable
  end if;
  return 'dropped';
end $$;
