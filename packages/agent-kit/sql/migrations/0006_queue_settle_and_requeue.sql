-- The drain's and the reaper's writes to the queue. A job is never lost: the drain settles a job
-- it could not use under the run's row lock (so a concurrent park, answer or close that
-- re-enqueued the same job wins), and the reaper requeues an expired run only under the fence it
-- saw. Lock order as everywhere: runs, then jobs.

-- Give an open run a job due now (or keep an earlier one) and wake the workers. With p_fence
-- (the reaper's requeue) only while the run is still running under that fence with an expired
-- lease, so a run that a drain claimed meanwhile gets no stray job. False = nothing enqueued.
create function agent_kit_enqueue_run(p_run_id uuid, p_fence bigint default null)
returns boolean language plpgsql as $$
declare
  v_run agent_kit_runs;
begin
  select * into v_run from agent_kit_runs where id = p_run_id for share;
  if not found then
    raise exception 'run % not found', p_run_id using errcode = 'AK002';
  end if;
  if p_fence is not null then
    if v_run.status <> 'running' or v_run.fence <> p_fence or v_run.lease_expires_at > agent_kit_now() then
      return false;
    end if;
  elsif v_run.status in ('completed', 'failed', 'aborted') then
    return false;
  end if;
  perform agent_kit__enqueue(p_run_id, agent_kit_now());
  return true;
end $$;

-- Settle a job whose run the drain could not claim. Returns what became of it:
--   'gone'        the job no longer exists (the run was claimed or closed elsewhere);
--   'dropped'     the run is closed, or waits/is blocked: whatever makes it claimable again
--                 (an answer, a release, a cancel, the earlier run's close) enqueues it anew;
--   'rescheduled' the run has a live lease: the job comes due when that lease expires;
--   'due'         the run is claimable after all (a race), or the job was re-enqueued since it
--                 was taken: the job stays, due now.
-- A job still under the drain's visibility lock has due_at > now; an enqueue since then set it
-- to now (least()), and such a job is left alone rather than dropped.
create function agent_kit_settle_job(p_job_id bigint) returns text
language plpgsql as $$
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
        where e.thread_id = v_run.thread_id and e.turn_no < v_run.turn_no
          and e.status in ('queued', 'running', 'waiting_input', 'waiting_takeover')) then
    update agent_kit_jobs set due_at = agent_kit_now() where id = p_job_id;
    return 'due';
  end if;
  delete from agent_kit_jobs where id = p_job_id and due_at > agent_kit_now();
  if not found then
    return 'due'; -- re-enqueued since it was taken: whoever did so made it claimable
  end if;
  return 'dropped';
end $$;
