-- A segment that fails (the provider errored or hung) gives its lease up at once instead of
-- holding it to expiry, so the reaper can requeue the run without waiting. It keeps the attempt
-- it used: a failing provider spends the crash budget and ends in salvage, never loops forever.
create function agent_kit_fail_segment(p_run_id uuid, p_owner text, p_fence bigint, p_error jsonb)
returns boolean language plpgsql as $$
declare
  v_run agent_kit_runs;
begin
  update agent_kit_runs set lease_expires_at = agent_kit_now(), last_error = p_error, updated_at = now()
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  returning * into v_run;
  if not found then
    return false;
  end if;
  perform agent_kit__append_event(v_run.thread_id, p_run_id, p_fence, 'segment-failed',
    jsonb_build_object('runId', p_run_id, 'fence', p_fence, 'attempt', v_run.attempts, 'error', p_error));
  return true;
end $$;
