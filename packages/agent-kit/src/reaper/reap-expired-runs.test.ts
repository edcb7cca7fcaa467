// The reaper on both stores, moving the lease clock instead of sleeping: an expired run with
// attempts left keeps its row and gets a job (partial not promoted); at the crash budget it is
// salvaged as aborted with its partial; started effects are reconciled first; a renewed lease is
// left alone; and (Postgres) two reapers, or a reaper and a drain, never make two owners.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { onPostgres, openTestDb } from '../../test/harness/test-db.js';
import { closeWith, count, nullTurn, testRuntime } from '../../test/chaos/null-turn.js';
import { claimRun, mirrorPartial, renewLease, type Lease } from '../lease/lease.js';
import type { AgentTool } from '../model/index.js';
import { drainQueue } from '../queue/drain-queue.js';
import { enqueueRun } from '../queue/jobs.js';
import { startTurn } from '../queue/start-turn.js';
import { reconcileDeadEffects } from '../effect-ledger/index.js';
import { advanceFakeNow, clearFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { reapExpiredRuns } from './reap-expired-runs.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb({ poolMax: 20 });
});
afterAll(async () => {
  await db.close();
});

/** Expire every live lease of earlier tests, and hand them to a throwaway pass, so each test starts clean. */
async function cleanSlate() {
  await db.query(`update agent_kit_runs set status = 'aborted', owner = null, lease_expires_at = null
    where status in ('running', 'queued')`);
  await db.query('delete from agent_kit_jobs');
  await clearFakeNow(db);
}

async function claimed(runId: string, owner: string, leaseTtlMs = 5_000): Promise<Lease> {
  const result = await claimRun(db, { runId, owner, leaseTtlMs, budgetMs: 60_000 });
  if (!result.claimed) throw new Error(`expected a claim, got ${result.reason}`);
  return result.lease;
}

async function runRow(runId: string) {
  const [row] = await db.query<Record<string, unknown>>(
    'select status, owner, fence, attempts, partial, lease_expires_at, message_id from agent_kit_runs where id = $1',
    [runId]);
  return { ...row, fence: Number(row!.fence) };
}

async function startEffect(lease: Lease, key: string, tool: string) {
  await db.query(`select * from agent_kit_record_effect($1, $2, $3, $4, 'started', $5, $6::jsonb)`,
    [lease.runId, lease.owner, lease.fence, key, tool, JSON.stringify({ note: `for ${key}` })]);
}

/** What each call of the hook was given: its key and the call's input. */
const asked: Array<{ idempotencyKey: string; input?: { note: string } }> = [];
const hooked: AgentTool<{ note: string }, unknown> = {
  name: 'hooked', description: 'has a reconcile hook', inputSchema: z.object({ note: z.string() }),
  async reconcile({ idempotencyKey, input }) {
    asked.push({ idempotencyKey, input });
    return idempotencyKey.endsWith('done') ? { found: true, result: { ok: idempotencyKey } } : { found: false };
  },
};
const blind: AgentTool<{ note: string }, unknown> = {
  name: 'blind', description: 'no reconcile hook', inputSchema: z.object({ note: z.string() }),
};

