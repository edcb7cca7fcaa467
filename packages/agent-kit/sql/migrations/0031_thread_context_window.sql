-- A thread remembers its model's context window (ADR-0069). A prompt past the window is asked
-- again with less of the conversation (ADR-0067), but nothing kept what the refusal taught: every
-- later turn of a long thread sent the whole history again, was refused again, and was cut again,
-- one wasted request per turn.
--
-- The thread now keeps what its last such refusal said: which model refused, and how many
-- characters of prompt to send that model (from the refusal's counts of tokens, or, when it gives
-- none, the size of the prompt cut to be asked next). A segment reads it with the history, in the
-- same statement, and leaves out before the first request what the window cannot hold.
--
-- `context_window` is `{"model": text, "chars": number}` and what else the engine keeps with it
-- (`learnedAt`: it trusts a window for a day), or null until a refusal of the kind. It is an
-- estimate, not part of any turn: a later refusal overwrites it. The write is guarded by the
-- lease all the same, so that only the segment that holds a run of the thread teaches it.

alter table agent_kit_threads add column context_window jsonb;

create function agent_kit_note_context_window(
  p_run_id uuid, p_owner text, p_fence bigint, p_window jsonb)
returns boolean language plpgsql as $$
declare
  v_thread_id uuid;
begin
  if p_window is null or jsonb_typeof(p_window->'model') is distinct from 'string'
      or jsonb_typeof(p_window->'chars') is distinct from 'number' then
    raise exception 'a context window is {"model": text, "chars": number}, got %', coalesce(p_window::text, 'NULL')
      using errcode = 'AK001';
  end if;
  -- As agent_kit_append_event: the run row shared-locked under the guard, then the thread's row.
  select thread_id into v_thread_id from agent_kit_runs
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  for share;
  if not found then
    return false;
  end if;
  update agent_kit_threads set context_window = p_window where id = v_thread_id;
  return true;
end $$;
