-- A second takeover of a run already held (or asked to be held) by another operator changed
-- nothing and said it had: `agent-kit takeover R --by bob` printed "held by bob" while the run
-- stayed alice's (taken_over_by), found by an outsider's trial. Now it is refused with the
-- holder's name (AK004); the same operator asking again gets the same answer as the first time.
-- Otherwise as migration 0008 left it.
--
-- agent_kit_park_run parked a run `waiting_takeover` when its segment asked for that although the
-- takeover had been released in between (the segment saw it at a write, then the operator let
-- go): held by nobody, it could be taken over by no one (found by review). Such a park is now
-- `queued`, and the run goes on. Otherwise as migration 0008 left it.

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
      and v_run.taken_over_by <> p_operator then
    raise exception 'run % is already %, by %', p_run_id,
      case when v_run.status = 'waiting_takeover' then 'held' else 'being taken over' end,
      v_run.taken_over_by using errcode = 'AK004';
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
  elsif v_run.status = 'waiting_takeover' and v_run.taken_over_by is null then
    -- Held by nobody (parked so before migration 0044): this operator holds it now.
    update agent_kit_runs set taken_over_by = p_operator, updated_at = now() where id = p_run_id;
  elsif v_run.status = 'running' and v_run.takeover_requested_at is null then
    update agent_kit_runs set takeover_requested_at = now(), taken_over_by = p_operator, updated_at = now()
    where id = p_run_id;
    perform agent_kit__append_event(v_run.thread_id, p_run_id, 0, 'takeover-requested',
      jsonb_build_object('runId', p_run_id, 'operator', p_operator));
  end if;
  return v_run.status;
end $$;

create or replace function agent_kit_park_run(p_run_id uuid, p_owner text, p_fence bigint, p_status text,
  p_waiting_for jsonb default null)
returns boolean
language plpgsql as $$
declare
  v_run agent_kit_runs;
  v_status text := p_status;
begin
  if p_status is null or p_status not in ('queued', 'waiting_input', 'waiting_takeover') then
    raise exception 'park status must be queued, waiting_input or waiting_takeover, got %',
      coalesce(p_status, 'NULL') using errcode = 'AK001';
  end if;
  select * into v_run from agent_kit_runs
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  for update;
  if not found then
    return false;
  end if;
  if v_run.cancel_requested_at is not null then
    v_status := 'queued';
  elsif v_run.takeover_requested_at is not null then
    v_status := 'waiting_takeover';
  elsif p_status = 'waiting_takeover' then
    -- The takeover the segment saw was released since: nobody would hold the run.
    v_status := 'queued';
  elsif p_status = 'waiting_input' and exists (
      select 1 from agent_kit_inputs i
      where i.run_id = p_run_id and i.consumed_at is null
        and (coalesce(p_waiting_for, v_run.waiting_for)->>'id' is null
          or i.question_id = coalesce(p_waiting_for, v_run.waiting_for)->>'id')) then
    v_status := 'queued';
  end if;
  update agent_kit_runs set
    status = v_status, owner = null, lease_expires_at = null, deadline_at = null, attempts = 0,
    waiting_for = coalesce(p_waiting_for, waiting_for), takeover_requested_at = null,
    updated_at = now()
  where id = p_run_id;
  perform agent_kit__append_event(v_run.thread_id, p_run_id, p_fence, 'run-parked',
    jsonb_build_object('runId', p_run_id, 'fence', p_fence, 'status', v_status,
      'requested', p_status, 'waitingFor', coalesce(p_waiting_for, v_run.waiting_for)));
  if v_status = 'queued' then
    perform agent_kit__enqueue(p_run_id, agent_kit_now());
  end if;
  return true;
end $$;
