-- Fixes found by the property test against the reference model of the run state machine:
-- * park requeues a run waiting for input only when the answer to THAT question is stored. A
--   stray answer (a stale tab's question id) used to requeue it on every park, looping forever
--   without spending the crash budget, since the engine consumes only the answer it asked for.
-- * a run parked waiting_input with no recorded question takes any answer (a chat message).
-- * a run with a cancel pending cannot be taken over: the takeover would drop the job that
--   carries the cancel out, leaving it undone until a release.

create or replace function agent_kit_park_run(
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
      select 1 from agent_kit_inputs i
      where i.run_id = p_run_id and i.consumed_at is null
        and (coalesce(p_waiting_for, v_run.waiting_for)->>'id' is null
          or i.question_id = coalesce(p_waiting_for, v_run.waiting_for)->>'id')) then
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

create or replace function agent_kit_submit_input(p_run_id uuid, p_question_id text, p_data jsonb)
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
  if v_run.status = 'waiting_input' and v_run.waiting_for->>'id' is not null
      and v_run.waiting_for->>'id' <> p_question_id then
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

create or replace function agent_kit_takeover_run(p_run_id uuid, p_operator text) returns text
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
  if v_run.cancel_requested_at is not null then
    raise exception 'run % is being cancelled and cannot be taken over', p_run_id using errcode = 'AK004';
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
