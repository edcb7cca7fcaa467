-- Resume a dead run under a fenced lease (ADR-0004). A lease is (owner, fence, expiry); the fence
-- grows by one on every claim, and every write that can corrupt a turn matches (owner, fence) in
-- its WHERE clause or locks the run row with them in the same transaction. Also: the queue, the
-- effect ledger, the step journal and stored inputs, which all hang off the lease.
-- Lock order everywhere: runs, then threads, then jobs/effects/steps/inputs.

-- One clock for leases: the database's, unless a test or the simulator set a fake time.
create table agent_kit_clock (
  id boolean primary key default true check (id),
  fake_now timestamptz
);

create function agent_kit_now() returns timestamptz language sql stable as $$
  select coalesce((select fake_now from agent_kit_clock where id), now())
$$;

alter table agent_kit_runs
  add column owner text,
  add column fence bigint not null default 0,
  -- Segments since the last voluntary hand-off (park, slice): a crash budget, not a turn count.
  add column attempts int not null default 0,
  add column lease_expires_at timestamptz,
  -- The invocation deadline of the current segment: no renewal extends the lease past it.
  add column deadline_at timestamptz,
  add column heartbeat_at timestamptz,
  -- What a waiting_input run waits for: {id, kind, question | toolCall}.
  add column waiting_for jsonb,
  add column cancel_requested_at timestamptz,
  add column takeover_requested_at timestamptz,
  add column taken_over_by text,
  add column last_error jsonb;

-- Invariant: a thread has at most one active run; later messages queue behind it.
create unique index agent_kit_runs__active_run_key on agent_kit_runs (thread_id)
  where status in ('running', 'waiting_input', 'waiting_takeover');
-- The reaper's scan: running runs by lease expiry.
create index agent_kit_runs__lease_expires_at_idx on agent_kit_runs (lease_expires_at)
  where status = 'running';
create index agent_kit_runs__created_at_idx on agent_kit_runs (created_at);

-- The queue: one job per run at most. Taking a job pushes due_at forward (a visibility timeout),
-- so a drain that dies after taking it loses nothing; claiming the run deletes the job.
create table agent_kit_jobs (
  id bigint generated always as identity primary key,
  run_id uuid not null unique references agent_kit_runs(id) on delete cascade,
  due_at timestamptz not null,
  tries int not null default 0,
  created_at timestamptz not null default now()
);
create index agent_kit_jobs__due_at_idx on agent_kit_jobs (due_at);

-- The effect ledger: a tool side effect is `started` before it happens and `completed`/`failed`
-- after; one that a dead segment left `started` is reconciled or marked `in_doubt`, never re-run.
create table agent_kit_effects (
  run_id uuid not null references agent_kit_runs(id) on delete cascade,
  key text not null,
  status text not null check (status in ('started', 'completed', 'failed', 'in_doubt')),
  fence bigint not null,
  tool text not null,
  input jsonb,
  result jsonb,
  started_at timestamptz not null default now(),
  finished_at timestamptz,
  primary key (run_id, key)
);

-- The step journal: each completed model step and tool result, so a resumed segment continues
-- from the last completed step instead of running it again.
create table agent_kit_steps (
  run_id uuid not null references agent_kit_runs(id) on delete cascade,
  step_no int not null check (step_no >= 0),
  kind text not null,
  fence bigint not null,
  data jsonb not null,
  created_at timestamptz not null default now(),
  primary key (run_id, step_no)
);

-- Answers to waiting_input runs (and tool approvals). Unique per question: a replayed answer is
-- refused. Consumed by the segment that records it in the journal, under its fence.
create table agent_kit_inputs (
  id uuid primary key default gen_random_uuid(),
  run_id uuid not null references agent_kit_runs(id) on delete cascade,
  question_id text not null,
  data jsonb not null,
  consumed_fence bigint,
  consumed_at timestamptz,
  created_at timestamptz not null default now(),
  unique (run_id, question_id)
);

create function agent_kit__check_ttl(p_name text, p_value interval) returns void
language plpgsql immutable as $$
begin
  if p_value is null or p_value <= interval '0' then
    raise exception '% must be a positive interval, got %', p_name, coalesce(p_value::text, 'NULL')
      using errcode = 'AK001';
  end if;
end $$;

