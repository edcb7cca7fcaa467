-- An operator who takes a run over (waiting_takeover) could only let it go on (release) or stop
-- it (cancel): the person chatting never got the human answer a takeover is for. This lets the
-- operator write the turn's reply (ADR-0114).
--
-- agent_kit_reply_to_run closes a held run `completed` with the operator's text as its one
-- assistant message, in one statement's transaction under the run's row lock. A held run has no
-- lease; the close raises the fence by one, as a claim would, so that anything still holding an
-- older fence can write nothing after it. The run-closed event names
-- the operator, for every viewer. A started effect that no segment has settled refuses the
-- reply: whether it happened is not known yet (release the run, whose next segment reconciles
-- it, or cancel it). Only the operator who holds the run replies; the same reply sent again (its
-- answer lost on the way) returns the message it stored. It returns the thread's next queued
-- turn as well, which it gave a job, so that a server can start that turn at once.

create or replace function agent_kit_reply_to_run(p_run_id uuid, p_operator text, p_text text)
returns table (message_id uuid, next_run_id uuid)
language plpgsql as $$
#variable_conflict use_column
declare
  v_run agent_kit_runs;
  v_fence bigint;
  v_tool text;
  v_message_id uuid := gen_random_uuid();
  v_seq bigint;
  v_next uuid;
begin
  if p_operator is null or btrim(p_operator) = '' then
    raise exception 'a reply names its operator' using errcode = 'AK001';
  end if;
  if p_text is null or btrim(p_text) = '' then
    raise exception 'a reply needs its text' using errcode = 'AK001';
  end if;
  -- The run first, then its thread (ADR-0040), at the strength the update needs (ADR-0112).
  select * into v_run from agent_kit_runs where id = p_run_id for no key update;
  if not found then
    raise exception 'run % not found', p_run_id using errcode = 'AK002';
  end if;
  if v_run.status = 'completed' and exists (select 1 from agent_kit_messages m where m.id = v_run.message_id
      and m.content->>'operator' = p_operator and m.content->>'text' = p_text) then
    -- The same reply again (its answer lost on the way): stored once; its next turn has its job.
    return query select v_run.message_id, null::uuid;
    return;
  end if;
  if v_run.status in ('completed', 'failed', 'aborted') then
    raise exception 'run % is % and has ended: there is nothing to reply in its place', p_run_id, v_run.status
      using errcode = 'AK004';
  end if;
  if v_run.status <> 'waiting_takeover' and v_run.takeover_requested_at is not null then
    -- Asked and not honoured yet: "take it over first" sent the operator who had round in a loop.
    raise exception 'run % is %: the takeover % asked for is not honoured yet. The run parks at its next write (within a moment while it streams, after a tool call under way), or, its holder dead, once its lease runs out and a worker or drain claims it; reply once it is waiting_takeover',
      p_run_id, v_run.status, v_run.taken_over_by using errcode = 'AK004';
  end if;
  if v_run.status <> 'waiting_takeover' then
    raise exception 'run % is % and not held by an operator: take it over first', p_run_id, v_run.status
      using errcode = 'AK004';
  end if;
  if v_run.cancel_requested_at is not null then
    raise exception 'run % is being cancelled', p_run_id using errcode = 'AK004';
  end if;
  if v_run.taken_over_by <> p_operator then
    raise exception 'run % is held by %: only the operator who holds it replies', p_run_id, v_run.taken_over_by
      using errcode = 'AK004';
  end if;
  select e.tool into v_tool from agent_kit_effects e
  where e.run_id = p_run_id and e.status = 'started' order by e.started_at limit 1;
  if found then
    raise exception 'run % has a call of % that started and was not settled: release the run (its next segment reconciles it) or cancel it',
      p_run_id, v_tool using errcode = 'AK004';
  end if;
  v_fence := v_run.fence + 1;
  update agent_kit_runs set
    status = 'completed', owner = null, fence = v_fence, message_id = v_message_id,
    lease_expires_at = null, deadline_at = null, waiting_for = null, retry_due_at = null, updated_at = now()
  where id = p_run_id;
  insert into agent_kit_messages (id, thread_id, run_id, role, content, partial)
  values (v_message_id, v_run.thread_id, p_run_id, 'assistant',
    jsonb_build_object('text', p_text, 'operator', p_operator), false);
  delete from agent_kit_jobs where run_id = p_run_id;
  -- The thread's next queued turn, which gets its job below, locked before the thread: a cancel of
  -- it locks it, then the thread, and the job's key check would otherwise close a cycle (40P01).
  select r.id into v_next from agent_kit_runs r
  where r.thread_id = v_run.thread_id and r.status = 'queued' order by r.turn_no limit 1
  for key share;
  update agent_kit_threads set last_seq = last_seq + 1 where id = v_run.thread_id returning last_seq into v_seq;
  insert into agent_kit_thread_events (thread_id, seq, run_id, fence, type, data)
  values (v_run.thread_id, v_seq, p_run_id, v_fence, 'run-closed', jsonb_build_object(
    'runId', p_run_id, 'status', 'completed', 'messageId', v_message_id, 'text', p_text,
    'partial', false, 'fence', v_fence, 'operator', p_operator));
  -- The thread's next queued turn can run now.
  if v_next is not null then
    perform agent_kit__enqueue(v_next, agent_kit_now());
  end if;
  return query select v_message_id, v_next;
end $$;
