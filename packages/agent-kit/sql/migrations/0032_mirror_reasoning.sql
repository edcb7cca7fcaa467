-- Viewers see the model think (ADR-0070). A reasoning model (Anthropic with extended thinking,
-- OpenAI's o-series and gpt-5 with reasoning summaries, DeepSeek's reasoner) can think for tens of
-- seconds before the first word of its reply. The engine journalled that reasoning to send it back
-- (ADR-0064) but showed none of it: every viewer saw "Thinking…" and nothing else for that long.
--
-- The stream mirror now writes what the model thinks, as it thinks it, as `reasoning-delta`
-- events `{"text": …}` in the thread's log, batched by time as the reply's text is. This is the
-- mirror's write for a batch that holds reasoning: in one guarded transaction the heartbeat, the
-- reasoning's event, then the reply text that followed it in the same batch (the run's partial and
-- its `text-delta` event), in that order. Reasoning is never part of the run's partial, so never
-- part of a salvaged or final message. A batch of reply text alone still goes through
-- agent_kit_mirror_partial, unchanged.
--
-- It answers as agent_kit_mirror_partial does: no row when the lease was lost; else the last seq
-- it appended (null when both texts were empty) and a stored cancel or takeover intent, so a
-- cancel asked while the model thinks is seen at the next batch, not at its first word.

create function agent_kit_mirror_reasoning(
  p_run_id uuid, p_owner text, p_fence bigint, p_reasoning text, p_delta text)
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
  if coalesce(p_reasoning, '') <> '' then
    v_seq := agent_kit__append_event(v_thread_id, p_run_id, p_fence, 'reasoning-delta',
      jsonb_build_object('text', p_reasoning));
  end if;
  if coalesce(p_delta, '') <> '' then
    v_seq := agent_kit__append_event(v_thread_id, p_run_id, p_fence, 'text-delta',
      jsonb_build_object('text', p_delta));
  end if;
  seq := v_seq;
  interrupt := case when v_cancel is not null then 'cancel' when v_takeover is not null then 'takeover' end;
  return next;
end $$;
