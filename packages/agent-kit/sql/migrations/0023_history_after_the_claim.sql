-- A run's first claim reads the conversation before it in the same statement (ADR-0017). That
-- read sat in the statement's select list, so it used the statement's snapshot, taken before
-- agent_kit_claim_run's update, which takes a newer one, decided that every earlier turn was
-- closed. When the previous turn's close committed in between, the run was claimed, but its
-- model was given a history without that turn's answer. A PL/pgSQL function's query takes its
-- own snapshot when it runs, after the claim's, so the history now comes from this function
-- (the engine's begin of a later segment reads it here too: one definition of the history).
--
-- The conversation before a run's journal, as a JSON array of {role, text}: each earlier turn's
-- first user message and final answer, then this run's user message.
create function agent_kit__history(p_thread_id uuid, p_turn_no int) returns json
language plpgsql volatile as $$
declare
  v_history json;
begin
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
end $$;
