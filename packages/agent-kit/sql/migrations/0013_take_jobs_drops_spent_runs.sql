-- A take that also drops the jobs of spent runs (benchmark 2a/2b: one round trip and one commit
-- less per batch of jobs). A job whose run is running with an expired lease and no attempts left
-- belongs to the reaper's salvage; claiming it would overrun the crash budget. The drain used to
-- delete such jobs in a statement of its own after each take; this overload does it in the take,
-- and returns them flagged `spent` so the drain can count them. The two-argument form stays.

create or replace function agent_kit_take_jobs(p_limit int, p_lock interval, p_max_attempts int)
returns table (job_id bigint, run_id uuid, tries int, spent boolean) language plpgsql as $$
declare
  v_now timestamptz := agent_kit_now();
begin
  if p_limit is null or p_limit < 1 or p_limit > 1000 then
    raise exception 'job limit must be 1..1000, got %', p_limit using errcode = 'AK001';
  end if;
  if p_lock is null or p_lock <= interval '0' then
    raise exception 'job lock must be a positive interval, got %', coalesce(p_lock::text, 'NULL') using errcode = 'AK001';
  end if;
  if p_max_attempts is null or p_max_attempts < 1 then
    raise exception 'max attempts must be at least 1, got %', coalesce(p_max_attempts::text, 'NULL') using errcode = 'AK001';
  end if;
  return query
  with due as materialized (
    select q.id, q.run_id from agent_kit_jobs q
    where q.due_at <= v_now
    order by q.due_at
    limit p_limit
    for update skip locked
  ), spent_runs as materialized (
    select d.id from due d join agent_kit_runs r on r.id = d.run_id
    where r.status = 'running' and r.lease_expires_at <= v_now and r.attempts >= p_max_attempts
  ), dropped as (
    delete from agent_kit_jobs j using spent_runs s where j.id = s.id
    returning j.id, j.run_id, j.tries
  ), taken as (
    update agent_kit_jobs j set due_at = v_now + p_lock, tries = j.tries + 1
    from due
    where j.id = due.id and not exists (select 1 from spent_runs s where s.id = due.id)
    returning j.id, j.run_id, j.tries
  )
  select t.id, t.run_id, t.tries, false from taken t
  union all
  select d.id, d.run_id, d.tries, true from dropped d;
end $$;
