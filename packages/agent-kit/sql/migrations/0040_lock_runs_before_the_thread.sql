-- Found by a review that drove these functions against each other on Postgres (ADR-0104).
--
-- agent_kit_regenerate_turn locked the message's run after the thread row, and every writer of a
-- run (a claim, a segment's writes, a close, a cancel) takes its run first: a regenerate asked
-- while the turn was still queued, as its claim came, deadlocked with it (40P01, the whole batch
-- of a drain's claim rolled back, a 500 for the regenerate). It and agent_kit_restore_turn now
-- take, in order: a transaction lock on the thread's conversation (they alone change which runs
-- are current, so the runs they read next stay the ones to lock), every run they may change or
-- wait for, and the thread row; they read the message's run without a lock. (A run that closed
-- while agent_kit_start_turn waited for it stays locked by that start until it commits: the
-- supersede step, under the thread row, waited for it while the start waited for the row.)
--
-- agent_kit_park_for_retry, honouring a takeover asked for while the segment ran, dropped the
-- retry's wait and kept the attempts spent: the release had the provider asked again at once,
-- and at the last attempt the turn was given up unasked. It now keeps the wait and starts the
-- count again, as a takeover of the parked run does.
--
-- agent_kit_fail_segment took the stack out of the event with `p_error - 'stack'`, which raises
-- for an error that is not an object (a string, a number, null): the segment kept its lease and
-- wrote nothing. A stack in the error's cause reached viewers. It now strips the stack from the
-- error and each cause, and passes any other JSON as it is.

create or replace function agent_kit_regenerate_turn(
  p_thread_id uuid, p_owner_id text, p_message text, p_job_delay interval default '0', p_text text default null,
  p_replaces uuid default null
) returns table(thread_id uuid, message_id uuid, run_id uuid, superseded uuid[], created boolean)
language plpgsql as $$
declare
  v_message agent_kit_messages;
  v_run agent_kit_runs;
  v_open agent_kit_runs;
  v_replaced agent_kit_runs;
  v_regenerated jsonb;
  v_run_id uuid;
  v_turn_no int;
  v_superseded uuid[];
  v_edited boolean;
  v_from_turn int;
