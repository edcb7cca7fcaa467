-- Appending an event no longer sends NOTIFY inside the transaction. Postgres serialises the
-- commits of every transaction that notifies (one database-wide lock held through the commit),
-- which cut the guarded mirror write and close to a third of a bare UPDATE's throughput. The
-- library now notifies viewers after commit, in a statement of its own (store/notify-thread.ts);
-- a lost notification only delays a viewer until its next poll. Callers that append through
-- plain SQL should `select pg_notify('agent_kit_events', thread_id || ':' || seq)` themselves
-- or rely on the viewers' poll. The job queue's NOTIFY (rare: new turns, parks, answers) stays.
create or replace function agent_kit__append_event(
  p_thread_id uuid, p_run_id uuid, p_fence bigint, p_type text, p_data jsonb)
returns bigint language plpgsql as $$
declare
  v_seq bigint;
begin
  update agent_kit_threads set last_seq = last_seq + 1 where id = p_thread_id returning last_seq into v_seq;
  if not found then
    raise exception 'thread % not found', p_thread_id using errcode = 'AK002';
  end if;
  insert into agent_kit_thread_events (thread_id, seq, run_id, fence, type, data)
  values (p_thread_id, v_seq, p_run_id, p_fence, p_type, coalesce(p_data, '{}'));
  return v_seq;
end $$;
