-- Found by a review that drove the SQL functions against each other on Postgres (ADR-0112).
--
-- agent_kit_commit_step locked its run FOR SHARE when the step carried no text, and a closing
-- step then upgraded that lock in agent_kit_close_run, after it had taken the finished effect's
-- row and the thread's. The reaper's agent_kit_reconcile_effect, once the lease had run out,
-- shares the run and then updates the effect: with the segment's last step finishing an effect
-- and closing the run at that moment, each waited for the other (40P01). A step that closes now
-- locks the run FOR NO KEY UPDATE from the start, as a step with text already did.
--
-- agent_kit_claim_due_runs locked its candidate runs FOR UPDATE, the one mode that also blocks
-- the KEY SHARE lock a foreign key check takes: inserting a job, event or message of such a run
-- (a close enqueueing the thread's next turn) waited for the whole claim statement, and SKIP
-- LOCKED passed over a candidate that such an insert held. The claim changes no key,
-- so FOR NO KEY UPDATE is the lock it needs.

create or replace function agent_kit_commit_step(p_run_id uuid, p_owner text, p_fence bigint, p_step_no integer, p_kind text, p_data jsonb, p_event_type text, p_event_data jsonb, p_delta text DEFAULT NULL::text, p_effect_key text DEFAULT NULL::text, p_effect_status text DEFAULT NULL::text, p_effect_result jsonb DEFAULT NULL::jsonb, p_close_status text DEFAULT NULL::text, p_close_message jsonb DEFAULT NULL::jsonb, p_start_key text DEFAULT NULL::text, p_start_tool text DEFAULT NULL::text, p_start_input jsonb DEFAULT NULL::jsonb)
 RETURNS TABLE(seq bigint, interrupt text, message_id uuid, started_status text, started_fence bigint, started_result jsonb)
 LANGUAGE plpgsql
AS $$
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
  -- The guard, and the row lock its writes need: a step that updates the run (its delta, or the
  -- close) locks it for that update at once, never sharing it first and upgrading later.
  if coalesce(p_delta, '') <> '' or p_close_status is not null then
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

create or replace function agent_kit_claim_due_runs(p_owners text[], p_ttl interval, p_budget interval, p_max_attempts integer)
 RETURNS SETOF agent_kit_runs
 LANGUAGE plpgsql
 ROWS 10
AS $$
declare
  v_now timestamptz := agent_kit_now();
  v_wanted int := coalesce(cardinality(p_owners), 0);
  v_claimed int := 0;
  v_candidates uuid[];
  v_run_id uuid;
begin
  if v_wanted < 1 or v_wanted > 1000 then
    raise exception 'owners must be an array of 1..1000 lease owners, got %', v_wanted using errcode = 'AK001';
  end if;
  if array_position(p_owners, null) is not null or array_position(p_owners, '') is not null then
    raise exception 'every owner must be a non-empty string' using errcode = 'AK001';
  end if;
  if (select count(distinct o) from unnest(p_owners) o) <> v_wanted then
    raise exception 'owners must be distinct (one per segment)' using errcode = 'AK001';
  end if;
  if p_max_attempts is null or p_max_attempts < 1 then
    raise exception 'max attempts must be at least 1, got %', coalesce(p_max_attempts::text, 'NULL') using errcode = 'AK001';
  end if;
  -- agent_kit_claim_run checks them too, but only when something is due.
  perform agent_kit__check_ttl('lease ttl', p_ttl);
  perform agent_kit__check_ttl('invocation budget', p_budget);
  -- Candidates: the earliest due jobs, a few more than wanted (some may be unclaimable or held),
  -- read through agent_kit_jobs__due_at_idx; then their runs by primary key (`= any`, so it is an
  -- index scan even when the planner's statistics are stale), locked in due order. Only runs that
  -- agent_kit_claim_run would accept are locked: the holder of a live lease must never wait on
  -- this statement to write its mirror, commit or close. agent_kit_claim_run decides each one.
  v_candidates := array(
    select q.run_id from agent_kit_jobs q where q.due_at <= v_now order by q.due_at limit 2 * v_wanted + 8);
  for v_run_id in
    select r.id
    from agent_kit_runs r
    where r.id = any(v_candidates)
      and (r.status = 'queued'
        or (r.status = 'running' and r.lease_expires_at <= v_now and r.attempts < p_max_attempts)
        or (r.status in ('waiting_input', 'waiting_takeover') and r.cancel_requested_at is not null))
    order by array_position(v_candidates, r.id)
    for no key update of r skip locked
  loop
    return query select * from agent_kit_claim_run(v_run_id, p_owners[v_claimed + 1], p_ttl, p_budget);
    if found then
      v_claimed := v_claimed + 1;
      exit when v_claimed = v_wanted;
    end if;
  end loop;
end $$;
