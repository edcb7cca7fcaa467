--! breaking
-- The rollout window is over: every caller passes its lease, so closing a run without
-- (owner, fence) is now an error (ADR-0004, "rollout is ordered"). Library versions from
-- before 0003 cannot run against this schema.
create or replace function agent_kit_close_run(p_run_id uuid, p_status text, p_message jsonb,
  p_owner text default null, p_fence bigint default null)
returns uuid language plpgsql as $$
declare
  v_run agent_kit_runs;
  v_message_id uuid;
  v_partial boolean := p_status <> 'completed';
begin
  if p_owner is null or p_fence is null then
    raise exception 'agent_kit_close_run needs the lease (p_owner, p_fence) since migration 0004'
      using errcode = 'AK003';
  end if;
  if p_status is null or p_status not in ('completed', 'failed', 'aborted') then
    raise exception 'close status must be completed, failed or aborted, got %',
      coalesce(p_status, 'NULL') using errcode = 'AK001';
  end if;
  if p_message is null or jsonb_typeof(p_message) <> 'object'
      or jsonb_typeof(p_message->'text') is distinct from 'string' then
    raise exception 'message must be a JSON object with a string "text"' using errcode = 'AK001';
  end if;
  select * into v_run from agent_kit_runs
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  for update;
  if not found then
    return null;
  end if;
  insert into agent_kit_messages (thread_id, run_id, role, content, partial)
  values (v_run.thread_id, p_run_id, 'assistant', p_message, v_partial)
  returning id into v_message_id;
  update agent_kit_runs set
    status = p_status, message_id = v_message_id, owner = null, lease_expires_at = null,
    deadline_at = null, waiting_for = null, updated_at = now()
  where id = p_run_id;
  delete from agent_kit_jobs where run_id = p_run_id;
  perform agent_kit__append_event(v_run.thread_id, p_run_id, p_fence, 'run-closed',
    jsonb_build_object('runId', p_run_id, 'status', p_status, 'messageId', v_message_id,
      'text', p_message->>'text', 'partial', v_partial, 'fence', p_fence));
  perform agent_kit__enqueue(r.id, agent_kit_now()) from agent_kit_runs r
  where r.thread_id = v_run.thread_id and r.status = 'queued'
  order by r.turn_no limit 1;
  return v_message_id;
end $$;
