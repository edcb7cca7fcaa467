-- agent_kit_settle_job could lose a job. Settling the job of a run that was blocked by an
-- earlier turn, it checked "blocked" and then deleted the job; if that earlier turn closed in
-- between, its close re-enqueued this run by updating the same job row, and the delete (its
-- `due_at > now()` recheck compares against the settler's older transaction time) removed the
-- re-enqueued job: the run stayed queued with no job. Seen as a flaky drain test under load
-- ("queued turns in order": 1 of 3 closed). The settle now locks the job row before deciding.

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
