-- PROPOSAL, not a library migration: claim and close many runs per statement, so a drain pays
-- one round trip and one commit per batch instead of two per run (ADR-0004's guards unchanged).
-- The bench applies this file to its own fresh database only; adopting it means copying it into
-- the next free sql/migrations/NNNN_batched_claim_and_close.sql (+ migrations.lock, schema.sql).
-- Lock order as everywhere: runs, then threads, then jobs. Every join to a big table also
-- filters on `= any(array(...))`, so it is an index scan even when the planner's statistics
-- are stale (a queue that just filled up looks empty until the next analyze).

-- Claim up to p_limit due runs in ONE statement: the same acceptance rule as agent_kit_claim_run
-- (queued; running with an expired lease; waiting with a cancel to carry out; and only the
-- thread's earliest open run), the same writes (next fence, attempt, lease capped at the budget),
-- the same job deletion. Runs are locked first (FOR UPDATE OF r SKIP LOCKED, jobs only read), so
-- two drains never wait on each other and never take jobs before runs. A due job whose run is not
-- claimable is left for the per-run path (agent_kit_take_jobs + agent_kit_settle_job) to settle.
create or replace function agent_kit_proposed_claim_due_runs(p_owner text, p_limit int, p_ttl interval, p_budget interval)
returns setof agent_kit_runs language plpgsql as $$
begin
  if p_owner is null or p_owner = '' then
    raise exception 'owner is required' using errcode = 'AK001';
  end if;
  if p_limit is null or p_limit < 1 or p_limit > 1000 then
    raise exception 'claim limit must be 1..1000, got %', p_limit using errcode = 'AK001';
  end if;
  perform agent_kit__check_ttl('lease ttl', p_ttl);
  perform agent_kit__check_ttl('invocation budget', p_budget);
  return query
  with due as materialized (
    select r.id
    from agent_kit_jobs j
    join agent_kit_runs r on r.id = j.run_id
    where j.due_at <= agent_kit_now()
      and (r.status = 'queued'
        or (r.status = 'running' and r.lease_expires_at <= agent_kit_now())
        or (r.status in ('waiting_input', 'waiting_takeover') and r.cancel_requested_at is not null))
      and not exists (
        select 1 from agent_kit_runs e
        where e.thread_id = r.thread_id and e.turn_no < r.turn_no
          and e.status in ('queued', 'running', 'waiting_input', 'waiting_takeover'))
    order by j.due_at
    limit p_limit
    for update of r skip locked
  ), claimed as (
    update agent_kit_runs r set
      status = 'running', owner = p_owner, fence = r.fence + 1, attempts = r.attempts + 1,
      deadline_at = agent_kit_now() + p_budget,
      lease_expires_at = agent_kit_now() + least(p_ttl, p_budget),
      heartbeat_at = agent_kit_now(), updated_at = now()
    from due d
    where r.id = any(array(select id from due)) and r.id = d.id
    returning r.*
  ), dropped as (
    delete from agent_kit_jobs j
    where j.run_id = any(array(select id from claimed))
  )
  select * from claimed;
end $$;

-- Close many runs in ONE statement, each exactly as agent_kit_close_run does with its lease:
-- guarded by (owner, fence, running) in the run row's UPDATE, final message, run row, job, closing
-- event with the thread's next seq, the thread's next queued turn enqueued, viewers notified.
-- p_closes: [{runId, owner, fence, status, message: {text, ...}}]. Returns one row per closed
-- run; a run missing from the result was rejected by its guard and nothing was written for it.
-- A malformed element raises (AK001) and closes nothing: the caller falls back to one by one.
create or replace function agent_kit_proposed_close_runs(p_closes jsonb)
returns table (run_id uuid, message_id uuid) language plpgsql as $$
begin
  if p_closes is null or jsonb_typeof(p_closes) <> 'array' then
    raise exception 'closes must be a JSON array' using errcode = 'AK001';
  end if;
  if exists (
      select 1 from jsonb_array_elements(p_closes) c
      where c->>'runId' is null or c->>'owner' is null or c->>'fence' is null
        or c->>'status' is null or c->>'status' not in ('completed', 'failed', 'aborted')
        or jsonb_typeof(c->'message') is distinct from 'object'
        or jsonb_typeof(c->'message'->'text') is distinct from 'string') then
    raise exception 'each close needs runId, owner, fence, a status completed/failed/aborted and a message with a string "text"'
      using errcode = 'AK001';
  end if;
  return query
  with input as (
    select (c->>'runId')::uuid as id, c->>'owner' as owner, (c->>'fence')::bigint as fence,
      c->>'status' as status, c->'message' as message
    from jsonb_array_elements(p_closes) c
  ), closed as (
    -- The guard is this UPDATE's WHERE: it locks the row, and a claim that committed meanwhile
    -- makes Postgres recheck the row's new version, which no longer matches (owner, fence).
    -- The message id is chosen here so that the run row is written once.
    update agent_kit_runs r set
      status = i.status, message_id = gen_random_uuid(), owner = null, lease_expires_at = null,
      deadline_at = null, waiting_for = null, updated_at = now()
    from input i
    where r.id = any(array(select id from input))
      and r.id = i.id and r.owner = i.owner and r.fence = i.fence and r.status = 'running'
    returning r.id, r.thread_id, r.message_id, i.fence, i.status, i.message
  ), locked as (
    select * from closed
  ), msgs as (
    insert into agent_kit_messages (id, thread_id, run_id, role, content, partial)
    select l.message_id, l.thread_id, l.id, 'assistant', l.message, l.status <> 'completed' from locked l
    returning agent_kit_messages.id, agent_kit_messages.run_id
  ), seqs as (
    -- One running run per thread, so each thread appears once: one seq each, gap-free.
    update agent_kit_threads t set last_seq = t.last_seq + 1
    from locked l where t.id = any(array(select thread_id from locked)) and t.id = l.thread_id
    returning t.id as thread_id, t.last_seq as seq
  ), events as (
    insert into agent_kit_thread_events (thread_id, seq, run_id, fence, type, data)
    select s.thread_id, s.seq, l.id, l.fence, 'run-closed', jsonb_build_object(
      'runId', l.id, 'status', l.status, 'messageId', m.id, 'text', l.message->>'text',
      'partial', l.status <> 'completed', 'fence', l.fence)
    from seqs s join locked l on l.thread_id = s.thread_id join msgs m on m.run_id = l.id
    returning agent_kit_thread_events.thread_id, agent_kit_thread_events.seq
  ), dropped as (
    -- After the threads (seqs), keeping the lock order runs → threads → jobs.
    delete from agent_kit_jobs j using seqs s join locked l on l.thread_id = s.thread_id
    where j.run_id = any(array(select id from locked)) and j.run_id = l.id
  ), nexts as (
    -- The thread's next queued turn can run now.
    insert into agent_kit_jobs (run_id, due_at)
    select distinct on (q.thread_id) q.id, agent_kit_now()
    from seqs s join agent_kit_runs q on q.thread_id = s.thread_id
    where q.thread_id = any(array(select thread_id from seqs)) and q.status = 'queued'
    order by q.thread_id, q.turn_no
    on conflict on constraint agent_kit_jobs_run_id_key
      do update set due_at = least(agent_kit_jobs.due_at, excluded.due_at)
    returning agent_kit_jobs.run_id
  ), notified as (
    select count(pg_notify('agent_kit_events', e.thread_id::text || ':' || e.seq::text)) as n from events e
    union all
    select count(pg_notify('agent_kit_jobs', x.run_id::text)) from nexts x
  )
  select m.run_id, m.id from msgs m
  where (select sum(n.n) from notified n) >= 0;
end $$;