-- Give a run a job due now (or keep an earlier one) and wake the workers.
create function agent_kit__enqueue(p_run_id uuid, p_due_at timestamptz) returns void
language plpgsql as $$
begin
  insert into agent_kit_jobs (run_id, due_at) values (p_run_id, p_due_at)
  on conflict (run_id) do update set due_at = least(agent_kit_jobs.due_at, excluded.due_at);
  perform pg_notify('agent_kit_jobs', p_run_id::text);
end $$;

-- Start a turn: the user's message, its queued run and job, and their events, in one
-- transaction. A retried call with the same client id returns what the first one created.
-- A message sent while the thread's run waits for input is that input.
create function agent_kit_start_turn(
  p_thread_id uuid, p_owner_id text, p_text text,
  p_client_message_id text default null, p_job_delay interval default interval '0')
returns table (thread_id uuid, message_id uuid, run_id uuid, created boolean, kind text)
language plpgsql as $$
declare
  v_thread_id uuid := p_thread_id;
  v_message_id uuid;
  v_run_id uuid;
  v_waiting agent_kit_runs;
  v_turn_no int;
begin
  if p_owner_id is null or p_owner_id = '' then
    raise exception 'owner_id is required' using errcode = 'AK001';
  end if;
  if p_text is null or p_text = '' then
    raise exception 'message text is required' using errcode = 'AK001';
  end if;
  if p_job_delay is null or p_job_delay < interval '0' then
    raise exception 'job delay must be a non-negative interval' using errcode = 'AK001';
  end if;
  if v_thread_id is null then
    insert into agent_kit_threads (owner_id, title) values (p_owner_id, left(p_text, 80))
    returning id into v_thread_id;
  else
    -- Lock the thread: turn numbers are assigned one at a time. Another owner's thread is
    -- "not found", so a caller cannot learn that it exists.
    perform 1 from agent_kit_threads t where t.id = v_thread_id and t.owner_id = p_owner_id for update;
    if not found then
      raise exception 'thread % not found', v_thread_id using errcode = 'AK002';
    end if;
    if p_client_message_id is not null then
      select m.id, m.run_id into v_message_id, v_run_id from agent_kit_messages m
      where m.thread_id = v_thread_id and m.client_message_id = p_client_message_id;
      if found then
        return query select v_thread_id, v_message_id, v_run_id, false, 'duplicate'::text;
        return;
      end if;
    end if;
    select * into v_waiting from agent_kit_runs r
    where r.thread_id = v_thread_id and r.status = 'waiting_input' for update;
  end if;

  if v_waiting.id is not null then
    insert into agent_kit_messages (thread_id, run_id, role, content, client_message_id)
    values (v_thread_id, v_waiting.id, 'user', jsonb_build_object('text', p_text), p_client_message_id)
    returning id into v_message_id;
    perform agent_kit__append_event(v_thread_id, v_waiting.id, 0, 'message', jsonb_build_object(
      'messageId', v_message_id, 'role', 'user', 'text', p_text, 'runId', v_waiting.id));
    perform agent_kit_submit_input(v_waiting.id, coalesce(v_waiting.waiting_for->>'id', 'message'),
      jsonb_build_object('text', p_text, 'messageId', v_message_id));
    return query select v_thread_id, v_message_id, v_waiting.id, true, 'input'::text;
    return;
  end if;

  select coalesce(max(r.turn_no), 0) + 1 into v_turn_no from agent_kit_runs r where r.thread_id = v_thread_id;
  insert into agent_kit_runs (thread_id, turn_no) values (v_thread_id, v_turn_no) returning id into v_run_id;
  insert into agent_kit_messages (thread_id, run_id, role, content, client_message_id)
  values (v_thread_id, v_run_id, 'user', jsonb_build_object('text', p_text), p_client_message_id)
  returning id into v_message_id;
  perform agent_kit__append_event(v_thread_id, v_run_id, 0, 'message', jsonb_build_object(
    'messageId', v_message_id, 'role', 'user', 'text', p_text, 'runId', v_run_id));
  perform agent_kit__append_event(v_thread_id, v_run_id, 0, 'run-queued', jsonb_build_object(
    'runId', v_run_id, 'turnNo', v_turn_no));
  perform agent_kit__enqueue(v_run_id, agent_kit_now() + p_job_delay);
  return query select v_thread_id, v_message_id, v_run_id, true, 'turn'::text;
end $$;