describe('reapExpiredRuns', () => {
  it('requeues an expired run with attempts left: row unchanged, job due, partial not promoted', async () => {
    await cleanSlate();
    const { runId } = await startTurn(db, { ownerId: 'u', text: 'resume me' });
    const lease = await claimed(runId, 'dead-worker');
    expect((await mirrorPartial(db, lease, 'half an ans')).ok).toBe(true);
    await advanceFakeNow(db, 6_000);
    const before = await runRow(runId);
    const report = await reapExpiredRuns(testRuntime(db));
    expect(report).toMatchObject({ scanned: 1, requeued: 1, salvaged: 0, errors: 0 });
    expect(await runRow(runId)).toEqual(before);
    expect(before).toMatchObject({ status: 'running', owner: 'dead-worker', fence: 1, partial: 'half an ans', message_id: null });
    expect(await count(db, `select count(*) as n from agent_kit_jobs where run_id = $1 and due_at <= agent_kit_now()`, [runId])).toBe(1);
    expect(await count(db, `select count(*) as n from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId])).toBe(0);
    // The drain then continues the same run with the next fence.
    const drained = await drainQueue(testRuntime(db), { runSegment: nullTurn(closeWith('whole answer')) });
    expect(drained).toMatchObject({ claimed: 1, closed: 1 });
    expect(await runRow(runId)).toMatchObject({ status: 'completed', fence: 2 });
  });

  it('salvages a run at the crash budget: aborted, its partial as a partial message, viewers told', async () => {
    await cleanSlate();
    const { runId, threadId } = await startTurn(db, { ownerId: 'u', text: 'keeps dying' });
    await claimed(runId, 'w1');
    await advanceFakeNow(db, 6_000);
    const second = await claimed(runId, 'w2');
    expect(second.attempts).toBe(2);
    expect((await mirrorPartial(db, second, 'what survived')).ok).toBe(true);
    await advanceFakeNow(db, 6_000);
    const report = await reapExpiredRuns(testRuntime(db, { maxRunAttempts: 2 }), { owner: 'reaper-1' });
    expect(report).toMatchObject({ scanned: 1, requeued: 0, salvaged: 1 });
    expect(await runRow(runId)).toMatchObject({ status: 'aborted', fence: 3, owner: null });
    const [message] = await db.query<{ content: { text: string; salvaged: boolean }; partial: boolean }>(
      `select content, partial from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId]);
    expect(message).toEqual({ content: { text: 'what survived', salvaged: true }, partial: true });
    const events = await db.query<{ type: string; fence: number }>(
      `select type, fence from agent_kit_thread_events where thread_id = $1 and run_id = $2 and fence = 3 order by seq`,
      [threadId, runId]);
    expect(events.map((e) => e.type)).toEqual(['run-salvaged', 'run-closed']);
    expect(await count(db, 'select count(*) as n from agent_kit_jobs where run_id = $1', [runId])).toBe(0);
  });

  it('records at most the crash budget for a run whose claim past it died before giving it up', async () => {
    // Found by the simulation's invariant: a claim (a reader's, a retried request's) took the run
    // at its last attempt, making it 3 of 2, and died; the reaper's salvage recorded 3.
    await cleanSlate();
    const { runId } = await startTurn(db, { ownerId: 'u', text: 'claimed past its budget' });
    for (const owner of ['w1', 'w2', 'w3']) {
      await claimed(runId, owner);
      await advanceFakeNow(db, 6_000);
    }
    const report = await reapExpiredRuns(testRuntime(db, { maxRunAttempts: 2 }), { owner: 'reaper-1' });
    expect(report).toMatchObject({ salvaged: 1 });
    expect(await runRow(runId)).toMatchObject({ status: 'aborted', attempts: 2 });
    const [salvaged] = await db.query<{ data: { attempts: number; reason: string } }>(
      `select data from agent_kit_thread_events where run_id = $1 and type = 'run-salvaged'`, [runId]);
    expect(salvaged!.data).toMatchObject({ attempts: 2, reason: expect.stringContaining('2 times in a row') });
  });

  it("reconciles a dead segment's started effects through the tool's hook, or marks them in doubt", async () => {
    await cleanSlate();
    const { runId } = await startTurn(db, { ownerId: 'u', text: 'effects' });
    const lease = await claimed(runId, 'w1');
    await startEffect(lease, 'k-done', 'hooked');
    await startEffect(lease, 'k-missing', 'hooked');
    await startEffect(lease, 'k-blind', 'blind');
    await advanceFakeNow(db, 6_000);
    const report = await reapExpiredRuns(testRuntime(db, {}, { hooked, blind }));
    expect(report).toMatchObject({ requeued: 1, reconciled: 1, inDoubt: 2 });
    const effects = await db.query<{ key: string; status: string; result: unknown }>(
      'select key, status, result from agent_kit_effects where run_id = $1 order by key', [runId]);
    expect(effects.map((e) => [e.key, e.status])).toEqual([
      ['k-blind', 'in_doubt'], ['k-done', 'completed'], ['k-missing', 'in_doubt'],
    ]);
    expect(effects.find((e) => e.key === 'k-done')?.result).toEqual({ ok: 'k-done' });
    // Each hook was given the call's input too, to look the effect up by the outside system's
    // own reference, or send it again under the same key.
    expect(asked.slice(-2)).toEqual([
      { idempotencyKey: 'k-done', input: { note: 'for k-done' } }, { idempotencyKey: 'k-missing', input: { note: 'for k-missing' } },
    ]);
  });

  it("leaves the started effect of a tool it does not register for the run's next segment to reconcile", async () => {
    await cleanSlate();
    const { runId } = await startTurn(db, { ownerId: 'u', text: 'reaped by the CLI' });
    const lease = await claimed(runId, 'w1');
    await startEffect(lease, 'k-done', 'hooked');
    await advanceFakeNow(db, 6_000);
    // `agent-kit reap` knows only the demo tools: it requeues the run and gives no verdict.
    const report = await reapExpiredRuns(testRuntime(db, {}, {}));
    expect(report).toMatchObject({ requeued: 1, reconciled: 0, inDoubt: 0, unregistered: 1 });
    const status = async () => (await db.query<{ status: string }>(
      'select status from agent_kit_effects where run_id = $1', [runId]))[0]?.status;
    expect(await status()).toBe('started');
    // The next segment runs where the tool is registered: its hook confirms the payment.
    const resumed = await claimed(runId, 'w2');
    expect(await reconcileDeadEffects(db, resumed, { hooked })).toMatchObject({ completed: 1, inDoubt: 0 });
    expect(asked.at(-1)).toEqual({ idempotencyKey: 'k-done', input: { note: 'for k-done' } });
    expect(await status()).toBe('completed');
  });

  it('marks the started effect of a tool it does not register in doubt when it gives the run up, saying why', async () => {
    await cleanSlate();
    const { runId } = await startTurn(db, { ownerId: 'u', text: 'given up by the CLI' });
    const lease = await claimed(runId, 'w1');
    await startEffect(lease, 'k-unknown', 'hooked');
    await advanceFakeNow(db, 6_000);
    const report = await reapExpiredRuns(testRuntime(db, { maxRunAttempts: 1 }, {}));
    expect(report).toMatchObject({ salvaged: 1, inDoubt: 1, unregistered: 0 });
    const [effect] = await db.query<{ status: string; result: { reason: string } }>(
      'select status, result from agent_kit_effects where run_id = $1', [runId]);
    expect(effect).toMatchObject({ status: 'in_doubt', result: { reason: 'the tool is not registered in this process' } });
  });

  it('reconciles started effects under its own lease before salvaging', async () => {
    await cleanSlate();
    const { runId } = await startTurn(db, { ownerId: 'u', text: 'effects then give up' });
    const lease = await claimed(runId, 'w1');
    await startEffect(lease, 'k-done', 'hooked');
    await advanceFakeNow(db, 6_000);
    const report = await reapExpiredRuns(testRuntime(db, { maxRunAttempts: 1 }, { hooked }));
    expect(report).toMatchObject({ salvaged: 1, reconciled: 1 });
    const [effect] = await db.query<{ status: string; fence: number }>(
      'select status, fence from agent_kit_effects where run_id = $1', [runId]);
    expect({ ...effect, fence: Number(effect!.fence) }).toEqual({ status: 'completed', fence: 2 });
  });

  it('leaves a run alone whose lease was renewed before it expired', async () => {
    await cleanSlate();
    const { runId } = await startTurn(db, { ownerId: 'u', text: 'slow but alive' });
    const lease = await claimed(runId, 'w1', 5_000);
    await advanceFakeNow(db, 4_000);
    expect(await renewLease(db, lease, 5_000)).toBe(true);
    await advanceFakeNow(db, 2_000); // 6 s after the claim, 2 s after the renewal
    const before = await runRow(runId);
    const report = await reapExpiredRuns(testRuntime(db, { maxRunAttempts: 1 }));
    expect(report).toMatchObject({ scanned: 0, requeued: 0, salvaged: 0 });
    expect(await runRow(runId)).toEqual(before);
    expect(await count(db, 'select count(*) as n from agent_kit_jobs where run_id = $1', [runId])).toBe(0);
  });

  it('does not requeue a run that a drain claimed after the scan (the fence it saw is gone)', async () => {
    await cleanSlate();
    const { runId } = await startTurn(db, { ownerId: 'u', text: 'claimed in between' });
    const lease = await claimed(runId, 'w1');
    await advanceFakeNow(db, 6_000);
    await claimed(runId, 'w2');
    expect(await enqueueRun(db, runId, lease.fence)).toBe(false);
    expect(await count(db, 'select count(*) as n from agent_kit_jobs where run_id = $1', [runId])).toBe(0);
  });
});

