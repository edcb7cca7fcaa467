-- A second takeover of a run already held (or asked to be held) by another operator changed
-- nothing and said it had: `agent-kit takeover R --by bob` printed "held by bob" while the run
-- stayed alice's (taken_over_by), found by an outsider's trial. Now it is refused with the
-- holder's name (AK004); the same operator asking again gets the same answer as the first time.
-- Otherwise as migration 0008 left it.

create or replace function agent_kit_takeover_run(p_run_id uuid, p_operator text)
returns text
language plpgsql as $$
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
  if (v_run.status = 'waiting_takeover' or v_run.takeover_requested_at is not null)
      and v_run.taken_over_by is distinct from p_operator then
    raise exception 'run % is already %, by %', p_run_id,
      case when v_run.status = 'waiting_takeover' then 'held' else 'being taken over' end,
      coalesce(v_run.taken_over_by, 'another operator') using errcode = 'AK004';
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
  elsif v_run.status = 'running' and v_run.takeover_requested_at is null then
    update agent_kit_runs set takeover_requested_at = now(), taken_over_by = p_operator, updated_at = now()
    where id = p_run_id;
    perform agent_kit__append_event(v_run.thread_id, p_run_id, 0, 'takeover-requested',
      jsonb_build_object('runId', p_run_id, 'operator', p_operator));
  end if;
  return v_run.status;
end $$;
