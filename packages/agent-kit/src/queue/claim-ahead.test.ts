// The drain claiming runs ahead of its free slots (ADR-0024), on both stores: it does so only
// while segments are short and never runs more than its concurrency; a stop with runs claimed
// ahead leaves none holding a lease; and the sizing rule on its own.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeWith, count, nullTurn, runState, testRuntime, type NullTurnAction } from '../../test/chaos/null-turn.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { claimRun, parkRun } from '../lease/lease.js';
import type { Db } from '../store/db.js';
import type { RunSegment } from '../turn/types.js';
import { claimsAhead } from './claim-pace.js';
import { drainQueue } from './drain-queue.js';
import { sleep } from './pace.js';
import { startTurn } from './start-turn.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb({ poolMax: 20 });
});
afterAll(async () => {
  await db.close();
});

/** `n` queued runs on new threads, with the queue cleared of other tests' jobs first. */
async function newRuns(n: number) {
  await db.query('delete from agent_kit_jobs');
  const runs: string[] = [];
  for (let i = 0; i < n; i++) runs.push((await startTurn(db, { ownerId: 'user-1', text: `ahead ${i}` })).runId);
  return runs;
}

describe('drainQueue claiming ahead', () => {
  /** A null turn that counts the segments in flight and, at each start, the runs our drain holds. */
  function watched(owner: string, action: NullTurnAction) {
    const seen = { inFlight: 0, maxInFlight: 0, maxHeld: 0 };
    const segment: RunSegment = nullTurn(async (rt, lease, options) => {
      seen.maxInFlight = Math.max(seen.maxInFlight, ++seen.inFlight);
      try {
        const held = await count(db, `select count(*) as n from agent_kit_runs where status = 'running' and owner like $1`, [`${owner}-%`]);
        seen.maxHeld = Math.max(seen.maxHeld, held);
        return await action(rt, lease, options);
      } finally {
        seen.inFlight--;
      }
    });
    return { seen, segment };
  }

  it('claims runs ahead of free slots while segments are short, and never runs more than its concurrency', async () => {
    const runs = await newRuns(30);
    const { seen, segment } = watched('ahead-short', closeWith('done'));
    const report = await drainQueue(testRuntime(db), { runSegment: segment, concurrency: 2, owner: 'ahead-short' });
    expect(report).toMatchObject({ claimed: 30, closed: 30, notClaimed: 0, errors: 0 });
    expect(seen.maxInFlight).toBe(2);
    expect(seen.maxHeld).toBeGreaterThan(2); // runs claimed ahead were waiting for a slot
    expect(seen.maxHeld).toBeLessThanOrEqual(4); // at most one slot's worth ahead per slot
    for (const runId of runs) expect(await runState(db, runId)).toEqual({ status: 'completed', fence: 1, messages: 1, jobs: 0 });
  });

  it('claims only for free slots while segments take longer than 200 ms', async () => {
    await newRuns(4);
    const { seen, segment } = watched('ahead-long', closeWith('slow', 250));
    const report = await drainQueue(testRuntime(db), { runSegment: segment, concurrency: 2, owner: 'ahead-long' });
    expect(report).toMatchObject({ claimed: 4, closed: 4, errors: 0 });
    expect(seen.maxHeld).toBe(2);
  });

  it('does not take a job whose run another process holds for a short segment', async () => {
    await newRuns(0);
    // The chat request's own segment holds this run; its fallback job came due meanwhile.
    const busy = await startTurn(db, { ownerId: 'user-1', text: 'held elsewhere' });
    expect((await claimRun(db, { runId: busy.runId, owner: 'chat-request', leaseTtlMs: 60_000 })).claimed).toBe(true);
    await db.query('insert into agent_kit_jobs (run_id, due_at) values ($1, agent_kit_now())', [busy.runId]);
    const runs: string[] = [];
    for (let i = 0; i < 4; i++) runs.push((await startTurn(db, { ownerId: 'user-1', text: `later ${i}`, jobDelayMs: 300 })).runId);
    const stop = new AbortController();
    const { seen, segment } = watched('ahead-busy', async (rt, lease, options) => {
      const outcome = await closeWith('slow', 250)(rt, lease, options);
      const closed = await count(db, `select count(*) as n from agent_kit_runs where status = 'completed' and id = any($1::uuid[])`, [runs]);
      if (closed === runs.length) stop.abort();
      return outcome;
    });
    const report = await drainQueue(testRuntime(db), {
      runSegment: segment, concurrency: 2, owner: 'ahead-busy', stopSignal: stop.signal, waitForWork: (signal) => sleep(50, signal),
    });
    expect(report).toMatchObject({ closed: 4, notClaimed: 1, errors: 0 });
    // 3 without the fix: the busy run's few milliseconds made segments look short, and runs
    // sat leased behind 250 ms segments where another worker could have run them.
    expect(seen.maxHeld).toBe(2);
  });

  it('sizes the runs claimed ahead to what the slots use up during one claim', () => {
    expect(claimsAhead(8, 5, 4, 200)).toBe(7); // null turns: most of a segment is a claim
    expect(claimsAhead(8, 1, 10, 200)).toBe(8); // never more than one per slot
    expect(claimsAhead(8, 60, 5, 200)).toBe(1); // a short model turn: one run covers a claim
    expect(claimsAhead(8, 250, 5, 200)).toBe(0); // long segments: claim only for free slots
    expect(claimsAhead(8, Number.NaN, 5, 200)).toBe(0); // nothing finished yet
    expect(claimsAhead(8, 5, Number.NaN, 200)).toBe(0); // no claim timed yet
  });

  it('starts the runs it claimed ahead when stopped, and they park: none is left holding a lease', async () => {
    const runs = await newRuns(30);
    const controller = new AbortController();
    const { seen, segment } = watched('ahead-stop', async (rt, lease, options) => {
      if (seen.maxHeld > 2) controller.abort(); // stop while runs wait, claimed ahead
      if (!options.stopSignal?.aborted) return closeWith('done')(rt, lease, options);
      // What the engine does at its first step boundary once stopped: a slice end.
      const ok = await parkRun(rt.db, lease, 'queued');
      return ok ? { kind: 'parked', status: 'queued', fence: lease.fence } : { kind: 'lost', fence: lease.fence };
    });
    const report = await drainQueue(testRuntime(db), {
      runSegment: segment, concurrency: 2, owner: 'ahead-stop', stopSignal: controller.signal,
    });
    expect(seen.maxHeld).toBeGreaterThan(2);
    expect(report.claimed).toBe(report.closed + report.parked);
    expect(report.parked).toBeGreaterThan(0);
    expect(report.errors).toBe(0);
    const states = await Promise.all(runs.map((runId) => runState(db, runId)));
    expect(states.filter((s) => s.status === 'running')).toEqual([]);
    expect(states.filter((s) => s.status === 'completed')).toHaveLength(report.closed);
    // Every run not closed is queued with its job, parked ones included: nothing is lost.
    expect(states.filter((s) => s.status === 'queued' && s.jobs === 1)).toHaveLength(30 - report.closed);
  });
});