-- Claim a run: ONE statement. Accepts a queued run, a running run whose lease expired, or a
-- waiting run with a cancel to carry out; and only the thread's earliest open run. Sets owner,
-- deadline, expiry and status, raises fence and attempts, and drops the run's job.
-- The lease never outlives the invocation: expiry = now + least(ttl, budget). See ADR-0004.
create function agent_kit_claim_run(p_run_id uuid, p_owner text, p_ttl interval, p_budget interval)
returns setof agent_kit_runs language plpgsql as $$
begin
  if p_owner is null or p_owner = '' then
    raise exception 'owner is required' using errcode = 'AK001';
  end if;
  perform agent_kit__check_ttl('lease ttl', p_ttl);
  perform agent_kit__check_ttl('invocation budget', p_budget);
  return query
  with claimed as (
    update agent_kit_runs r set
      status = 'running', owner = p_owner, fence = r.fence + 1, attempts = r.attempts + 1,
      deadline_at = agent_kit_now() + p_budget,
      lease_expires_at = agent_kit_now() + least(p_ttl, p_budget),
      heartbeat_at = agent_kit_now(), updated_at = now()
    where r.id = p_run_id
      and (r.status = 'queued'
        or (r.status = 'running' and r.lease_expires_at <= agent_kit_now())
        or (r.status in ('waiting_input', 'waiting_takeover') and r.cancel_requested_at is not null))
      and not exists (
        select 1 from agent_kit_runs e
        where e.thread_id = r.thread_id and e.turn_no < r.turn_no
          and e.status in ('queued', 'running', 'waiting_input', 'waiting_takeover'))
    returning r.*
  ), dropped as (
    delete from agent_kit_jobs j using claimed c where j.run_id = c.id
  )
  select * from claimed;
end $$;

-- The pinned three-argument form: the TTL is the whole invocation budget (the default).
create function agent_kit_claim_run(p_run_id uuid, p_owner text, p_ttl interval)
returns setof agent_kit_runs language sql as $$
  select * from agent_kit_claim_run(p_run_id, p_owner, p_ttl, p_ttl)
$$;

-- Renew a live lease, never past the segment's deadline, never reviving an expired one.
create function agent_kit_renew_lease(p_run_id uuid, p_owner text, p_fence bigint, p_ttl interval)
returns boolean language plpgsql as $$
begin
  perform agent_kit__check_ttl('lease ttl', p_ttl);
  update agent_kit_runs set
    lease_expires_at = least(agent_kit_now() + p_ttl, deadline_at),
    heartbeat_at = agent_kit_now()
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
    and lease_expires_at > agent_kit_now();
  return found;
end $$;

-- Guarded append: lock the run row with (owner, fence) FOR SHARE, so the append is ordered
-- before or after any claim; NULL when the guard rejects (nothing written).
create function agent_kit_append_event(
  p_run_id uuid, p_owner text, p_fence bigint, p_type text, p_data jsonb)
returns bigint language plpgsql as $$
declare
  v_thread_id uuid;
begin
  select thread_id into v_thread_id from agent_kit_runs
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  for share;
  if not found then
    return null;
  end if;
  return agent_kit__append_event(v_thread_id, p_run_id, p_fence, p_type, p_data);
end $$;

-- The stream mirror's write: partial output + heartbeat, and the text-delta event, in one
-- guarded transaction. No row back = lease lost. `interrupt` tells the segment of a stored
-- cancel or takeover intent, so it needs no extra round trip to notice one.
create function agent_kit_mirror_partial(p_run_id uuid, p_owner text, p_fence bigint, p_delta text)
returns table (seq bigint, interrupt text) language plpgsql as $$
declare
  v_run agent_kit_runs;
  v_seq bigint;
begin
  update agent_kit_runs set partial = partial || coalesce(p_delta, ''), heartbeat_at = agent_kit_now()
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  returning * into v_run;
  if not found then
    return;
  end if;
  if coalesce(p_delta, '') <> '' then
    v_seq := agent_kit__append_event(v_run.thread_id, p_run_id, p_fence, 'text-delta',
      jsonb_build_object('text', p_delta));
  end if;
  return query select v_seq, case
    when v_run.cancel_requested_at is not null then 'cancel'
    when v_run.takeover_requested_at is not null then 'takeover' end;
end $$;

-- A segment's start: reset the visible partial to what this segment continues from (the text
-- of completed steps, or the dead segment's partial when continuing mid-step), and tell viewers
-- so they replace the dead segment's text.
create function agent_kit_begin_segment(
  p_run_id uuid, p_owner text, p_fence bigint, p_partial text, p_data jsonb default '{}')
