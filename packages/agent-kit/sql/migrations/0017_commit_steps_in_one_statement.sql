-- Group commit: several runs' step commits in one statement, one transaction, one round trip.
-- A process driving many turns at once sends the commits that pile up while one is in flight
-- together (ADR-0021). Each element is exactly one agent_kit_commit_step call, with its own
-- (owner, fence) guard: a rejected guard writes nothing for that element and returns no row for
-- it, and the other elements are unaffected. An error raised by any element (a bad argument)
-- rolls the whole statement back; the caller then sends each commit on its own, so every segment
-- gets its own result or its own error. After a lost connection the outcome is unknown, as for a
-- single commit, and nothing is sent again.
--
-- Elements are applied in run id order, so two batches that share runs (a zombie's stale commit
-- and the new owner's) lock them in the same order and cannot deadlock each other.
--
-- A group is a JSON array of at most 100 elements.
create function agent_kit__check_group(p_what text, p_group jsonb) returns void language plpgsql immutable as $$
begin
  if p_group is null or jsonb_typeof(p_group) <> 'array' then
    raise exception '% must be a JSON array', p_what using errcode = 'AK001';
  end if;
  if jsonb_array_length(p_group) > 100 then
    raise exception 'at most 100 % per statement, got %', p_what, jsonb_array_length(p_group) using errcode = 'AK001';
  end if;
end $$;

-- p_commits: [{runId, owner, fence, stepNo, kind, data, eventType, eventData, delta?,
--   effectKey?, effectStatus?, effectResult?, closeStatus?, closeMessage?, startKey?, startTool?,
--   startInput?}], at most 100. Returns agent_kit_commit_step's row for each element whose guard
-- held, with `i`, the element's index in the array.
create function agent_kit_commit_steps(p_commits jsonb)
returns table (i int, seq bigint, interrupt text, message_id uuid, started_status text, started_fence bigint,
  started_result jsonb)
language plpgsql as $$
declare
  c record;
begin
  perform agent_kit__check_group('commits', p_commits);
  for c in
    select (e.n - 1)::int as n, e.v from jsonb_array_elements(p_commits) with ordinality e(v, n)
    order by (e.v->>'runId')::uuid, e.n
  loop
    return query select c.n, s.* from agent_kit_commit_step(
      (c.v->>'runId')::uuid, c.v->>'owner', (c.v->>'fence')::bigint, (c.v->>'stepNo')::int, c.v->>'kind',
      c.v->'data', c.v->>'eventType', c.v->'eventData', c.v->>'delta',
      c.v->>'effectKey', c.v->>'effectStatus', c.v->'effectResult',
      c.v->>'closeStatus', c.v->'closeMessage',
      c.v->>'startKey', c.v->>'startTool', c.v->'startInput') s;
  end loop;
end $$;

-- The same for closes: each element is one agent_kit_close_run call with its lease.
-- p_closes: [{runId, owner, fence, status, message}], at most 100. Returns each element's index
-- and the message id (NULL where the guard rejected the close and nothing was written).
create function agent_kit_close_runs(p_closes jsonb)
returns table (i int, message_id uuid)
language plpgsql as $$
declare
  c record;
begin
  perform agent_kit__check_group('closes', p_closes);
  for c in
    select (e.n - 1)::int as n, e.v from jsonb_array_elements(p_closes) with ordinality e(v, n)
    order by (e.v->>'runId')::uuid, e.n
  loop
    i := c.n;
    message_id := agent_kit_close_run((c.v->>'runId')::uuid, c.v->>'status', c.v->'message', c.v->>'owner',
      (c.v->>'fence')::bigint);
    return next;
  end loop;
end $$;
