-- A park too late for its readers to run (their invocations nearly over) is handed off by one of
-- them: that reader ends its stream and comes back at once to an invocation with time, which
-- carries the turn on; the others read on (ADR-0122). Which reader it is, the store decides: the
-- first to ask for the park's fence while the run is still queued at it. A run's fence grows at
-- every claim, so each park is handed off at most once. The column is a hint for readers, not a
-- lease: nothing of the turn depends on it, and the claim still decides who runs the turn.

alter table agent_kit_runs add column handed_off_fence bigint;

create function agent_kit_take_hand_off(p_run_id uuid, p_fence bigint)
returns boolean
language plpgsql as $$
begin
  update agent_kit_runs set handed_off_fence = p_fence
  where id = p_run_id and status = 'queued' and fence = p_fence
    and handed_off_fence is distinct from p_fence;
  return found;
end $$;
