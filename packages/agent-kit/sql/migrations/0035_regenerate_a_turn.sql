-- Regenerate a reply (ADR-0091). `useChat`'s regenerate() sent the last user message again, with
-- its id; agent-kit found the message stored and streamed the same turn: no new answer. Now a
-- turn can be asked again: a new run (the thread's next turn number) answers the same user
-- message, and the turn it replaces, with every turn after it, is superseded: kept, with its
-- reply and events, for operators and the log, but no longer part of the conversation. The model
-- of a later turn is not given a superseded turn, and the thread's reads leave it out.
--
-- The user message moves to the new run (its id and client id stay), so the new run is an
-- ordinary turn to everything that reads a run's message. A superseded run's answers to its own
-- questions stay with it. Only closed turns can be replaced: a turn under way is stopped first.
--
-- With another text, the message is edited (useChat's sendMessage({ text, messageId })): the new
-- run gets a new user message with that text, under the client id the old one had, and the old
-- message stays with its superseded run.

alter table agent_kit_runs add column superseded_by uuid
  references agent_kit_runs(id) on delete set null;
-- The key's delete action looks a deleted run up by superseded_by: without an index, deleting a
-- thread would read every run once per run it deletes. Only superseded runs have an entry, so
-- the claims and closes that write runs never touch it.
create index agent_kit_runs__superseded_by_idx on agent_kit_runs (superseded_by) where superseded_by is not null;

-- p_message: the user message whose turn is asked again, by the client id it was sent with or by
-- its stored id. One that answered its turn's question names that turn, which starts again from
-- the message that began it. p_text, when given and not the message's text, is its edited text.
create function agent_kit_regenerate_turn(
  p_thread_id uuid, p_owner_id text, p_message text, p_job_delay interval default '0', p_text text default null
) returns table(thread_id uuid, message_id uuid, run_id uuid, superseded uuid[])
language plpgsql as $$
declare
  v_message agent_kit_messages;
  v_run agent_kit_runs;
  v_open agent_kit_runs;
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
  return query select p_thread_id, v_message.id, v_run_id, v_superseded;
end $$;

-- A superseded turn is not part of the conversation a later turn's model is given.
create or replace function agent_kit__history(p_thread_id uuid, p_turn_no int, p_turns int default null)
returns json language plpgsql volatile as $$
declare
  v_history json;
begin
  if p_turns < 0 then
    raise exception 'a history window is 0 or more turns, got %', p_turns using errcode = 'AK001';
  end if;
  if p_turns is null then
    select coalesce(json_agg(json_build_object('role', t.role, 'text', t.text)
        order by t.turn_no, case when t.role = 'user' then 0 else 1 end), '[]')
    into v_history
    from (
      select m.role, m.content->>'text' as text, r.turn_no,
             row_number() over (partition by m.run_id, m.role order by m.created_at) as nth
      from agent_kit_messages m join agent_kit_runs r on r.id = m.run_id
      where m.thread_id = p_thread_id and r.turn_no <= p_turn_no and m.role in ('user', 'assistant')
        and r.superseded_by is null
    ) t
    where t.nth = 1;
    return v_history;
  end if;
  with w as (
    select r.id, r.turn_no from agent_kit_runs r
    where r.thread_id = p_thread_id and r.turn_no <= p_turn_no and r.superseded_by is null
    order by r.turn_no desc limit p_turns + 1
  )
  select coalesce(json_agg(t.message order by t.turn_no, t.answer), '[]')
  into v_history
  from (
    select w.turn_no, false as answer, json_build_object('role', 'user', 'text', u.content->>'text') as message
    from w cross join lateral (
      select m.content from agent_kit_messages m
      where m.run_id = w.id and m.role = 'user'
      order by m.created_at limit 1
    ) u
    union all
    select w.turn_no, true, json_build_object('role', 'assistant', 'text', a.content->>'text')
    from w cross join lateral (
      select m.content from agent_kit_messages m
      where m.run_id = w.id and m.role = 'assistant'
      limit 1
    ) a
  ) t;
  return v_history;
end $$;

-- A regenerated run's first event is its turn-regenerated: its message was appended long before,
-- under the turn it replaced. The index of each run's boundary events (migration 0020) holds it,
-- so a stream or a page of turns that starts at the run's first event starts there. (Rebuilding
-- the index reads the log once; its entries stay a few per turn.)
drop index agent_kit_thread_events__run_boundary_idx;
create index agent_kit_thread_events__run_boundary_idx on agent_kit_thread_events (run_id, seq)
  where type in ('message', 'segment-started', 'run-parked', 'run-closed', 'segment-failed', 'turn-regenerated');