returns bigint language plpgsql as $$
declare
  v_run agent_kit_runs;
begin
  update agent_kit_runs set partial = coalesce(p_partial, ''), heartbeat_at = agent_kit_now()
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  returning * into v_run;
  if not found then
    return null;
  end if;
  return agent_kit__append_event(v_run.thread_id, p_run_id, p_fence, 'segment-started',
    coalesce(p_data, '{}') || jsonb_build_object('runId', p_run_id, 'fence', p_fence,
      'attempt', v_run.attempts, 'owner', p_owner, 'text', v_run.partial,
      'leaseExpiresAt', v_run.lease_expires_at, 'deadlineAt', v_run.deadline_at));
end $$;

-- Park: a voluntary hand-off (waiting_input, waiting_takeover, or queued at a slice end).
-- Releases the lease and resets the crash budget. A stored intent wins over the requested
-- status: cancel → queued (the next segment closes it), takeover → waiting_takeover, an answer
-- that already arrived → queued.
create function agent_kit_park_run(
  p_run_id uuid, p_owner text, p_fence bigint, p_status text, p_waiting_for jsonb default null)
returns boolean language plpgsql as $$
declare
  v_run agent_kit_runs;
  v_status text := p_status;
begin
  if p_status is null or p_status not in ('queued', 'waiting_input', 'waiting_takeover') then
    raise exception 'park status must be queued, waiting_input or waiting_takeover, got %',
      coalesce(p_status, 'NULL') using errcode = 'AK001';
  end if;
  select * into v_run from agent_kit_runs
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  for update;
  if not found then
    return false;
  end if;
  if v_run.cancel_requested_at is not null then
    v_status := 'queued';
  elsif v_run.takeover_requested_at is not null then
    v_status := 'waiting_takeover';
  elsif p_status = 'waiting_input' and exists (
      select 1 from agent_kit_inputs i where i.run_id = p_run_id and i.consumed_at is null) then
    v_status := 'queued';
  end if;
  update agent_kit_runs set
    status = v_status, owner = null, lease_expires_at = null, deadline_at = null, attempts = 0,
    waiting_for = coalesce(p_waiting_for, waiting_for), takeover_requested_at = null,
    updated_at = now()
  where id = p_run_id;
  perform agent_kit__append_event(v_run.thread_id, p_run_id, p_fence, 'run-parked',
    jsonb_build_object('runId', p_run_id, 'fence', p_fence, 'status', v_status,
      'requested', p_status, 'waitingFor', coalesce(p_waiting_for, v_run.waiting_for)));
  if v_status = 'queued' then
    perform agent_kit__enqueue(p_run_id, agent_kit_now());
  end if;
  return true;
end $$;

-- Close a run: final message + run row + closing event, one transaction. With (owner, fence)
-- it is guarded and returns NULL when rejected (nothing written). Without them it is the
-- pre-lease form, kept for the rollout window; migration 0004 makes them required.
drop function agent_kit_close_run(uuid, text, jsonb);
create function agent_kit_close_run(p_run_id uuid, p_status text, p_message jsonb,
  p_owner text default null, p_fence bigint default null)
returns uuid language plpgsql as $$
declare
  v_run agent_kit_runs;
  v_message_id uuid;
  v_partial boolean := p_status <> 'completed';
begin
  if p_status is null or p_status not in ('completed', 'failed', 'aborted') then
    raise exception 'close status must be completed, failed or aborted, got %',
      coalesce(p_status, 'NULL') using errcode = 'AK001';
  end if;
  if p_message is null or jsonb_typeof(p_message) <> 'object'
      or jsonb_typeof(p_message->'text') is distinct from 'string' then
    raise exception 'message must be a JSON object with a string "text"' using errcode = 'AK001';
  end if;
  if (p_owner is null) <> (p_fence is null) then
    raise exception 'pass both owner and fence, or neither' using errcode = 'AK001';
  end if;
  if p_owner is null then
    select * into v_run from agent_kit_runs where id = p_run_id for update;
    if not found then
      raise exception 'run % not found', p_run_id using errcode = 'AK002';
    end if;
    if v_run.status in ('completed', 'failed', 'aborted') then
      return null;
    end if;
  else
    select * into v_run from agent_kit_runs
    where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
    for update;
    if not found then
      return null;
    end if;
  end if;
  insert into agent_kit_messages (thread_id, run_id, role, content, partial)
  values (v_run.thread_id, p_run_id, 'assistant', p_message, v_partial)
  returning id into v_message_id;
  update agent_kit_runs set
    status = p_status, message_id = v_message_id, owner = null, lease_expires_at = null,
    deadline_at = null, waiting_for = null, updated_at = now()
  where id = p_run_id;
  delete from agent_kit_jobs where run_id = p_run_id;
  perform agent_kit__append_event(v_run.thread_id, p_run_id, coalesce(p_fence, 0), 'run-closed',
    jsonb_build_object('runId', p_run_id, 'status', p_status, 'messageId', v_message_id,
      'text', p_message->>'text', 'partial', v_partial, 'fence', coalesce(p_fence, 0)));
  -- The thread's next queued turn can run now.
  perform agent_kit__enqueue(r.id, agent_kit_now()) from agent_kit_runs r
  where r.thread_id = v_run.thread_id and r.status = 'queued'
  order by r.turn_no limit 1;
  return v_message_id;
