-- The hot path, leaner: claim, mirror write and close do the same writes under the same guards
-- as before, with fewer statements inside each call. Inline argument checks instead of a helper
-- call, one reading of agent_kit_now() per call, only the columns they need from the run row (a
-- long partial output is no longer copied out on every mirror write), and the event append
-- written in place. Behaviour is unchanged; the lease property test checks it against its model.

create or replace function agent_kit_claim_run(p_run_id uuid, p_owner text, p_ttl interval, p_budget interval)
returns setof agent_kit_runs language plpgsql as $$
declare
  v_now timestamptz := agent_kit_now();
begin
  if p_owner is null or p_owner = '' then
    raise exception 'owner is required' using errcode = 'AK001';
  end if;
  if p_ttl is null or p_ttl <= interval '0' then
    raise exception 'lease ttl must be a positive interval, got %', coalesce(p_ttl::text, 'NULL') using errcode = 'AK001';
  end if;
  if p_budget is null or p_budget <= interval '0' then
    raise exception 'invocation budget must be a positive interval, got %', coalesce(p_budget::text, 'NULL')
      using errcode = 'AK001';
  end if;
  return query
  with claimed as (
    update agent_kit_runs r set
      status = 'running', owner = p_owner, fence = r.fence + 1, attempts = r.attempts + 1,
      deadline_at = v_now + p_budget, lease_expires_at = v_now + least(p_ttl, p_budget),
      heartbeat_at = v_now, updated_at = now()
    where r.id = p_run_id
      and (r.status = 'queued'
        or (r.status = 'running' and r.lease_expires_at <= v_now)
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

create or replace function agent_kit_mirror_partial(p_run_id uuid, p_owner text, p_fence bigint, p_delta text)
returns table (seq bigint, interrupt text) language plpgsql as $$
declare
  v_thread_id uuid;
  v_cancel timestamptz;
  v_takeover timestamptz;
  v_seq bigint;
begin
  update agent_kit_runs set partial = partial || coalesce(p_delta, ''), heartbeat_at = agent_kit_now()
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  returning thread_id, cancel_requested_at, takeover_requested_at into v_thread_id, v_cancel, v_takeover;
  if not found then
    return;
  end if;
  if coalesce(p_delta, '') <> '' then
    update agent_kit_threads set last_seq = last_seq + 1 where id = v_thread_id returning last_seq into v_seq;
    insert into agent_kit_thread_events (thread_id, seq, run_id, fence, type, data)
    values (v_thread_id, v_seq, p_run_id, p_fence, 'text-delta', jsonb_build_object('text', p_delta));
  end if;
  seq := v_seq;
  interrupt := case when v_cancel is not null then 'cancel' when v_takeover is not null then 'takeover' end;
  return next;
end $$;

create or replace function agent_kit_close_run(p_run_id uuid, p_status text, p_message jsonb,
  p_owner text default null, p_fence bigint default null)
returns uuid language plpgsql as $$
declare
  v_thread_id uuid;
  v_message_id uuid;
  v_partial boolean := p_status <> 'completed';
  v_seq bigint;
  v_next uuid;
begin
  if p_owner is null or p_fence is null then
    raise exception 'agent_kit_close_run needs the lease (p_owner, p_fence) since migration 0004'
      using errcode = 'AK003';
  end if;
  if p_status is null or p_status not in ('completed', 'failed', 'aborted') then
    raise exception 'close status must be completed, failed or aborted, got %',
      coalesce(p_status, 'NULL') using errcode = 'AK001';
  end if;
  if p_message is null or jsonb_typeof(p_message) <> 'object'
      or jsonb_typeof(p_message->'text') is distinct from 'string' then
    raise exception 'message must be a JSON object with a string "text"' using errcode = 'AK001';
  end if;
  v_message_id := gen_random_uuid();
  -- The guard and the row lock in one statement: ordered before or after any claim.
  update agent_kit_runs set
    status = p_status, message_id = v_message_id, owner = null, lease_expires_at = null,
    deadline_at = null, waiting_for = null, updated_at = now()
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  returning thread_id into v_thread_id;
  if not found then
    return null;
  end if;
  insert into agent_kit_messages (id, thread_id, run_id, role, content, partial)
  values (v_message_id, v_thread_id, p_run_id, 'assistant', p_message, v_partial);
  delete from agent_kit_jobs where run_id = p_run_id;
  update agent_kit_threads set last_seq = last_seq + 1 where id = v_thread_id returning last_seq into v_seq;
  insert into agent_kit_thread_events (thread_id, seq, run_id, fence, type, data)
  values (v_thread_id, v_seq, p_run_id, p_fence, 'run-closed', jsonb_build_object(
    'runId', p_run_id, 'status', p_status, 'messageId', v_message_id,
    'text', p_message->>'text', 'partial', v_partial, 'fence', p_fence));
  -- The thread's next queued turn can run now.
  select r.id into v_next from agent_kit_runs r
  where r.thread_id = v_thread_id and r.status = 'queued' order by r.turn_no limit 1;
  if found then
    perform agent_kit__enqueue(v_next, agent_kit_now());
  end if;
  return v_message_id;
end $$;
