-- A long thread made every claim and close slower. "Is an earlier turn of this thread still open"
-- (claim, settle, takeover) and "which queued turn comes next" (close) scanned every earlier run
-- of the thread through (thread_id, turn_no) and filtered on status: on a thread of 5,000 closed
-- turns, 5,000 rows and ~0.5 ms per claim and per close, growing with the thread.
--
-- Open runs are few per thread: at most one active (running, waiting_input, waiting_takeover:
-- agent_kit_runs__active_run_key) and the queued turns behind it. A partial index of the queued
-- runs answers the rest. It costs one index entry when a run is queued (a new turn, a requeue, a
-- park); a claim, renew, mirror write or close writes none, since their new row is not queued.
-- The check is now two lookups, one per index, each bounded by the thread's open runs.

create index agent_kit_runs__queued_turn_idx on agent_kit_runs (thread_id, turn_no) where status = 'queued';

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
      heartbeat_at = v_now, updated_at = now()
    where r.id = p_run_id
      and (r.status = 'queued'
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
    update agent_kit_jobs set due_at = agent_kit_now() where id = p_job_id;
    return 'due';
  end if;
  delete from agent_kit_jobs where id = p_job_id and due_at > agent_kit_now();
  if not found then
    return 'due'; -- re-enqueued since it was taken: whoever did so made it claimable
  end if;
  return 'dropped';
end $$;

create or replace function agent_kit_takeover_run(p_run_id uuid, p_operator text)
returns text language plpgsql as $$
declare
  v_run agent_kit_runs;
begin
  select * into v_run from agent_kit_runs where id = p_run_id for update;
  if not found then
    raise exception 'run % not found', p_run_id using errcode = 'AK002';
  end if;
  if v_run.status in ('completed', 'failed', 'aborted') then
    raise exception 'run % is % and cannot be taken over', p_run_id, v_run.status using errcode = 'AK004';
  end if;
  if v_run.cancel_requested_at is not null then
    raise exception 'run % is being cancelled and cannot be taken over', p_run_id using errcode = 'AK004';
  end if;
  if exists (select 1 from agent_kit_runs e where e.thread_id = v_run.thread_id and e.turn_no < v_run.turn_no
        and e.status = 'queued')
      or exists (select 1 from agent_kit_runs e where e.thread_id = v_run.thread_id and e.turn_no < v_run.turn_no
        and e.status in ('running', 'waiting_input', 'waiting_takeover')) then
    raise exception 'run % is behind an earlier open run of its thread', p_run_id using errcode = 'AK004';
  end if;
  if v_run.status in ('queued', 'waiting_input') then
    update agent_kit_runs set status = 'waiting_takeover', taken_over_by = p_operator, attempts = 0,
      updated_at = now() where id = p_run_id;
    delete from agent_kit_jobs where run_id = p_run_id;
    perform agent_kit__append_event(v_run.thread_id, p_run_id, 0, 'run-parked', jsonb_build_object(
      'runId', p_run_id, 'status', 'waiting_takeover', 'requested', 'waiting_takeover', 'operator', p_operator));
    return 'waiting_takeover';
  elsif v_run.status = 'running' then
    update agent_kit_runs set takeover_requested_at = now(), taken_over_by = p_operator, updated_at = now()
    where id = p_run_id;
    perform agent_kit__append_event(v_run.thread_id, p_run_id, 0, 'takeover-requested',
      jsonb_build_object('runId', p_run_id, 'operator', p_operator));
  end if;
  return v_run.status;
end $$;
