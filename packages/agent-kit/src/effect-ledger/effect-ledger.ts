// The effect ledger: a tool side effect is recorded `started` (guarded) before it runs and
// `completed`/`failed` after, once per idempotency key. A key a dead segment left `started` is
// reconciled through the tool's hook or marked `in_doubt` — never run again blindly (invariant 5).
import type { Lease } from '../lease/lease.js';
import type { Queryable } from '../store/db.js';
import { toNumber } from '../store/db.js';
import type { AgentTool } from '../model/index.js';

export type EffectStatus = 'started' | 'completed' | 'failed' | 'in_doubt';

export interface EffectRecord {
  runId: string;
  key: string;
  status: EffectStatus;
  fence: number;
  tool: string;
  input: unknown;
  result: unknown;
}

interface EffectRow {
  run_id: string;
  key: string;
  status: EffectStatus;
  fence: number | string;
  tool: string;
  input: unknown;
  result: unknown;
}

const toRecord = (row: EffectRow): EffectRecord => ({
  runId: row.run_id,
  key: row.key,
  status: row.status,
  fence: toNumber(row.fence),
  tool: row.tool,
  input: row.input,
  result: row.result,
});

/** The idempotency key of a tool call: (run, step, call index), stable across segments. */
export function effectKey(runId: string, stepNo: number, callIndex: number): string {
  return `${runId}:${stepNo}:${callIndex}`;
}

/**
 * Record `started` for `key`, or find the record already there. Null = lease lost.
 * The caller runs the tool only when the returned record is `started` under its own fence.
 */
export async function startEffect(
  db: Queryable, lease: Lease, key: string, tool: string, input: unknown,
): Promise<EffectRecord | null> {
  const rows = await db.query<EffectRow>(
    `select * from agent_kit_record_effect($1, $2, $3, $4, 'started', $5, $6::jsonb)`,
    [lease.runId, lease.owner, lease.fence, key, tool, JSON.stringify(input ?? null)],
  );
  return rows[0] ? toRecord(rows[0]) : null;
}

/** Finish an effect (completed, failed, or in_doubt). Null = lease lost. */
export async function finishEffect(
  db: Queryable, lease: Lease, key: string, status: Exclude<EffectStatus, 'started'>, result: unknown,
): Promise<EffectRecord | null> {
  const rows = await db.query<EffectRow>(
    `select * from agent_kit_record_effect($1, $2, $3, $4, $5, null, null, $6::jsonb)`,
    [lease.runId, lease.owner, lease.fence, key, status, JSON.stringify(result ?? null)],
  );
  return rows[0] ? toRecord(rows[0]) : null;
}

/** Effects of a run, oldest first. */
export async function listEffects(db: Queryable, runId: string): Promise<EffectRecord[]> {
  const rows = await db.query<EffectRow>(
    'select * from agent_kit_effects where run_id = $1 order by started_at, key',
    [runId],
  );
  return rows.map(toRecord);
}

export type ReconcileOutcome = { status: 'completed'; result: unknown } | { status: 'in_doubt'; result: unknown };

/** Ask the tool's reconcile hook whether a started effect happened; no hook → in doubt. */
export async function reconcileWithTool(
  tool: AgentTool<any, any> | undefined, key: string,
): Promise<ReconcileOutcome> {
  if (!tool?.reconcile) {
    return { status: 'in_doubt', result: { reason: 'no reconcile hook', key } };
  }
  try {
    const found = await tool.reconcile({ idempotencyKey: key });
    if (found.found) return { status: 'completed', result: found.result };
    // The hook looked and found nothing: the effect did not happen, but the tool may still be
    // running somewhere (a zombie); reporting in_doubt keeps us from running it a second time.
    return { status: 'in_doubt', result: { reason: 'not found by reconcile hook', key } };
  } catch (raw) {
    return { status: 'in_doubt', result: { reason: `reconcile hook failed: ${String((raw as Error)?.message ?? raw)}`, key } };
  }
}

/**
 * Reconcile every effect that an earlier (dead) segment left `started`, under our lease: through
 * the tool's hook (completed) or else in doubt. Runs before a resumed segment does anything else,
 * and before a salvage. Returns how many of each it settled, or null if the lease was lost.
 */
export async function reconcileDeadEffects(
  db: Queryable, lease: Lease, tools: Record<string, AgentTool<any, any>>,
): Promise<{ completed: number; inDoubt: number } | null> {
  const rows = await db.query<EffectRow>(
    `select * from agent_kit_effects where run_id = $1 and status = 'started' and fence < $2
     order by started_at, key`,
    [lease.runId, lease.fence],
  );
  const settled = { completed: 0, inDoubt: 0 };
  for (const row of rows) {
    const outcome = await reconcileWithTool(tools[row.tool], row.key);
    if (!(await finishEffect(db, lease, row.key, outcome.status, outcome.result))) return null;
    if (outcome.status === 'completed') settled.completed++;
    else settled.inDoubt++;
  }
  return settled;
}
