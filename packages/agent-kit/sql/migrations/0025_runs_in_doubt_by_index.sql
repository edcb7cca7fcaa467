-- After an incident an operator asks which runs have effects in doubt (`agent-kit runs
-- --in-doubt`, GET /api/runs?inDoubt=1). Without an index the only ways to answer were to read
-- every effect and filter on status, or to walk every run from the newest back and look up its
-- effects: both grow with the whole history, while the answer is a handful of runs.
--
-- This index holds only effects in doubt, keyed by run, so the list reads the runs it names and
-- nothing else. An effect enters it when it is marked in_doubt and leaves it when it is settled;
-- started, completed and failed effects, nearly all of them, write no entry. The cost: status is
-- in the predicate, so settling an effect is no longer a HOT update (ADR-0042).

create index agent_kit_effects__in_doubt_run_id_idx on agent_kit_effects (run_id)
  where status = 'in_doubt';
