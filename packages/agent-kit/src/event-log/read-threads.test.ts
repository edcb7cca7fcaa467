// Which runs of a thread a viewer sees, on both stores: the runs under way in turn order (the one
// running or parked, then those queued behind it), and the current run, the first of them or else
// the latest (ADR-0088).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import { claimRun, closeRun } from '../lease/lease.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { findCurrentRunId, findLatestRunId, findRunsUnderWay } from './read-threads.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

async function claimed(runId: string) {
  const claim = await claimRun(db, { runId, owner: 'reader-test', leaseTtlMs: 60_000 });
  if (!claim.claimed) throw new Error(`not claimed: ${claim.reason}`);
  return claim;
}

describe("a thread's runs under way", () => {
  it('lists the active run, then the queued ones in turn order; the current run is the first, else the latest', async () => {
    const first = await startTurn(db, { ownerId: 'reader', text: 'one' });
    const { threadId } = first;
    const claim = await claimed(first.runId);
    const second = await startTurn(db, { threadId, ownerId: 'reader', text: 'two' });
    const third = await startTurn(db, { threadId, ownerId: 'reader', text: 'three' });
    expect(await findRunsUnderWay(db, threadId)).toEqual([first.runId, second.runId, third.runId]);
    expect(await findCurrentRunId(db, threadId)).toBe(first.runId);

    expect(await closeRun(db, claim.lease, 'completed', { text: 'done' })).toEqual(expect.any(String));
    const secondClaim = await claimed(second.runId); // running now: still first
    expect(await findRunsUnderWay(db, threadId)).toEqual([second.runId, third.runId]);
    await closeRun(db, secondClaim.lease, 'completed', { text: 'done' });
    expect(await findRunsUnderWay(db, threadId)).toEqual([third.runId]);
    expect(await findCurrentRunId(db, threadId)).toBe(third.runId);

    await closeRun(db, (await claimed(third.runId)).lease, 'completed', { text: 'done' });
    expect(await findRunsUnderWay(db, threadId)).toEqual([]);
    expect(await findCurrentRunId(db, threadId)).toBe(third.runId); // every run closed: the latest
    expect(await findLatestRunId(db, threadId)).toBe(third.runId);
  });
});
