-- Batch claims: a drain claims the runs of several due jobs in one statement, one commit, one
-- round trip, instead of taking the jobs in one statement and then claiming each run in a
-- statement of its own (ADR-0022). Each claim is exactly one agent_kit_claim_run call: the same
-- acceptance rule, the next fence, the attempt count, the lease capped at the budget, the job
-- deleted.
--
-- p_owners: one lease owner per run to claim, at most 1000; the k-th run claimed gets the k-th
-- owner. Returns the claimed runs' rows, fewer than asked when fewer are claimable now.
--
-- What it leaves to agent_kit_take_jobs and agent_kit_settle_job: a due job whose run is not
-- claimable (closed, waiting, blocked by an earlier turn, leased), or spent (running with an
-- expired lease and p_max_attempts used: the reaper's to salvage), or whose run row another
-- transaction holds. Its job stays due, untouched.
--
-- Locks: the candidates are read without locking the jobs; each candidate run is locked with
-- SKIP LOCKED, so this never waits on a run and two drains never claim the same run; the claim
-- then deletes the job (runs before jobs, the order every function keeps).
create function agent_kit_claim_due_runs(p_owners text[], p_ttl interval, p_budget interval, p_max_attempts int)
returns setof agent_kit_runs language plpgsql rows 10 as $$
declare
  v_now timestamptz := agent_kit_now();
  v_wanted int := coalesce(cardinality(p_owners), 0);
  v_claimed int := 0;
  v_candidates uuid[];
  v_run_id uuid;
begin
  if v_wanted < 1 or v_wanted > 1000 then
    raise exception 'owners must be an array of 1..1000 lease owners, got %', v_wanted using errcode = 'AK001';
  end if;
  if array_position(p_owners, null) is not null or array_position(p_owners, '') is not null then
    raise exception 'every owner must be a non-empty string' using errcode = 'AK001';
  end if;
  if (select count(distinct o) from unnest(p_owners) o) <> v_wanted then
    raise exception 'owners must be distinct (one per segment)' using errcode = 'AK001';
  end if;
  if p_max_attempts is null or p_max_attempts < 1 then
    raise exception 'max attempts must be at least 1, got %', coalesce(p_max_attempts::text, 'NULL') using errcode = 'AK001';
  end if;
  -- agent_kit_claim_run checks them too, but only when something is due.
  perform agent_kit__check_ttl('lease ttl', p_ttl);
  perform agent_kit__check_ttl('invocation budget', p_budget);
  -- Candidates: the earliest due jobs, a few more than wanted (some may be unclaimable or held),
  -- read through agent_kit_jobs__due_at_idx; then their runs by primary key (`= any`, so it is an
  -- index scan even when the planner's statistics are stale), locked in due order. Only runs that
  -- agent_kit_claim_run would accept are locked: the holder of a live lease must never wait on
  -- this statement to write its mirror, commit or close. agent_kit_claim_run decides each one.
  v_candidates := array(
    select q.run_id from agent_kit_jobs q where q.due_at <= v_now order by q.due_at limit 2 * v_wanted + 8);
  for v_run_id in
    select r.id
    from agent_kit_runs r
    where r.id = any(v_candidates)
      and (r.status = 'queued'
        or (r.status = 'running' and r.lease_expires_at <= v_now and r.attempts < p_max_attempts)
        or (r.status in ('waiting_input', 'waiting_takeover') and r.cancel_requested_at is not null))
    order by array_position(v_candidates, r.id)
    for update of r skip locked
  loop
    return query select * from agent_kit_claim_run(v_run_id, p_owners[v_claimed + 1], p_ttl, p_budget);
    if found then
      v_claimed := v_claimed + 1;
      exit when v_claimed = v_wanted;
    end if;
  end loop;
end $$;

-- Planner estimates for the claims. The engine's claim statements evaluate a history subquery for
-- each row a claim returns. Postgres assumes 1000 rows from a set-returning function unless told,
-- so once the messages table had statistics, a claim statement's estimated cost passed
-- jit_above_cost (100,000; JIT is on by default since Postgres 12) and every claim paid ~15 ms of
-- JIT compilation for a plan that runs in well under 1 ms. Measured on the null-turn drain: about
-- 230 runs/s with JIT, 1,100 without. A single claim returns at most one row; a batch claim
-- usually a handful. (CREATE OR REPLACE resets these estimates; test/tidy.test.ts checks them.)
alter function agent_kit_claim_run(uuid, text, interval, interval) rows 1;
