-- A run's first claim reads the conversation before it (agent_kit__history, migration 0023). That
-- read took every message of the thread and kept each earlier turn's first user message and
-- answer, so its cost grew with the thread: 55 ms of server CPU and 1.5 MB of JSON for a thread of
-- 2,000 turns, against about 3 ms for a whole scripted turn. A runtime with a window of earlier
-- turns (historyTurns, ADR-0046) then threw away all but the newest few in Node.
--
-- The window now goes into the read (ADR-0047). With one, the function walks the thread's runs
-- from this one back, newest first, by the (thread_id, turn_no) key, taking at most p_turns
-- earlier ones, and looks up each run's first user message and its answer by run (a lateral
-- lookup per run, so a small table is not read whole for a few rows either). A turn is a
-- run, as the window counts it: every run begins with its user message. The result is the same
-- JSON array as before, oldest turn first, each turn's user message before its answer.
--
-- The answer already has an index by run (one per run, migration 0001's unique key). The user
-- message gets one here, holding only user messages: one more index entry per message a person
-- sends. Without a window (p_turns null, the default) the function reads the whole history as
-- migration 0023's did. It replaces that function of two arguments, so a call with two still
-- reads every turn.

create index agent_kit_messages__run_user_idx on agent_kit_messages (run_id, created_at)
  where role = 'user';

drop function agent_kit__history(uuid, int);

create function agent_kit__history(p_thread_id uuid, p_turn_no int, p_turns int default null)
returns json language plpgsql volatile as $$
declare
  v_history json;
begin
  if p_turns < 0 then
    raise exception 'a history window is 0 or more turns, got %', p_turns using errcode = 'AK001';
  end if;
  if p_turns is null then
    -- Every turn: one pass over the thread's messages (23 % faster than a lookup per run at 2,000
    -- turns), migration 0023's query.
    select coalesce(json_agg(json_build_object('role', t.role, 'text', t.text)
        order by t.turn_no, case when t.role = 'user' then 0 else 1 end), '[]')
    into v_history
    from (
      select m.role, m.content->>'text' as text, r.turn_no,
             row_number() over (partition by m.run_id, m.role order by m.created_at) as nth
      from agent_kit_messages m join agent_kit_runs r on r.id = m.run_id
      where m.thread_id = p_thread_id and r.turn_no <= p_turn_no and m.role in ('user', 'assistant')
    ) t
    where t.nth = 1;
    return v_history;
  end if;
  with w as (
    select r.id, r.turn_no from agent_kit_runs r
    where r.thread_id = p_thread_id and r.turn_no <= p_turn_no
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
