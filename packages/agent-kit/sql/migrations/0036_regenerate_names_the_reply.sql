-- Regenerating a reply, again (ADR-0092). A regenerate or an edit whose response was lost, sent
-- again once the new turn had ended, replaced that turn too: nothing told a retry from a new
-- request. Two pages that asked one reply again made two turns, or the second was refused while
-- the first ran.
--
-- p_replaces names the run whose reply the caller saw and asks again. While it is still the
-- message's turn, the call regenerates as before. Once the message's turn is the run that
-- replaced it, to the same text, the call is that regeneration again: it returns that run with
-- created = false and writes nothing, whether the run is under way or ended. Any other run is a
-- conflict (the reply was asked again since, or the turn replaced by an earlier one's). Without
-- p_replaces, every call regenerates, as in 0035.

drop function agent_kit_regenerate_turn(uuid, text, text, interval, text);

create function agent_kit_regenerate_turn(
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
  -- Lock order as agent_kit_start_turn's: the active run, then the thread row.
  perform 1 from agent_kit_runs r
  where r.thread_id = p_thread_id and r.status in ('running', 'waiting_input', 'waiting_takeover')
  for update;
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
  -- (No key update: a foreign key's check on the run, an event appended for it, is not blocked.)
  select * into v_run from agent_kit_runs r where r.id = v_message.run_id for no key update;
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