describe.runIf(onPostgres)('reapExpiredRuns, racing (Postgres)', () => {
  async function expiredRuns(n: number, attempts: number) {
    const runIds: string[] = [];
    for (let i = 0; i < n; i++) {
      const { runId } = await startTurn(db, { ownerId: 'u', text: `race ${i}` });
      for (let a = 0; a < attempts; a++) {
        const lease = await claimed(runId, `w${a}`);
        await mirrorPartial(db, lease, `p${a} `);
        await advanceFakeNow(db, 6_000);
      }
      runIds.push(runId);
    }
    return runIds;
  }

  async function expectClosedOnce(runIds: string[]) {
    for (const runId of runIds) {
      expect(await count(db, `select count(*) as n from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId])).toBe(1);
      expect(await count(db, `select count(*) as n from agent_kit_thread_events where run_id = $1 and type = 'run-closed'`, [runId])).toBe(1);
    }
  }

  it('two reapers at once salvage each run once', async () => {
    await cleanSlate();
    const runIds = await expiredRuns(20, 2);
    const rt = testRuntime(db, { maxRunAttempts: 2 });
    const reports = await Promise.all([
      reapExpiredRuns(rt, { owner: 'reaper-a' }), reapExpiredRuns(rt, { owner: 'reaper-b' }),
    ]);
    expect(reports[0]!.salvaged + reports[1]!.salvaged).toBe(20);
    await expectClosedOnce(runIds);
    expect(await count(db, `select count(*) as n from agent_kit_runs where id = any($1) and status = 'aborted' and fence = 3`, [runIds])).toBe(20);
  });

  it('a reaper salvaging and a drain claiming the same expired runs never make two owners', async () => {
    await cleanSlate();
    const runIds = await expiredRuns(20, 2);
    for (const runId of runIds) await enqueueRun(db, runId);
    const rt = testRuntime(db, { maxRunAttempts: 2 });
    const [reaped, drained] = await Promise.all([
      reapExpiredRuns(rt, { owner: 'reaper-a' }),
      drainQueue(rt, { runSegment: nullTurn(closeWith('finished', 2)), concurrency: 4 }),
    ]);
    expect(reaped.salvaged + drained.closed).toBe(20);
    await expectClosedOnce(runIds);
    // Whoever won took fence 3 exactly once; the loser wrote nothing.
    expect(await count(db, `select count(*) as n from agent_kit_runs where id = any($1) and fence = 3
      and status in ('aborted', 'completed')`, [runIds])).toBe(20);
  });
});
