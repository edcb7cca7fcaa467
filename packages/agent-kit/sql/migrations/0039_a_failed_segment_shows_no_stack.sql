-- A failed segment's event carried the whole error its process threw, stack trace included, and
-- the thread's event log goes to whoever may read the thread: the user's browser heard the
-- server's file paths, its call chain and whatever a library put in the stack. The run's
-- last_error, which only the database's users read, keeps the stack for the operator; the
-- segment-failed event now carries the error without it (its name, code and message), and the
-- events already written lose theirs (ADR-0100).

create or replace function agent_kit_fail_segment(p_run_id uuid, p_owner text, p_fence bigint, p_error jsonb)
returns boolean language plpgsql as $$
declare
  v_thread_id uuid;
  v_attempts int;
  v_seq bigint;
begin
  update agent_kit_runs set
    lease_expires_at = least(agent_kit_now(), coalesce(deadline_at, agent_kit_now())),
    last_error = p_error, updated_at = now()
  where id = p_run_id and owner = p_owner and fence = p_fence and status = 'running'
  returning thread_id, attempts into v_thread_id, v_attempts;
  if not found then
    return false;
  end if;
  v_seq := agent_kit__append_event(v_thread_id, p_run_id, p_fence, 'segment-failed',
    jsonb_build_object('runId', p_run_id, 'fence', p_fence, 'attempt', v_attempts, 'error', p_error - 'stack'));
  return true;
end $$;

-- The type condition lets the run-boundary index (0020, 0035) find the few failed segments.
update agent_kit_thread_events set data = jsonb_set(data, '{error}', (data->'error') - 'stack')
where type = 'segment-failed' and jsonb_typeof(data->'error') = 'object' and data->'error' ? 'stack';
