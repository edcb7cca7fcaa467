-- Restoring an earlier answer (ADR-0096). A regenerated reply keeps the answer it replaced
-- (0035), and a page could show it (ADR-0093) but not take it back. Now a superseded run's reply
-- can be put back in the conversation: the run that holds its place now, and every turn after
-- that one, are superseded by it, and the conversation goes on from it.
--
-- A run holds a place in the conversation: the reply to one message, after the turns before it.
-- A regeneration puts its new run in the place of the run it regenerated, and a restore puts the
-- restored run back in the place of the run it replaces; either way that run's superseded_by
-- names the run now in its place. A turn after it is superseded too, by the same run, but its
-- place is gone with the conversation it was part of: a run superseded that way is restored by
-- restoring the answer it followed (which leaves it out still, as a regeneration does).
--
-- Each run keeps its own opening message. A plain regeneration moved it to the new run, and an
-- edit left it behind without its client id: a restore moves it back, with the client id of the
-- message of the run it replaces, so a page shows the restored message under the id it has.
--
-- The restore is told to viewers by a turn-restored event of the restored run, which names the
-- run it replaced; the run-boundary index holds it, so the place a run holds is followed along
-- superseded_by through indexed lookups. (Rebuilding the index reads the log once.)

drop index agent_kit_thread_events__run_boundary_idx;
create index agent_kit_thread_events__run_boundary_idx on agent_kit_thread_events (run_id, seq)
  where type in ('message', 'segment-started', 'run-parked', 'run-closed', 'segment-failed', 'turn-regenerated',
    'turn-restored');

-- The id of the user message a run opened with: its first message, or the message its
-- turn-regenerated names (the one it moved, or the edit it made).
create function agent_kit__opening_message(p_run_id uuid) returns uuid
language plpgsql stable as $$
begin
  return (select (e.data->>'messageId')::uuid from agent_kit_thread_events e
    where e.run_id = p_run_id and e.type in ('message', 'turn-regenerated')
    order by e.seq limit 1);
end $$;

-- p_owner_id: the owner of the run's thread. Returns the run, the runs it superseded in turn
-- order, its opening message, and restored = false when it was part of the conversation already
-- (nothing written: the same call again is answered, whatever happened in between).
create function agent_kit_restore_turn(p_run_id uuid, p_owner_id text)
returns table(thread_id uuid, run_id uuid, message_id uuid, superseded uuid[], restored boolean)
language plpgsql as $$
declare
  v_run agent_kit_runs;
  v_at agent_kit_runs;
  v_open agent_kit_runs;
  v_message agent_kit_messages;
  v_current agent_kit_messages;
  v_client_id text;
  v_superseded uuid[];
  v_steps int := 0;
begin
  if p_owner_id is null or p_owner_id = '' then
    raise exception 'owner_id is required' using errcode = 'AK001';
  end if;
  select * into v_run from agent_kit_runs r where r.id = p_run_id;
  if not found or not exists (
      select 1 from agent_kit_threads t where t.id = v_run.thread_id and t.owner_id = p_owner_id) then
    raise exception 'run % not found', p_run_id using errcode = 'AK002';
  end if;
  -- Lock order as agent_kit_start_turn's and agent_kit_regenerate_turn's: the active run, then
  -- the thread row, which orders the changes to the thread's conversation.
  perform 1 from agent_kit_runs r
  where r.thread_id = v_run.thread_id and r.status in ('running', 'waiting_input', 'waiting_takeover')
  for update;
  perform 1 from agent_kit_threads t where t.id = v_run.thread_id for update;
  select * into v_run from agent_kit_runs r where r.id = p_run_id;
  if v_run.superseded_by is null then
    return query select v_run.thread_id, v_run.id, agent_kit__opening_message(v_run.id), '{}'::uuid[], false;
    return;
  end if;

  -- The run in its place now: follow superseded_by while each run took the place of the one
  -- before (regenerated its reply, or was restored in its place).
  v_at := v_run;
  while v_at.superseded_by is not null loop
    v_steps := v_steps + 1;
    if v_steps > 10000 then
      raise exception 'run %: no end to the runs that replaced it', p_run_id using errcode = 'AK004';
    end if;
    perform 1 from agent_kit_thread_events e
    where e.run_id = v_at.superseded_by and e.type in ('turn-regenerated', 'turn-restored')
      and coalesce(e.data->>'regenerates', e.data->>'replaces') = v_at.id::text;
    if not found then
      if v_at.id = v_run.id then
        raise exception 'run % is not an earlier answer: it followed a reply that was replaced since (restoring that reply''s answer leaves the turns after it out)', p_run_id
          using errcode = 'AK004';
      end if;
      raise exception 'run %''s place in the conversation was dropped since, when an earlier reply was regenerated', p_run_id
        using errcode = 'AK004';
    end if;
    select * into v_at from agent_kit_runs r where r.id = v_at.superseded_by;
  end loop;

  select * into v_open from agent_kit_runs r
  where r.thread_id = v_run.thread_id and r.superseded_by is null
    and r.status not in ('completed', 'failed', 'aborted')
  order by r.turn_no limit 1;
  if found then
    raise exception 'turn % of thread % is %: an answer is restored once every turn has ended',
      v_open.turn_no, v_run.thread_id, v_open.status using errcode = 'AK004';
  end if;

  -- The opening messages: the restored run's comes back to it, under the client id of the one it
  -- replaces (the same message, after plain regenerations).
  select * into v_message from agent_kit_messages m where m.id = agent_kit__opening_message(v_run.id);
  select * into v_current from agent_kit_messages m where m.id = agent_kit__opening_message(v_at.id);
  if v_message.id is null then
    raise exception 'run % has no opening message to restore', p_run_id using errcode = 'AK004';
  end if;
  if v_current.id is not null and v_current.id <> v_message.id and v_current.client_message_id is not null then
    v_client_id := v_current.client_message_id;
    update agent_kit_messages set client_message_id = null where id = v_current.id;
  end if;
  update agent_kit_messages set run_id = v_run.id, client_message_id = coalesce(v_client_id, client_message_id)
  where id = v_message.id;

  with replaced as (
    update agent_kit_runs r set superseded_by = v_run.id, updated_at = now()
    where r.thread_id = v_run.thread_id and r.turn_no >= v_at.turn_no and r.superseded_by is null
    returning r.id, r.turn_no
  )
  select array_agg(id order by turn_no) into v_superseded from replaced;
  update agent_kit_runs set superseded_by = null, updated_at = now() where id = v_run.id;
  perform agent_kit__append_event(v_run.thread_id, v_run.id, 0, 'turn-restored', jsonb_build_object(
    'runId', v_run.id, 'replaces', v_at.id, 'superseded', to_jsonb(v_superseded),
    'messageId', v_message.id, 'text', v_message.content->>'text'));
  return query select v_run.thread_id, v_run.id, v_message.id, v_superseded, true;
end $$;