begin
  if p_owner_id is null or p_owner_id = '' then
    raise exception 'owner_id is required' using errcode = 'AK001';
  end if;
  if p_message is null or p_message = '' then
    raise exception 'the message to regenerate is required' using errcode = 'AK001';
  end if;
  if p_job_delay is null or p_job_delay < interval '0' then
    raise exception 'job delay must be a non-negative interval' using errcode = 'AK001';
  end if;
  if p_text = '' then
    raise exception 'an edited message needs a text' using errcode = 'AK001';
  end if;
  perform 1 from agent_kit_threads t where t.id = p_thread_id and t.owner_id = p_owner_id;
  if not found then
    raise exception 'thread % not found', p_thread_id using errcode = 'AK002';
  end if;
  -- Lock order (ADR-0104): first the thread's conversation, which only regenerations and
  -- restores change (a lock of its own, so that what is read next stays true), then every run
  -- this call may change or wait for, then the thread row, as every writer of a run takes its run
  -- before the thread row. Those runs are the thread's active one and its current ones from the
  -- message's turn on.
  perform pg_advisory_xact_lock(hashtext('agent_kit_conversation:' || p_thread_id::text));
  select r.turn_no into v_from_turn from agent_kit_messages m join agent_kit_runs r on r.id = m.run_id
  where m.thread_id = p_thread_id and m.client_message_id = p_message and m.role = 'user';
  if not found and p_message ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' then
    select r.turn_no into v_from_turn from agent_kit_messages m join agent_kit_runs r on r.id = m.run_id
    where m.id = p_message::uuid and m.thread_id = p_thread_id and m.role = 'user';
  end if;
  perform 1 from agent_kit_runs r
  where r.thread_id = p_thread_id
    and (r.status in ('running', 'waiting_input', 'waiting_takeover')
      or (r.superseded_by is null and r.turn_no >= v_from_turn))
  order by r.turn_no
  for no key update;
  perform 1 from agent_kit_threads t where t.id = p_thread_id for update;

  select * into v_message from agent_kit_messages m
  where m.thread_id = p_thread_id and m.client_message_id = p_message and m.role = 'user';
  if not found and p_message ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' then
    select * into v_message from agent_kit_messages m
    where m.id = p_message::uuid and m.thread_id = p_thread_id and m.role = 'user';
  end if;
  if v_message.id is null or v_message.run_id is null then
    raise exception 'message % not found in thread %', p_message, p_thread_id using errcode = 'AK002';
  end if;
  -- Read, not locked: locked above when it is the turn read there; a run locked now, under the
  -- thread row, would wait for a claim or a close that waits for the thread row.
  select * into v_run from agent_kit_runs r where r.id = v_message.run_id;
  v_edited := p_text is not null and p_text is distinct from v_message.content->>'text';
  if p_replaces is not null then
    select * into v_replaced from agent_kit_runs r where r.id = p_replaces and r.thread_id = p_thread_id;
    if not found then
      raise exception 'run % not found in thread %', p_replaces, p_thread_id using errcode = 'AK002';
    end if;
    -- Replaced already, by a run that regenerated it (its turn-regenerated says so) and is still
    -- part of the conversation: when that run answers this request (the message named moved to
    -- it, to the text asked; or the message stayed with the old turn, an answer or an edited
    -- message, and the regeneration was the one asked: an edit to this text, or none), this is
    -- the same request sent again (its response lost) or another page's for the same reply. That
    -- run is the answer, and nothing is written. (The thread row lock orders the regenerations of
    -- a thread: superseded_by does not change under this call.)
    if v_replaced.superseded_by is not null then
      select e.data into v_regenerated from agent_kit_thread_events e join agent_kit_runs r on r.id = e.run_id
      where e.run_id = v_replaced.superseded_by and e.type = 'turn-regenerated' and r.superseded_by is null
        and e.data->>'regenerates' = p_replaces::text;
      if v_regenerated is not null and (
          (v_run.id = v_replaced.superseded_by and not v_edited)
          or (v_run.id = v_replaced.id and case when v_edited
              -- (the message the edit replaced: the first of its old turn, not an answer)
              then (v_regenerated->>'edited')::boolean and v_regenerated->>'text' = p_text
                and not exists (select 1 from agent_kit_messages m where m.run_id = v_run.id and m.role = 'user'
                  and (m.created_at, m.id) < (v_message.created_at, v_message.id))
              else not (v_regenerated->>'edited')::boolean end)) then
        return query select p_thread_id, (v_regenerated->>'messageId')::uuid, v_replaced.superseded_by,
          (select array_agg(r.id order by r.turn_no) from agent_kit_runs r where r.superseded_by = v_replaced.superseded_by),
          false;
        return;
      end if;
    end if;
    if v_replaced.superseded_by is not null or v_replaced.id <> v_run.id then
      raise exception 'message %''s reply is no longer run %: it was regenerated, edited or replaced since', p_message, p_replaces
        using errcode = 'AK004';
    end if;
  end if;
  if v_run.superseded_by is not null then
    raise exception 'the turn of message % was replaced when an earlier reply was regenerated', p_message
      using errcode = 'AK004';
  end if;
  select * into v_open from agent_kit_runs r
  where r.thread_id = p_thread_id and r.turn_no >= v_run.turn_no and r.superseded_by is null
    and r.status not in ('completed', 'failed', 'aborted')
  order by r.turn_no limit 1;
  if found then
    raise exception 'turn % of thread % is %: a reply is regenerated once every turn from it on has ended',
      v_open.turn_no, p_thread_id, v_open.status using errcode = 'AK004';
  end if;
  -- The message that began the turn (an answer to the turn's question names its turn; it is
  -- not edited: its question may not be asked again).
  if v_edited and exists (select 1 from agent_kit_messages m where m.run_id = v_run.id and m.role = 'user'
      and (m.created_at, m.id) < (v_message.created_at, v_message.id)) then
    raise exception 'message % answered a question of its turn: it is not edited (send a new message, or regenerate)', p_message
      using errcode = 'AK004';
  end if;
  select * into v_message from agent_kit_messages m
  where m.run_id = v_run.id and m.role = 'user' order by m.created_at, m.id limit 1;

  select coalesce(max(r.turn_no), 0) + 1 into v_turn_no from agent_kit_runs r where r.thread_id = p_thread_id;
  insert into agent_kit_runs (thread_id, turn_no) values (p_thread_id, v_turn_no) returning id into v_run_id;
  with replaced as (
    update agent_kit_runs r set superseded_by = v_run_id, updated_at = now()
    where r.thread_id = p_thread_id and r.turn_no >= v_run.turn_no and r.turn_no < v_turn_no
      and r.superseded_by is null
    returning r.id, r.turn_no
  )
  select array_agg(id order by turn_no) into v_superseded from replaced;
  if v_edited then
    -- The client id goes with the new text: a page shows the edited message under the id it has.
    update agent_kit_messages set client_message_id = null where id = v_message.id;
    insert into agent_kit_messages (thread_id, run_id, role, content, client_message_id)
    values (p_thread_id, v_run_id, 'user', jsonb_build_object('text', p_text), v_message.client_message_id)
    returning * into v_message;
  else
    update agent_kit_messages set run_id = v_run_id where id = v_message.id;
  end if;
  perform agent_kit__append_event(p_thread_id, v_run_id, 0, 'turn-regenerated', jsonb_build_object(
    'runId', v_run_id, 'regenerates', v_run.id, 'superseded', to_jsonb(v_superseded),
    'messageId', v_message.id, 'text', v_message.content->>'text', 'edited', v_edited));
  perform agent_kit__append_event(p_thread_id, v_run_id, 0, 'run-queued', jsonb_build_object(
    'runId', v_run_id, 'turnNo', v_turn_no));
  perform agent_kit__enqueue(v_run_id, agent_kit_now() + p_job_delay);
  return query select p_thread_id, v_message.id, v_run_id, v_superseded, true;
