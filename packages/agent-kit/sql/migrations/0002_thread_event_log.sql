-- The durable thread event log (ADR-0003): everything visible a turn does is appended to a
-- per-thread, gap-free, ordered log, so a viewer resumes from its last seq and replays.

-- Gap-free seq: the thread row is the counter. Appending updates it, which also serialises
-- appends per thread (a sequence object would leave gaps on rollback).
alter table agent_kit_threads add column last_seq bigint not null default 0;

create table agent_kit_thread_events (
  thread_id uuid not null references agent_kit_threads(id) on delete cascade,
  seq bigint not null,
  run_id uuid references agent_kit_runs(id) on delete cascade,
  -- The segment that wrote it (migration 0003 adds leases; 0 = no segment).
  fence bigint not null default 0,
  type text not null,
  data jsonb not null default '{}',
  created_at timestamptz not null default now(),
  primary key (thread_id, seq)
);

-- Unguarded append, used by guarded callers after they checked their lease, and for events
-- that belong to no segment (a user's message). Notifies viewers with "thread_id:seq".
create function agent_kit__append_event(
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
  perform pg_notify('agent_kit_events', p_thread_id::text || ':' || v_seq::text);
  return v_seq;
end $$;

-- Closing now also tells viewers, in the same transaction.
create or replace function agent_kit_close_run(p_run_id uuid, p_status text, p_message jsonb)
returns uuid language plpgsql as $$
declare
  v_run agent_kit_runs;
  v_message_id uuid;
begin
  if p_status not in ('completed', 'failed', 'aborted') then
    raise exception 'close status must be completed, failed or aborted, got %', p_status using errcode = 'AK001';
  end if;
  select * into v_run from agent_kit_runs where id = p_run_id for update;
  if not found then
    raise exception 'run % not found', p_run_id using errcode = 'AK002';
  end if;
  if v_run.status in ('completed', 'failed', 'aborted') then
    return null;
  end if;
  insert into agent_kit_messages (thread_id, run_id, role, content, partial)
  values (v_run.thread_id, p_run_id, 'assistant', p_message, p_status <> 'completed')
  returning id into v_message_id;
  update agent_kit_runs set status = p_status, message_id = v_message_id, updated_at = now()
  where id = p_run_id;
  perform agent_kit__append_event(v_run.thread_id, p_run_id, 0, 'run-closed', jsonb_build_object(
    'status', p_status, 'messageId', v_message_id, 'text', p_message->>'text',
    'partial', p_status <> 'completed'));
  return v_message_id;
end $$;
