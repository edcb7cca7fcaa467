-- A stopped reply keeps the text its viewer saw (ADR-0090). `useChat`'s stop() cancels the run,
-- and the run stopped at its next write: the tokens streamed while the cancel travelled went into
-- the stored message, so a reload showed a few words more than the page had when the user pressed
-- Stop. A cancel can now say how far its viewer had seen the reply: the seq of the last thread
-- event the page showed. The run is closed with the reply's text as of that event, which is what
-- every viewer of the log had shown at that seq (the text of the run's last `segment-started` or
-- `model-retry` before it, then its `text-delta` events up to it).
--
-- The first cancel decides, as before: a cancel asked again does not move the seq. A cancel
-- without one (an operator's, the CLI's, an older client's) keeps the run's whole text.

alter table agent_kit_runs add column cancel_shown_seq bigint;

drop function agent_kit_request_cancel(uuid);

create function agent_kit_request_cancel(p_run_id uuid, p_shown_seq bigint default null)
returns text language plpgsql as $$
declare
  v_run agent_kit_runs;
begin
  if p_shown_seq < 0 then
    raise exception 'a shown seq is 0 or more, got %', p_shown_seq using errcode = 'AK001';
  end if;
  select * into v_run from agent_kit_runs where id = p_run_id for update;
  if not found then
    raise exception 'run % not found', p_run_id using errcode = 'AK002';
  end if;
  if v_run.status in ('completed', 'failed', 'aborted') then
    return v_run.status;
  end if;
  if v_run.cancel_requested_at is null then
    update agent_kit_runs set cancel_requested_at = now(), cancel_shown_seq = p_shown_seq, updated_at = now()
    where id = p_run_id;
    perform agent_kit__append_event(v_run.thread_id, p_run_id, 0, 'cancel-requested',
      jsonb_build_object('runId', p_run_id)
      || case when p_shown_seq is null then '{}'::jsonb else jsonb_build_object('shownSeq', p_shown_seq) end);
  end if;
  if v_run.status <> 'running' then
    perform agent_kit__enqueue(p_run_id, agent_kit_now());
  end if;
  return v_run.status;
end $$;
