-- A cancel (or takeover) recorded while the model was still deciding reached the segment only
-- with the commit of the model step that asked for tool calls, and that same commit had already
-- started the first call's effect (migration 0016). The engine then ran every call of the step
-- before it closed the run aborted: payments made after the user pressed Cancel.
-- The engine now runs no tool call once a cancel or takeover is pending, and
-- agent_kit_commit_step starts no effect when it reports one: started_* come back NULL, as for a
-- call that runs no effect. The signature and return type are unchanged (create or replace).

create or replace function agent_kit_commit_step(
  p_run_id uuid, p_owner text, p_fence bigint,
  p_step_no int, p_kind text, p_data jsonb, p_event_type text, p_event_data jsonb,
  p_delta text default null,
  p_effect_key text default null, p_effect_status text default null, p_effect_result jsonb default null,
  p_close_status text default null, p_close_message jsonb default null,
  p_start_key text default null, p_start_tool text default null, p_start_input jsonb default null)
returns table (
  seq bigint, interrupt text, message_id uuid,
  started_status text, started_fence bigint, started_result jsonb
) language plpgsql as $$
declare
  v_thread_id uuid;
  v_cancel timestamptz;
  v_takeover timestamptz;
begin
  if p_effect_key is not null and (p_effect_status is null or p_effect_status not in ('completed', 'failed', 'in_doubt')) then
    raise exception 'a finished effect is completed, failed or in_doubt, got %', coalesce(p_effect_status, 'NULL')
      using errcode = 'AK001';
  end if;
  if p_start_key is not null and (p_start_key = '' or p_start_tool is null or p_close_status is not null) then
    raise exception 'an effect to start needs a key and a tool name, and a closing step starts none'
      using errcode = 'AK001';
  end if;
  -- The guard, and the row lock its writes need.
  if coalesce(p_delta, '') <> '' then
    select r.thread_id, r.cancel_requested_at, r.takeover_requested_at into v_thread_id, v_cancel, v_takeover
    from agent_kit_runs r
    where r.id = p_run_id and r.owner = p_owner and r.fence = p_fence and r.status = 'running'
    for no key update;
  else
    select r.thread_id, r.cancel_requested_at, r.takeover_requested_at into v_thread_id, v_cancel, v_takeover
    from agent_kit_runs r
    where r.id = p_run_id and r.owner = p_owner and r.fence = p_fence and r.status = 'running'
    for share;
  end if;
  if not found then
    return;
  end if;
  -- An effect the reaper already settled (completed or failed, from the tool's reconcile hook)
  -- means our lease expired while the tool ran: we are a zombie, so write nothing. An in_doubt
  -- one is overwritten with what really happened.
  if p_effect_key is not null then
    update agent_kit_effects e set status = p_effect_status, result = p_effect_result, fence = p_fence,
      finished_at = case when p_effect_status = 'in_doubt' then null else now() end
    where e.run_id = p_run_id and e.key = p_effect_key and e.status in ('started', 'in_doubt');
    if not found then
      return;
    end if;
  end if;
  if coalesce(p_delta, '') <> '' then
    update agent_kit_runs set partial = partial || p_delta, heartbeat_at = agent_kit_now() where id = p_run_id;
    perform agent_kit__append_event(v_thread_id, p_run_id, p_fence, 'text-delta', jsonb_build_object('text', p_delta));
  end if;
  insert into agent_kit_steps (run_id, step_no, kind, fence, data)
  values (p_run_id, p_step_no, p_kind, p_fence, p_data);
  seq := case when p_event_type is null then 0
    else agent_kit__append_event(v_thread_id, p_run_id, p_fence, p_event_type, p_event_data) end;
  interrupt := case when v_cancel is not null then 'cancel' when v_takeover is not null then 'takeover' end;
  -- A pending cancel or takeover is the segment's to honour (close aborted, or park): the step
  -- is kept, the close is not made.
  if p_close_status is not null and interrupt is null then
    message_id := agent_kit_close_run(p_run_id, p_close_status, p_close_message, p_owner, p_fence);
  end if;
  -- A pending cancel or takeover: the segment honours it before the next tool call runs, so that
  -- call's effect is not started (a started effect nobody runs would end in_doubt, or stay
  -- started under a closed run).
  if p_start_key is not null and interrupt is null then
    insert into agent_kit_effects (run_id, key, status, fence, tool, input)
    values (p_run_id, p_start_key, 'started', p_fence, p_start_tool, p_start_input)
    on conflict (run_id, key) do nothing;
    select e.status, e.fence, e.result into started_status, started_fence, started_result
    from agent_kit_effects e where e.run_id = p_run_id and e.key = p_start_key;
  end if;
  return next;
end $$;
