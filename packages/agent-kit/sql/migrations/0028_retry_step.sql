-- A model step refused for now is asked again in the same segment (ADR-0057, ADR-0059). A model
-- that continues a prefill goes on from the text it streamed; one that cannot (OpenAI and the
-- OpenAI-compatible providers), or a step cut after a tool call, starts the step again, and the
-- text it streamed must go: from the run's partial, which a takeover or a salvage would keep,
-- and from every viewer's screen. Until now only a takeover did that (its segment-started
-- carries the text to show), so such a refusal spent one of the run's attempts (ADR-0061).
--
-- One guarded write sets the partial to what the retry goes on from and appends the
-- `model-retry` event with that text, so a viewer replaces its text exactly where the log says,
-- and replay equals live. Where nothing is dropped the text is the partial as it is.

create function agent_kit_retry_step(
  p_run_id uuid, p_owner text, p_fence bigint, p_partial text, p_data jsonb)
returns bigint language plpgsql as $$
declare
  v_thread_id uuid;
begin
  if p_partial is null then
    raise exception 'a retried step goes on from a text, got null';
  end if;
  update agent_kit_runs set partial = p_partial, heartbeat_at = agent_kit_now()
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  returning thread_id into v_thread_id;
  if not found then
    return null;
  end if;
  return agent_kit__append_event(v_thread_id, p_run_id, p_fence, 'model-retry',
    coalesce(p_data, '{}') || jsonb_build_object('text', p_partial));
end $$;