end $$;

create or replace function agent_kit_restore_turn(p_run_id uuid, p_owner_id text)
returns table(thread_id uuid, run_id uuid, message_id uuid, superseded uuid[], restored boolean)
language plpgsql as $$
declare
  v_run agent_kit_runs;
  v_at agent_kit_runs;
  v_open agent_kit_runs;
  v_message agent_kit_messages;
  v_current agent_kit_messages;
  v_client_id text;
  v_superseded uuid[];
  v_steps int := 0;
begin
  if p_owner_id is null or p_owner_id = '' then
    raise exception 'owner_id is required' using errcode = 'AK001';
  end if;
  select * into v_run from agent_kit_runs r where r.id = p_run_id;
  if not found or not exists (
      select 1 from agent_kit_threads t where t.id = v_run.thread_id and t.owner_id = p_owner_id) then
    raise exception 'run % not found', p_run_id using errcode = 'AK002';
  end if;
  -- Lock order (ADR-0104): the thread's conversation, which only regenerations and restores
  -- change, then every run this call may change or wait for, then the thread row. Those runs:
  -- this one, the active one, and the current ones from this run's turn on (the runs that
  -- replaced it came after it).
  perform pg_advisory_xact_lock(hashtext('agent_kit_conversation:' || v_run.thread_id::text));
  perform 1 from agent_kit_runs r
  where r.thread_id = v_run.thread_id
    and (r.id = p_run_id or r.status in ('running', 'waiting_input', 'waiting_takeover')
      or (r.superseded_by is null and r.turn_no >= v_run.turn_no))
  order by r.turn_no
  for no key update;
  perform 1 from agent_kit_threads t where t.id = v_run.thread_id for update;
  select * into v_run from agent_kit_runs r where r.id = p_run_id;
  if v_run.superseded_by is null then
    return query select v_run.thread_id, v_run.id, agent_kit__opening_message(v_run.id), '{}'::uuid[], false;
    return;
  end if;

  -- The run in its place now: follow superseded_by while each run took the place of the one
  -- before (regenerated its reply, or was restored in its place).
  v_at := v_run;
  while v_at.superseded_by is not null loop
    v_steps := v_steps + 1;
    if v_steps > 10000 then
      raise exception 'run %: no end to the runs that replaced it', p_run_id using errcode = 'AK004';
    end if;
    perform 1 from agent_kit_thread_events e
    where e.run_id = v_at.superseded_by and e.type in ('turn-regenerated', 'turn-restored')
      and coalesce(e.data->>'regenerates', e.data->>'replaces') = v_at.id::text;
    if not found then
      if v_at.id = v_run.id then
        raise exception 'run % is not an earlier answer: it followed a reply that was replaced since (restoring that reply''s answer leaves the turns after it out)', p_run_id
          using errcode = 'AK004';
      end if;
      raise exception 'run %''s place in the conversation was dropped since, when an earlier reply was regenerated', p_run_id
        using errcode = 'AK004';
    end if;
    select * into v_at from agent_kit_runs r where r.id = v_at.superseded_by;
  end loop;

  select * into v_open from agent_kit_runs r
  where r.thread_id = v_run.thread_id and r.superseded_by is null
    and r.status not in ('completed', 'failed', 'aborted')
  order by r.turn_no limit 1;
  if found then
    raise exception 'turn % of thread % is %: an answer is restored once every turn has ended',
      v_open.turn_no, v_run.thread_id, v_open.status using errcode = 'AK004';
  end if;

  -- The opening messages: the restored run's comes back to it, under the client id of the one it
  -- replaces (the same message, after plain regenerations).
  select * into v_message from agent_kit_messages m where m.id = agent_kit__opening_message(v_run.id);
  select * into v_current from agent_kit_messages m where m.id = agent_kit__opening_message(v_at.id);
  if v_message.id is null then
    raise exception 'run % has no opening message to restore', p_run_id using errcode = 'AK004';
  end if;
  if v_current.id is not null and v_current.id <> v_message.id and v_current.client_message_id is not null then
    v_client_id := v_current.client_message_id;
    update agent_kit_messages set client_message_id = null where id = v_current.id;
  end if;
  update agent_kit_messages set run_id = v_run.id, client_message_id = coalesce(v_client_id, client_message_id)
  where id = v_message.id;

  with replaced as (
    update agent_kit_runs r set superseded_by = v_run.id, updated_at = now()
    where r.thread_id = v_run.thread_id and r.turn_no >= v_at.turn_no and r.superseded_by is null
    returning r.id, r.turn_no
  )
  select array_agg(id order by turn_no) into v_superseded from replaced;
  update agent_kit_runs set superseded_by = null, updated_at = now() where id = v_run.id;
  perform agent_kit__append_event(v_run.thread_id, v_run.id, 0, 'turn-restored', jsonb_build_object(
    'runId', v_run.id, 'replaces', v_at.id, 'superseded', to_jsonb(v_superseded),
    'messageId', v_message.id, 'text', v_message.content->>'text'));
  return query select v_run.thread_id, v_run.id, v_message.id, v_superseded, true;
