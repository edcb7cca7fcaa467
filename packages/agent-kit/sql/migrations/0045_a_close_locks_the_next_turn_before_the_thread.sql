-- A close gives the thread's next queued turn its job after taking the thread row. The job's
-- foreign key then takes a key-share lock on that run, and a cancel of it, which locks that run
-- first and the thread row next, closed a cycle with the close: Postgres failed one of them with
-- 40P01 (found by review, next to the same order in agent_kit_reply_to_run, migration 0043). The
-- close now finds and key-share locks the next run before the thread row, as every writer of a
-- run takes runs before threads (ADR-0104). Otherwise as migration 0030 left it.

create or replace function agent_kit_close_run(p_run_id uuid, p_status text, p_message jsonb,
  p_owner text default null, p_fence bigint default null)
returns uuid language plpgsql as $$
declare
  v_thread_id uuid;
  v_message_id uuid;
  v_partial boolean := p_status <> 'completed';
  v_seq bigint;
  v_next uuid;
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
  v_message_id := gen_random_uuid();
  -- The guard and the row lock in one statement: ordered before or after any claim.
  update agent_kit_runs set
    status = p_status, message_id = v_message_id, owner = null, lease_expires_at = null,
    deadline_at = null, waiting_for = null, updated_at = now()
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  returning thread_id into v_thread_id;
  if not found then
    return null;
  end if;
  insert into agent_kit_messages (id, thread_id, run_id, role, content, partial)
  values (v_message_id, v_thread_id, p_run_id, 'assistant', p_message, v_partial);
  delete from agent_kit_jobs where run_id = p_run_id;
  -- The thread's next queued turn, which gets its job below: locked before the thread row.
  select r.id into v_next from agent_kit_runs r
  where r.thread_id = v_thread_id and r.status = 'queued' order by r.turn_no limit 1
  for key share;
  update agent_kit_threads set last_seq = last_seq + 1 where id = v_thread_id returning last_seq into v_seq;
  insert into agent_kit_thread_events (thread_id, seq, run_id, fence, type, data)
  values (v_thread_id, v_seq, p_run_id, p_fence, 'run-closed', jsonb_build_object(
    'runId', p_run_id, 'status', p_status, 'messageId', v_message_id,
    'text', p_message->>'text', 'partial', v_partial, 'fence', p_fence)
    -- Why a run failed, for every viewer of the thread, not only for readers of its message.
    || case when p_message ? 'error' then jsonb_build_object('error', p_message->'error') else '{}'::jsonb end);
  -- The thread's next queued turn can run now.
  if v_next is not null then
    perform agent_kit__enqueue(v_next, agent_kit_now());
  end if;
  return v_message_id;
end $$;
