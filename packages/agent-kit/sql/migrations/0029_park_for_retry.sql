-- A model request refused for now whose wait does not fit in the segment (a Retry-After longer
-- than the time left, or a backoff that outgrew a short serverless budget) failed the segment:
-- the attempt was spent and the reaper requeued the run at once, before the provider's time,
-- so the next segment was refused again. Three such segments salvaged the turn (ADR-0062).
--
-- Instead the segment parks the run, queued, with its job due when the provider said to come
-- back: no process sleeps through the wait. The attempt stays spent (attempts is not reset as a
-- voluntary park resets it), so a provider that refuses for ever ends the run after
-- AGENT_KIT_MAX_RUN_ATTEMPTS segments, as a crash loop does. A stored intent wins as in
-- agent_kit_park_run: a cancel queues the run now (the next segment closes it), a takeover parks
-- it for the operator. The `model-retry` event (with `dueAt` and the run's text) comes first,
-- then `run-parked` (with `dueAt`), both under the fence.

create function agent_kit_park_for_retry(
  p_run_id uuid, p_owner text, p_fence bigint, p_delay interval, p_data jsonb)
returns bigint language plpgsql as $$
declare
  v_run agent_kit_runs;
  v_status text := 'queued';
  v_due timestamptz;
  v_seq bigint;
begin
  if p_delay is null or p_delay < interval '0' then
    raise exception 'a retry waits a delay of zero or more, got %', coalesce(p_delay::text, 'NULL') using errcode = 'AK001';
  end if;
  select * into v_run from agent_kit_runs
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  for update;
  if not found then
    return null;
  end if;
  v_due := agent_kit_now() + p_delay;
  if v_run.cancel_requested_at is not null then
    v_due := agent_kit_now();
  elsif v_run.takeover_requested_at is not null then
    v_status := 'waiting_takeover';
  end if;
  update agent_kit_runs set
    status = v_status, owner = null, lease_expires_at = null, deadline_at = null,
    takeover_requested_at = null, updated_at = now()
  where id = p_run_id;
  v_seq := agent_kit__append_event(v_run.thread_id, p_run_id, p_fence, 'model-retry',
    coalesce(p_data, '{}') || jsonb_build_object('text', v_run.partial, 'dueAt', v_due));
  perform agent_kit__append_event(v_run.thread_id, p_run_id, p_fence, 'run-parked',
    jsonb_build_object('runId', p_run_id, 'fence', p_fence, 'status', v_status,
      'requested', 'queued', 'waitingFor', v_run.waiting_for, 'dueAt', v_due));
  if v_status = 'queued' then
    perform agent_kit__enqueue(p_run_id, v_due);
  end if;
  return v_seq;
end $$;