end $$;

-- Record an effect, guarded. 'started' inserts once per key and returns the row as it stands
-- (a row from an older fence tells the caller to reconcile, not to run the tool). The other
-- statuses finish a started or in-doubt effect. No row back = lease lost (or nothing to finish).
create function agent_kit_record_effect(p_run_id uuid, p_owner text, p_fence bigint, p_key text,
  p_status text, p_tool text default null, p_input jsonb default null, p_result jsonb default null)
returns setof agent_kit_effects language plpgsql as $$
begin
  if p_status is null or p_status not in ('started', 'completed', 'failed', 'in_doubt') then
    raise exception 'effect status must be started, completed, failed or in_doubt, got %',
      coalesce(p_status, 'NULL') using errcode = 'AK001';
  end if;
  if p_key is null or p_key = '' then
    raise exception 'effect key is required' using errcode = 'AK001';
  end if;
  perform 1 from agent_kit_runs
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  for share;
  if not found then
    return;
  end if;
  if p_status = 'started' then
    if p_tool is null then
      raise exception 'tool name is required to start an effect' using errcode = 'AK001';
    end if;
    insert into agent_kit_effects (run_id, key, status, fence, tool, input)
    values (p_run_id, p_key, 'started', p_fence, p_tool, p_input)
    on conflict (run_id, key) do nothing;
    return query select * from agent_kit_effects where run_id = p_run_id and key = p_key;
  else
    return query
    update agent_kit_effects set status = p_status, result = p_result, fence = p_fence,
      finished_at = case when p_status = 'in_doubt' then null else now() end
    where run_id = p_run_id and key = p_key and status in ('started', 'in_doubt')
    returning *;
  end if;
end $$;

-- The reaper's reconciliation of a dead segment's started effect: only while the run is still
-- running with an expired lease under the fence the reaper saw, so it races no live segment.
create function agent_kit_reconcile_effect(p_run_id uuid, p_fence bigint, p_key text,
  p_status text, p_result jsonb default null)
returns boolean language plpgsql as $$
begin
  if p_status is null or p_status not in ('completed', 'failed', 'in_doubt') then
    raise exception 'reconciled status must be completed, failed or in_doubt, got %',
      coalesce(p_status, 'NULL') using errcode = 'AK001';
  end if;
  perform 1 from agent_kit_runs
  where id = p_run_id and fence = p_fence and status = 'running' and lease_expires_at <= agent_kit_now()
  for share;
  if not found then
    return false;
  end if;
  update agent_kit_effects set status = p_status, result = p_result,
    finished_at = case when p_status = 'in_doubt' then null else now() end
  where run_id = p_run_id and key = p_key and status = 'started';
  return found;
end $$;

-- Record a completed step in the journal, guarded, optionally with its event in the same
-- transaction. NULL = lease lost. A step number written twice is a bug and raises.
create function agent_kit_record_step(p_run_id uuid, p_owner text, p_fence bigint, p_step_no int,
  p_kind text, p_data jsonb, p_event_type text default null, p_event_data jsonb default null)
returns bigint language plpgsql as $$
declare
  v_thread_id uuid;
  v_seq bigint;
begin
  select thread_id into v_thread_id from agent_kit_runs
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  for share;
  if not found then
    return null;
  end if;
  insert into agent_kit_steps (run_id, step_no, kind, fence, data)
  values (p_run_id, p_step_no, p_kind, p_fence, p_data);
  if p_event_type is not null then
    v_seq := agent_kit__append_event(v_thread_id, p_run_id, p_fence, p_event_type, p_event_data);
  end if;
  return coalesce(v_seq, 0);
