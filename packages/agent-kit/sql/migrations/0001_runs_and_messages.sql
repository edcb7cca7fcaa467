-- Threads, messages and runs (ADR-0001). A user message creates a run; a run ends with exactly
-- one final assistant message. In this first shape one place runs a turn, so there is no lease
-- (ADR-0002, superseded by ADR-0004 in migration 0003).

create table agent_kit_threads (
  id uuid primary key default gen_random_uuid(),
  owner_id text not null,
  title text,
  created_at timestamptz not null default now()
);

create table agent_kit_runs (
  id uuid primary key default gen_random_uuid(),
  thread_id uuid not null references agent_kit_threads(id) on delete cascade,
  -- Position of the turn in its thread: later runs queue behind earlier ones in this order.
  turn_no int not null,
  status text not null default 'queued' check (status in (
    'queued', 'waiting_input', 'waiting_takeover', 'running', 'completed', 'failed', 'aborted')),
  partial text not null default '',
  message_id uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (thread_id, turn_no)
);

create table agent_kit_messages (
  id uuid primary key default gen_random_uuid(),
  thread_id uuid not null references agent_kit_threads(id) on delete cascade,
  run_id uuid references agent_kit_runs(id) on delete cascade,
  role text not null check (role in ('user', 'assistant', 'system')),
  -- content->>'text' is the whole text of the message.
  content jsonb not null check (jsonb_typeof(content) = 'object' and jsonb_typeof(content->'text') = 'string'),
  partial boolean not null default false,
  -- A retried POST carries the same client id and finds the message it already created.
  client_message_id text,
  created_at timestamptz not null default now()
);

create index agent_kit_messages__thread_id_idx on agent_kit_messages (thread_id, created_at);
create index agent_kit_runs__thread_id_idx on agent_kit_runs (thread_id, turn_no);
create unique index agent_kit_messages__client_message_id_key
  on agent_kit_messages (thread_id, client_message_id) where client_message_id is not null;
-- Invariant 3: a run has at most one final assistant message.
create unique index agent_kit_messages__run_answer_key
  on agent_kit_messages (run_id) where role = 'assistant';

-- Close a run with its final assistant message, in one transaction. Unguarded in this shape:
-- one place ran the turn. Returns the message id, or NULL when the run is already closed.
create function agent_kit_close_run(p_run_id uuid, p_status text, p_message jsonb)
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
  return v_message_id;
end $$;
