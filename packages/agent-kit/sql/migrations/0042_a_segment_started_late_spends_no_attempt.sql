-- A drain gives each segment what is left of its invocation: one started late gets a second or
-- two. Cut by that deadline before its step left anything to go on from (on a model that cannot
-- continue a prefill, a step's streamed text is lost with it), such a segment failed with
-- StepPastBudgetError and spent an attempt (ADR-0071), although the step would have fit in a
-- whole budget: an outsider's trial saw turns of a 2 s reply aborted by a 4 s drain that started
-- them with 1.2 s left (ADR-0113).
--
-- agent_kit_park_started_late gives such a run back, queued as a slice is, but takes back the
-- attempt its claim counted instead of resetting the count: a step too long for any budget still
-- spends an attempt in every segment that had most of one, and a late segment changes nothing.

create or replace function agent_kit_park_started_late(p_run_id uuid, p_owner text, p_fence bigint)
returns boolean
language plpgsql as $$
declare
  v_attempts int;
begin
  -- The lock agent_kit_park_run takes next, taken once (ADR-0112).
  select r.attempts into v_attempts from agent_kit_runs r
  where r.id = p_run_id and r.owner = p_owner and r.fence = p_fence and r.status = 'running'
  for update;
  if not found then
    return false;
  end if;
  if not agent_kit_park_run(p_run_id, p_owner, p_fence, 'queued') then
    return false;
  end if;
  -- Parked queued (not waiting_takeover, which starts the count again): the count before this claim.
  update agent_kit_runs set attempts = greatest(v_attempts - 1, 0)
  where id = p_run_id and status = 'queued';
  return true;
end $$;
