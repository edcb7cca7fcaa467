// A tool's reconcile hook that never answers (a provider lookup that hangs) must not stall anyone:
// the hook gets a deadline and an AbortSignal, an unanswered hook counts as a failed one (the
// effect becomes in_doubt with a reason), runs with nothing to reconcile are requeued before any
// hook is asked, a resumed segment gives the hook no more than its own budget, and a reaper that
// is told to stop leaves the effect `started` for the next pass. Both stores; time by fake now.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openTestDb } from '../../test/harness/test-db.js';
import { count, testRuntime } from '../../test/chaos/null-turn.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { claimRun, type Lease } from '../lease/lease.js';
import type { AgentTool } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import { advanceFakeNow, clearFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { runSegment } from '../turn/run-segment.js';
import { reapExpiredRuns } from './reap-expired-runs.js';

let db: Db;
beforeAll(async () => { db = await openTestDb({ poolMax: 20 }); });
afterAll(async () => { await clearFakeNow(db); await db.close(); });
beforeEach(async () => {
  // Each test sees only its own expired runs.
  await db.query(`update agent_kit_runs set status = 'aborted', owner = null, lease_expires_at = null
    where status in ('running', 'queued')`);
  await db.query('delete from agent_kit_jobs');
  await clearFakeNow(db);
});

/** A charge_card tool whose reconcile hook never answers; it records what the hook was given. */
function hangingTool(onCall: (signal: AbortSignal | undefined) => void | Promise<void> = () => {}) {
  const tool: AgentTool<{ cents: number }, unknown> = {
    name: 'charge_card', description: 'reconcile never answers', inputSchema: z.object({ cents: z.number() }),
    async reconcile(ctx) {
      await onCall(ctx.signal);
      return new Promise(() => {});
    },
  };
  return tool;
}

async function claimed(runId: string, owner: string): Promise<Lease> {
  const result = await claimRun(db, { runId, owner, leaseTtlMs: 5_000, budgetMs: 60_000 });
  if (!result.claimed) throw new Error(`expected a claim, got ${result.reason}`);
  return result.lease;
}

/** A run whose (dead) segment left a charge_card effect `started`. */
async function runWithStartedCharge(ownerId: string) {
  const turn = await startTurn(db, { ownerId, text: 'pay' });
  await db.query('delete from agent_kit_jobs where run_id = $1', [turn.runId]);
  const lease = await claimed(turn.runId, `dead-${ownerId}`);
  const key = `${turn.runId}:0:0`;
  await db.query(`select * from agent_kit_record_effect($1, $2, $3, $4, 'started', 'charge_card', '{"cents":1}'::jsonb)`,
    [lease.runId, lease.owner, lease.fence, key]);
  return { runId: turn.runId, key };
}

/** A run whose (dead) segment left nothing to reconcile. */
async function plainExpiredRun(ownerId: string) {
  const turn = await startTurn(db, { ownerId, text: 'unrelated' });
  await db.query('delete from agent_kit_jobs where run_id = $1', [turn.runId]);
  await claimed(turn.runId, `dead-${ownerId}`);
  return turn.runId;
}

async function effect(runId: string) {
  const [row] = await db.query<{ status: string; result: { reason?: string } | null }>(
    'select status, result from agent_kit_effects where run_id = $1', [runId]);
  return row!;
}

/** `promise`'s value, or 'timed out' if it takes longer than `ms` (the hang the fix removes). */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timed out'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timed out'>((resolve) => { timer = setTimeout(() => resolve('timed out'), ms); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const jobsOf = (runId: string) => count(db, 'select count(*) as n from agent_kit_jobs where run_id = $1', [runId]);

describe('a reconcile hook that never answers', () => {
  it('is given up at its deadline: the effect is in doubt with a reason, the hook aborted, both runs requeued', async () => {
    let seen: AbortSignal | undefined;
    const paying = await runWithStartedCharge('hang-1');
    const plain = await plainExpiredRun('hang-1b');
    await advanceFakeNow(db, 6_000);
    const rt = testRuntime(db, {}, { charge_card: hangingTool((signal) => { seen = signal; }) });
    const report = await within(reapExpiredRuns(rt, { reconcileTimeoutMs: 300 }), 5_000);
    expect(report).toMatchObject({ scanned: 2, requeued: 2, inDoubt: 1, errors: 0 });
    expect(await effect(paying.runId)).toMatchObject({ status: 'in_doubt' });
    expect((await effect(paying.runId)).result?.reason).toMatch(/did not answer within 300 ms/);
    expect(seen?.aborted).toBe(true);
    expect(await jobsOf(paying.runId)).toBe(1);
    expect(await jobsOf(plain)).toBe(1);
  });

  it('does not hold up the runs that have nothing to reconcile: they are requeued before it is asked', async () => {
    const plain = await plainExpiredRun('first-1');
    await runWithStartedCharge('first-2');
    await advanceFakeNow(db, 6_000);
    let plainJobsWhenAsked = -1;
    const tool = hangingTool(async () => { plainJobsWhenAsked = await jobsOf(plain); });
    await within(reapExpiredRuns(testRuntime(db, {}, { charge_card: tool }), { reconcileTimeoutMs: 300 }), 5_000);
    expect(plainJobsWhenAsked).toBe(1);
  });

  it('is given no more than the salvage lease when the run is given up, and the run is salvaged', async () => {
    const paying = await runWithStartedCharge('hang-3');
    await advanceFakeNow(db, 6_000);
    const rt = testRuntime(db, { maxRunAttempts: 1, leaseTtlMs: 400 }, { charge_card: hangingTool() });
    const report = await within(reapExpiredRuns(rt), 5_000); // default timeout (10 s) > the 400 ms lease
    expect(report).toMatchObject({ salvaged: 1, inDoubt: 1, errors: 0 });
    expect(await effect(paying.runId)).toMatchObject({ status: 'in_doubt' });
  });

  it('is abandoned without a verdict when the reaper is told to stop: the effect stays started', async () => {
    const paying = await runWithStartedCharge('hang-4');
    await advanceFakeNow(db, 6_000);
    const stop = new AbortController();
    const tool = hangingTool(() => { setTimeout(() => stop.abort(), 50); });
    const report = await within(reapExpiredRuns(testRuntime(db, {}, { charge_card: tool }), { signal: stop.signal }), 5_000);
    expect(report).toMatchObject({ scanned: 1, requeued: 0, inDoubt: 0, deferred: 1 });
    expect(await effect(paying.runId)).toMatchObject({ status: 'started' });
  });

  it('does not keep a resumed segment past its budget: the effect is in doubt and the segment returns', async () => {
    const paying = await runWithStartedCharge('hang-5');
    await advanceFakeNow(db, 6_000);
    const rt = makeRuntime(db, { tools: { charge_card: hangingTool() } });
    const startedMs = Date.now();
    const outcome = await within(runSegment(rt, { runId: paying.runId, owner: 'w2', budgetMs: 1_000, leaseTtlMs: 1_000 }), 5_000);
    expect(outcome).not.toBe('timed out');
    expect(Date.now() - startedMs).toBeLessThan(2_500);
    expect(await effect(paying.runId)).toMatchObject({ status: 'in_doubt' });
  });
});
