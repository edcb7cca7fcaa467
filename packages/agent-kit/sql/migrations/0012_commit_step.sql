-- One round trip per step boundary (benchmark 2b: a turn cost 15–16 round trips, each a commit).
-- agent_kit_commit_step does under one guard and in one transaction what the engine did in up to
-- four statements at the end of a step:
-- * mirror the step's last unwritten text (partial + text-delta event, as agent_kit_mirror_partial);
-- * finish the tool call's effect (as agent_kit_record_effect with a final status), so a tool
--   result is never journalled without its ledger entry or the other way round;
-- * journal the step with its event (as agent_kit_record_step);
-- * close the run with the final message (agent_kit_close_run) when the step ends the turn,
--   unless a cancel or takeover is pending: then the step is kept and the engine honours the
--   interrupt (close aborted, or park), as the mirror's last write used to make it do;
-- and it returns the run's pending interrupt, so the step boundary needs no read of its own.
-- No row = the guard rejected (lease lost, or the reaper settled the effect after the lease
-- expired): nothing was written.

create or replace function agent_kit_commit_step(
  p_run_id uuid, p_owner text, p_fence bigint,
  p_step_no int, p_kind text, p_data jsonb, p_event_type text, p_event_data jsonb,
  p_delta text default null,
  p_effect_key text default null, p_effect_status text default null, p_effect_result jsonb default null,
  p_close_status text default null, p_close_message jsonb default null)
returns table (seq bigint, interrupt text, message_id uuid) language plpgsql as $$
declare
  v_thread_id uuid;
  v_cancel timestamptz;
  v_takeover timestamptz;
begin
  if p_effect_key is not null and (p_effect_status is null or p_effect_status not in ('completed', 'failed', 'in_doubt')) then
    raise exception 'a finished effect is completed, failed or in_doubt, got %', coalesce(p_effect_status, 'NULL')
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
  return next;
end $$;