end $$;

-- Store an answer to a run's question (or a tool approval). Accepted while the run waits for
-- it, and while the segment that asked is still finishing (the park then requeues the run).
-- A second answer to the same question is refused. Returns the run's status afterwards.
create function agent_kit_submit_input(p_run_id uuid, p_question_id text, p_data jsonb)
returns text language plpgsql as $$
declare
  v_run agent_kit_runs;
begin
  if p_question_id is null or p_question_id = '' or p_data is null then
    raise exception 'an input needs a question id and data' using errcode = 'AK001';
  end if;
  select * into v_run from agent_kit_runs where id = p_run_id for update;
  if not found then
    raise exception 'run % not found', p_run_id using errcode = 'AK002';
  end if;
  if v_run.status not in ('running', 'waiting_input') then
    raise exception 'run % is % and takes no input', p_run_id, v_run.status using errcode = 'AK004';
  end if;
  if v_run.status = 'waiting_input' and v_run.waiting_for->>'id' is distinct from p_question_id then
    raise exception 'run % waits for an answer to %, not %', p_run_id,
      coalesce(v_run.waiting_for->>'id', 'nothing'), p_question_id using errcode = 'AK004';
  end if;
  insert into agent_kit_inputs (run_id, question_id, data) values (p_run_id, p_question_id, p_data)
  on conflict (run_id, question_id) do nothing;
  if not found then
    raise exception 'question % of run % was already answered', p_question_id, p_run_id using errcode = 'AK004';
  end if;
  perform agent_kit__append_event(v_run.thread_id, p_run_id, 0, 'input-received',
    jsonb_build_object('runId', p_run_id, 'questionId', p_question_id, 'data', p_data));
  if v_run.status = 'waiting_input' then
    update agent_kit_runs set status = 'queued', updated_at = now() where id = p_run_id;
    perform agent_kit__enqueue(p_run_id, agent_kit_now());
    return 'queued';
  end if;
  return v_run.status;
end $$;

-- Consume a stored answer, guarded; the caller records it as a journal step in the same
-- transaction, so it is consumed exactly once. NULL when not found or already consumed.
create function agent_kit_consume_input(p_run_id uuid, p_owner text, p_fence bigint, p_question_id text)
returns jsonb language plpgsql as $$
declare
  v_data jsonb;
begin
  perform 1 from agent_kit_runs
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  for share;
  if not found then
    return null;
  end if;
  update agent_kit_inputs set consumed_fence = p_fence, consumed_at = now()
  where run_id = p_run_id and question_id = p_question_id and consumed_at is null
  returning data into v_data;
  return v_data;
end $$;

-- Cancel is a stored intent. A running segment sees it and closes the run as aborted; a
-- waiting or queued run gets a job so that a segment does so.
create function agent_kit_request_cancel(p_run_id uuid) returns text
language plpgsql as $$
declare
  v_run agent_kit_runs;
begin
  select * into v_run from agent_kit_runs where id = p_run_id for update;
  if not found then
    raise exception 'run % not found', p_run_id using errcode = 'AK002';
  end if;
  if v_run.status in ('completed', 'failed', 'aborted') then
    return v_run.status;
  end if;
  if v_run.cancel_requested_at is null then
    update agent_kit_runs set cancel_requested_at = now(), updated_at = now() where id = p_run_id;
    perform agent_kit__append_event(v_run.thread_id, p_run_id, 0, 'cancel-requested',
      jsonb_build_object('runId', p_run_id));
  end if;
  if v_run.status <> 'running' then
    perform agent_kit__enqueue(p_run_id, agent_kit_now());
  end if;
  return v_run.status;
end $$;

-- An operator takes over the thread's current run. Not running: parked at once. Running: a
-- stored intent that the segment honours at its next write, by parking.
create function agent_kit_takeover_run(p_run_id uuid, p_operator text) returns text
language plpgsql as $$
declare
  v_run agent_kit_runs;