end $$;

create or replace function agent_kit_park_for_retry(
  p_run_id uuid, p_owner text, p_fence bigint, p_delay interval, p_data jsonb)
returns bigint language plpgsql as $$
declare
  v_run agent_kit_runs;
  v_status text := 'queued';
  v_due timestamptz;
  v_seq bigint;
begin
  if p_delay is null or p_delay < interval '0' then
    raise exception 'a retry waits a delay of zero or more, got %', coalesce(p_delay::text, 'NULL') using errcode = 'AK001';
  end if;
  select * into v_run from agent_kit_runs
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  for update;
  if not found then
    return null;
  end if;
  v_due := agent_kit_now() + p_delay;
  if v_run.cancel_requested_at is not null then
    v_due := agent_kit_now();
  elsif v_run.takeover_requested_at is not null then
    v_status := 'waiting_takeover';
  end if;
  -- A takeover honoured here hands the run to an operator, as a park for one does: the count of
  -- attempts starts again, and the wait stays (a release cannot lift the provider's limit).
  update agent_kit_runs set
    status = v_status, owner = null, lease_expires_at = null, deadline_at = null,
    takeover_requested_at = null, updated_at = now(),
    attempts = case when v_status = 'waiting_takeover' then 0 else attempts end,
    retry_due_at = case when v_due > agent_kit_now() then v_due end
  where id = p_run_id;
  v_seq := agent_kit__append_event(v_run.thread_id, p_run_id, p_fence, 'model-retry',
    coalesce(p_data, '{}') || jsonb_build_object('text', v_run.partial, 'dueAt', v_due));
  perform agent_kit__append_event(v_run.thread_id, p_run_id, p_fence, 'run-parked',
    jsonb_build_object('runId', p_run_id, 'fence', p_fence, 'status', v_status,
      'requested', 'queued', 'waitingFor', v_run.waiting_for, 'dueAt', v_due));
  if v_status = 'queued' then
    perform agent_kit__enqueue(p_run_id, v_due);
  end if;
  return v_seq;
end $$;

create or replace function agent_kit__error_for_viewers(p_error jsonb) returns jsonb
language plpgsql immutable as $$
begin
  if jsonb_typeof(p_error) is distinct from 'object' then
    return p_error;
  end if;
  if jsonb_typeof(p_error->'cause') = 'object' then
    return jsonb_set(p_error - 'stack', '{cause}', agent_kit__error_for_viewers(p_error->'cause'));
  end if;
  return p_error - 'stack';
end $$;

create or replace function agent_kit_fail_segment(p_run_id uuid, p_owner text, p_fence bigint, p_error jsonb)
returns boolean language plpgsql as $$
declare
  v_thread_id uuid;
  v_attempts int;
  v_seq bigint;
begin
  update agent_kit_runs set
    lease_expires_at = least(agent_kit_now(), coalesce(deadline_at, agent_kit_now())),
    last_error = p_error, updated_at = now()
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  returning thread_id, attempts into v_thread_id, v_attempts;
  if not found then
    return false;
  end if;
  v_seq := agent_kit__append_event(v_thread_id, p_run_id, p_fence, 'segment-failed',
    jsonb_build_object('runId', p_run_id, 'fence', p_fence, 'attempt', v_attempts,
      'error', agent_kit__error_for_viewers(p_error)));
  return true;
end $$;

update agent_kit_thread_events set data = jsonb_set(data, '{error}', agent_kit__error_for_viewers(data->'error'))
where type = 'segment-failed' and jsonb_typeof(data->'error'->'cause') = 'object';
