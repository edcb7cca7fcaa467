-- Starting a turn now takes its locks in the order every other function does (runs, then
-- threads): it locks the thread's active run before the thread row, so it can no longer
-- deadlock against a cancel, a park or an answer on that run. And a retried first message (no
-- thread id yet) finds the thread its first attempt created: client message ids are unique per
-- owner, not only per thread, so a retried POST never creates a second run (ADR-0001).
-- Also agent_kit_schema_version(), the schema's own answer to "which migration am I at".

create index agent_kit_messages__client_message_id_idx on agent_kit_messages (client_message_id)
  where client_message_id is not null;

create function agent_kit_schema_version() returns int language sql stable as $$
  select coalesce(max(version), 0) from agent_kit_migrations
$$;

create or replace function agent_kit_start_turn(
  p_thread_id uuid, p_owner_id text, p_text text,
  p_client_message_id text default null, p_job_delay interval default interval '0')
returns table (thread_id uuid, message_id uuid, run_id uuid, created boolean, kind text)
language plpgsql as $$
declare
  v_thread_id uuid := p_thread_id;
  v_message_id uuid;
  v_run_id uuid;
  v_active agent_kit_runs;
  v_turn_no int;
begin
  if p_owner_id is null or p_owner_id = '' then
    raise exception 'owner_id is required' using errcode = 'AK001';
  end if;
  if p_text is null or p_text = '' then
    raise exception 'message text is required' using errcode = 'AK001';
  end if;
  if p_job_delay is null or p_job_delay < interval '0' then
    raise exception 'job delay must be a non-negative interval' using errcode = 'AK001';
  end if;
  if p_client_message_id is not null then
    -- Serialise retries of one client message (transaction-scoped: safe behind a pooler).
    perform pg_advisory_xact_lock(hashtext('agent_kit_start_turn:' || p_owner_id || ':' || p_client_message_id));
    select m.id, m.run_id, m.thread_id into v_message_id, v_run_id, v_thread_id
    from agent_kit_messages m join agent_kit_threads t on t.id = m.thread_id
    where m.client_message_id = p_client_message_id and t.owner_id = p_owner_id
      and (p_thread_id is null or m.thread_id = p_thread_id)
    limit 1;
    if found then
      return query select v_thread_id, v_message_id, v_run_id, false, 'duplicate'::text;
      return;
    end if;
    v_thread_id := p_thread_id;
  end if;

  if v_thread_id is null then
    insert into agent_kit_threads (owner_id, title) values (p_owner_id, left(p_text, 80))
    returning id into v_thread_id;
  else
    -- Another owner's thread is "not found", so a caller cannot learn that it exists.
    perform 1 from agent_kit_threads t where t.id = v_thread_id and t.owner_id = p_owner_id;
    if not found then
      raise exception 'thread % not found', v_thread_id using errcode = 'AK002';
    end if;
    -- Lock order: the thread's active run first, then the thread row (turn numbers are assigned
    -- one at a time under it). A run that parks for input after this point asked its question
    -- after this message was sent, so the message rightly becomes the next turn.
    select * into v_active from agent_kit_runs r
    where r.thread_id = v_thread_id and r.status in ('running', 'waiting_input', 'waiting_takeover')
    for update;
    perform 1 from agent_kit_threads t where t.id = v_thread_id for update;
  end if;

  if v_active.status = 'waiting_input' then
    insert into agent_kit_messages (thread_id, run_id, role, content, client_message_id)
    values (v_thread_id, v_active.id, 'user', jsonb_build_object('text', p_text), p_client_message_id)
    returning id into v_message_id;
    perform agent_kit__append_event(v_thread_id, v_active.id, 0, 'message', jsonb_build_object(
      'messageId', v_message_id, 'role', 'user', 'text', p_text, 'runId', v_active.id));
    perform agent_kit_submit_input(v_active.id, coalesce(v_active.waiting_for->>'id', 'message'),
      jsonb_build_object('text', p_text, 'messageId', v_message_id));
    return query select v_thread_id, v_message_id, v_active.id, true, 'input'::text;
    return;
  end if;

  select coalesce(max(r.turn_no), 0) + 1 into v_turn_no from agent_kit_runs r where r.thread_id = v_thread_id;
  insert into agent_kit_runs (thread_id, turn_no) values (v_thread_id, v_turn_no) returning id into v_run_id;
  insert into agent_kit_messages (thread_id, run_id, role, content, client_message_id)
  values (v_thread_id, v_run_id, 'user', jsonb_build_object('text', p_text), p_client_message_id)
  returning id into v_message_id;
  perform agent_kit__append_event(v_thread_id, v_run_id, 0, 'message', jsonb_build_object(
    'messageId', v_message_id, 'role', 'user', 'text', p_text, 'runId', v_run_id));
  perform agent_kit__append_event(v_thread_id, v_run_id, 0, 'run-queued', jsonb_build_object(
    'runId', v_run_id, 'turnNo', v_turn_no));
  perform agent_kit__enqueue(v_run_id, agent_kit_now() + p_job_delay);
  return query select v_thread_id, v_message_id, v_run_id, true, 'turn'::text;
end $$;
