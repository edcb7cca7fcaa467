// Giving a run up: the salvage that closes it as aborted with what its viewers saw, and the
// effects it ends with in doubt.
import type { Db, Queryable } from '../store/db.js';
import { notifyThread } from '../store/notify-thread.js';
import { appendEventRow, closeRunWrite } from './guarded-writes.js';
import { allOrNothing, type Lease } from './lease.js';

/** An effect the run ends with in doubt, as the run-salvaged event and the message name it. */
export interface InDoubtEffect {
  key: string;
  tool: string;
}

// A run has a few effects per model step and at most maxSteps steps; the bound keeps one event's
// payload small even for a run that was allowed many more.
const inDoubtListMax = 100;

/** The run's effects in doubt (the first 100), for the message that closes it to name. */
export function effectsInDoubt(db: Queryable, runId: string): Promise<InDoubtEffect[]> {
  return db.query<InDoubtEffect>(
    `select key, tool from agent_kit_effects where run_id = $1 and status = 'in_doubt'
     order by started_at, key limit $2`,
    [runId, inDoubtListMax],
  );
}

/**
 * Why a run was given up: its last `times` claims in a row ended unfinished. Each claim spends an
 * attempt, and so does a claim by a process without a tool the run had started (ADR-0110), so
 * the reason names every way; `agent-kit show` gives each segment's end.
 */
export function salvageReason(times: number, maxRunAttempts: number): string {
  const inARow = times === 1 ? 'once' : `${times} times in a row`;
  return `the run's segments ended unfinished ${inARow} (their processes died or froze, failed, were refused by ` +
    `the model's provider or lacked a tool the run needed; AGENT_KIT_MAX_RUN_ATTEMPTS=${maxRunAttempts})`;
}

/**
 * Give a run up after its crash budget is spent: a run-salvaged event with the reason and the
 * effects it ends with in doubt (reconcile them first), then close it as aborted with its partial
 * output as the (partial) message, which names them too. One transaction, so that a crash between
 * the two does not leave an event the next try writes again. `content` is more for the message to
 * hold (the questions the run asked, ADR-0087). `attempts` is what the run records as spent: at
 * most the crash budget, as a claim past it that only gives the run up spent none. Null = lost.
 */
export async function salvageRun(
  db: Db, lease: Lease, partial: string, reason: string, content: Record<string, unknown> = {},
  attempts = lease.attempts,
): Promise<string | null> {
  const messageId = await allOrNothing(db, async (tx) => {
    const { runId, owner, fence } = lease;
    if (attempts !== lease.attempts && !await spendNoMoreThan(tx, lease, attempts)) return null;
    const inDoubt = await effectsInDoubt(tx, lease.runId);
    const event = { runId, fence, attempts, text: partial, reason, inDoubt };
    if ((await appendEventRow(tx, lease, 'run-salvaged', event)) === null) return null;
    const message = { text: partial, salvaged: true, ...content, ...(inDoubt.length > 0 ? { inDoubt } : {}) };
    return closeRunWrite.one(tx, { runId, owner, fence, status: 'aborted', message });
  });
  if (messageId !== null) notifyThread(db, lease.threadId);
  return messageId;
}

/**
 * Set the run's attempts down to `max` under the lease's guard: a claim past the crash budget that
 * only ends the run (a salvage, a cancel) spent none of it. False = lost.
 */
export async function spendNoMoreThan(db: Queryable, lease: Lease, max: number): Promise<boolean> {
  const rows = await db.query(
    `update agent_kit_runs set attempts = least(attempts, $4) where id = $1 and owner = $2 and fence = $3 and status = 'running'
     returning 1`, [lease.runId, lease.owner, lease.fence, max]);
  return rows.length === 1;
}