begin
  select * into v_run from agent_kit_runs where id = p_run_id for update;
  if not found then
    raise exception 'run % not found', p_run_id using errcode = 'AK002';
  end if;
  if v_run.status in ('completed', 'failed', 'aborted') then
    raise exception 'run % is % and cannot be taken over', p_run_id, v_run.status using errcode = 'AK004';
  end if;
  if exists (select 1 from agent_kit_runs e where e.thread_id = v_run.thread_id and e.turn_no < v_run.turn_no
      and e.status in ('queued', 'running', 'waiting_input', 'waiting_takeover')) then
    raise exception 'run % is behind an earlier open run of its thread', p_run_id using errcode = 'AK004';
  end if;
  if v_run.status in ('queued', 'waiting_input') then
    update agent_kit_runs set status = 'waiting_takeover', taken_over_by = p_operator, attempts = 0,
      updated_at = now() where id = p_run_id;
    delete from agent_kit_jobs where run_id = p_run_id;
    perform agent_kit__append_event(v_run.thread_id, p_run_id, 0, 'run-parked', jsonb_build_object(
      'runId', p_run_id, 'status', 'waiting_takeover', 'requested', 'waiting_takeover', 'operator', p_operator));
    return 'waiting_takeover';
  elsif v_run.status = 'running' then
    update agent_kit_runs set takeover_requested_at = now(), taken_over_by = p_operator, updated_at = now()
    where id = p_run_id;
    perform agent_kit__append_event(v_run.thread_id, p_run_id, 0, 'takeover-requested',
      jsonb_build_object('runId', p_run_id, 'operator', p_operator));
  end if;
  return v_run.status;
end $$;

-- The operator gives the run back: it is queued again and continues where it stopped.
create function agent_kit_release_run(p_run_id uuid) returns text
language plpgsql as $$
declare
  v_run agent_kit_runs;
begin
  select * into v_run from agent_kit_runs where id = p_run_id for update;
  if not found then
    raise exception 'run % not found', p_run_id using errcode = 'AK002';
  end if;
  if v_run.status = 'waiting_takeover' then
    update agent_kit_runs set status = 'queued', taken_over_by = null, takeover_requested_at = null,
      updated_at = now() where id = p_run_id;
    perform agent_kit__append_event(v_run.thread_id, p_run_id, 0, 'run-released', jsonb_build_object('runId', p_run_id));
    perform agent_kit__enqueue(p_run_id, agent_kit_now());
    return 'queued';
  elsif v_run.status = 'running' and v_run.takeover_requested_at is not null then
    update agent_kit_runs set taken_over_by = null, takeover_requested_at = null, updated_at = now()
    where id = p_run_id;
    return 'running';
  end if;
  raise exception 'run % is % and not taken over', p_run_id, v_run.status using errcode = 'AK004';
end $$;

-- Take up to p_limit due jobs, pushing their due time forward by p_lock (the visibility
-- timeout): a drain that dies after this loses nothing, the job comes due again.
create function agent_kit_take_jobs(p_limit int, p_lock interval)
returns table (job_id bigint, run_id uuid, tries int) language plpgsql as $$
begin
  if p_limit is null or p_limit < 1 or p_limit > 1000 then
    raise exception 'job limit must be 1..1000, got %', p_limit using errcode = 'AK001';
  end if;
  perform agent_kit__check_ttl('job lock', p_lock);
  return query
  update agent_kit_jobs j set due_at = agent_kit_now() + p_lock, tries = j.tries + 1
  where j.id in (
    select q.id from agent_kit_jobs q where q.due_at <= agent_kit_now()
    order by q.due_at limit p_limit for update skip locked)
  returning j.id, j.run_id, j.tries;
end $$;

-- Salvage: the reaper takes a run that used up its crash budget, with the next fence (without
-- counting an attempt), so that it can close it through the guarded close path.
create function agent_kit_take_for_salvage(p_run_id uuid, p_owner text, p_ttl interval, p_max_attempts int)
returns setof agent_kit_runs language plpgsql as $$
begin
  if p_owner is null or p_owner = '' then
    raise exception 'owner is required' using errcode = 'AK001';
  end if;
  perform agent_kit__check_ttl('lease ttl', p_ttl);
  return query
  update agent_kit_runs r set owner = p_owner, fence = r.fence + 1,
    lease_expires_at = agent_kit_now() + p_ttl, deadline_at = agent_kit_now() + p_ttl,
    heartbeat_at = agent_kit_now(), updated_at = now()
  where r.id = p_run_id and r.status = 'running' and r.lease_expires_at <= agent_kit_now()
    and r.attempts >= p_max_attempts
  returning r.*;
end $$;
