-- Opening a turn's stream read the whole thread's log. The chat POST finds its message's seq,
-- the AI SDK stream finds the run's first event and its latest park or close, and the run view
-- lists its segments; each filtered the thread's events by run and type through the
-- (thread_id, seq) key: on a thread of 100,000 events, 8–25 ms per question, growing with the
-- thread.
--
-- An index of each run's boundary events answers them by run: its message (always the run's
-- first event: agent_kit_start_turn appends it before run-queued), segment starts, parks, closes
-- and segment failures. Text deltas and tool events, the bulk of a log, get no entry, so the
-- write paths that append them (the mirror, step commits) pay nothing; a turn pays about three
-- entries (its message, one segment start, its close).

create index agent_kit_thread_events__run_boundary_idx on agent_kit_thread_events (run_id, seq)
  where type in ('message', 'segment-started', 'run-parked', 'run-closed', 'segment-failed');
