-- Listing failed or aborted runs (GET /api/runs?status=failed, `agent-kit runs --status failed`)
-- walked every run from the newest back through agent_kit_runs__created_at_idx and filtered on
-- status: 30 ms with 200,000 runs when the failures were old, and an operator looks for them when
-- something is wrong. Open statuses already have their partial indexes (lease expiry, queued
-- turns, the active run). This one holds only failed and aborted runs: a run that completes, the
-- common close, writes no entry.

create index agent_kit_runs__failed_created_at_idx on agent_kit_runs (created_at desc, id)
  where status in ('failed', 'aborted');
