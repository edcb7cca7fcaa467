-- A run parked queued says why: the segment's invocation ran out of time (a slice), its process
-- was asked to stop (a deploy's SIGTERM), it handed the run back after a store error, or it
-- started too late in its invocation to finish a step (ADR-0113). The run-parked event carries it
-- as data.reason, so `agent-kit show` can tell a slice from a stop (ADR-0121). The parameter is
-- last, with a default: code from before this migration calls both functions as it did. A
-- function is known by its arguments, so the old ones are dropped, not left as overloads.

drop function agent_kit_park_run(uuid, text, bigint, text, jsonb);
drop function agent_kit_park_started_late(uuid, text, bigint);

create function agent_kit_park_run(p_run_id uuid, p_owner text, p_fence bigint, p_status text,
  p_waiting_for jsonb default null, p_reason text default null)
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
  if p_reason is not null and p_reason not in ('slice', 'stop', 'store-error', 'started-late') then
    raise exception 'park reason must be slice, stop, store-error or started-late, got %', p_reason
      using errcode = 'AK001';
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
      'requested', p_status, 'waitingFor', coalesce(p_waiting_for, v_run.waiting_for))
      || case when p_reason is null then '{}'::jsonb else jsonb_build_object('reason', p_reason) end);
  if v_status = 'queued' then
    perform agent_kit__enqueue(p_run_id, agent_kit_now());
  end if;
  return true;
end $$;


create function agent_kit_park_started_late(p_run_id uuid, p_owner text, p_fence bigint,
  p_reason text default 'started-late')
returns boolean
language plpgsql as $$
declare
  v_attempts int;
begin
  -- The lock agent_kit_park_run takes next, taken once (ADR-0112).
  select r.attempts into v_attempts from agent_kit_runs r
  where r.id = p_run_id and r.owner = p_owner and r.fence = p_fence and r.status = 'running'
  for update;
  if not found then
    return false;
  end if;
  if not agent_kit_park_run(p_run_id, p_owner, p_fence, 'queued', null, p_reason) then
    return false;
  end if;
  -- Parked queued (not waiting_takeover, which starts the count again): the count before this claim.
  update agent_kit_runs set attempts = greatest(v_attempts - 1, 0)
  where id = p_run_id and status = 'queued';
  return true;
end $$;
