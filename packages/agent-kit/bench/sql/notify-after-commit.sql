-- PROPOSAL, not a library migration: NOTIFY after the write commits, not inside it. Postgres
-- serialises the commits of notifying transactions (PreCommit_Notify holds a database-wide lock
-- through the commit's WAL flush), so with NOTIFY inside every mirror write and close, 8 writers
-- commit one at a time. Here the append stays durable and unchanged but does not notify; the
-- writer then sends the notifications in a separate transaction with synchronous_commit off
-- (no flush under the lock). A lost notification only delays a viewer until its poll, exactly
-- as a dropped LISTEN connection does today. The bench applies this to its own database only.

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

-- Send notifications for writes that already committed, in one statement, without waiting for
-- a WAL flush (set_config(..., true) lasts until this transaction's commit, which is when it
-- matters; a function-level SET clause would be undone before the commit).
create or replace function agent_kit_notify_after_commit(p_channel text, p_payloads text[])
returns int language plpgsql as $$
begin
  perform set_config('synchronous_commit', 'off', true);
  perform pg_notify(p_channel, payload) from unnest(p_payloads) as payload;
  return coalesce(cardinality(p_payloads), 0);
end $$;
