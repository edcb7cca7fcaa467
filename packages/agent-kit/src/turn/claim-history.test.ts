// A run's first claim reads the thread's history in the same statement (ADR-0017). On Postgres,
// the previous turn's close can commit after that statement took its snapshot but before the
// claim function's update looked: the claim then succeeds, and the history must still hold the
// answer it just saw closed (migration 0023). The interleaving is forced with a table lock that
// the claim function's update waits for after the statement's snapshot was taken.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gate } from '../../test/harness/turn-kit.js';
import { onPostgres, openTestDb } from '../../test/harness/test-db.js';
import { claimRun } from '../lease/lease.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { claimSegment } from './segment-claim.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb({ poolMax: 6 });
});
afterAll(async () => {
  await db.close();
});

async function until(probe: () => Promise<boolean>, what: string): Promise<void> {
  const startedMs = Date.now();
  while (!(await probe())) {
    if (Date.now() - startedMs > 10_000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const count = async (sql: string) => Number((await db.query<{ n: number | string }>(sql))[0]!.n);

describe.runIf(onPostgres)("a first claim's history (Postgres)", () => {
  it('holds the answer of a previous turn that closed while the claim was under way', async () => {
    const first = await startTurn(db, { ownerId: 'u', text: 'first question' });
    const held = await claimRun(db, { runId: first.runId, owner: 'first-owner', leaseTtlMs: 60_000 });
    if (!held.claimed) throw new Error('the first turn could not be claimed');
    const second = await startTurn(db, { threadId: first.threadId, ownerId: 'u', text: 'second question' });

    // A: the first turn's close, written but not committed.
    const closeWritten = gate();
    const commitClose = gate();
    const close = db.transaction(async (tx) => {
      await tx.query(`select agent_kit_close_run($1, 'completed', '{"text":"the first answer"}'::jsonb, $2, $3)`,
        [first.runId, held.lease.owner, held.lease.fence]);
      closeWritten.open();
      await commitClose.wait();
    });
    await closeWritten.wait();
    // X: a lock on the jobs table, which the claim function's statement needs before it takes
    // its own snapshot (X waits behind A if the close touched the table, and the claim behind X).
    const releaseLock = gate();
    const lock = db.transaction(async (tx) => {
      await tx.query('lock table agent_kit_jobs in access exclusive mode');
      await releaseLock.wait();
    });
    await until(async () => (await count(`select count(*) as n from pg_locks
      where relation = 'agent_kit_jobs'::regclass and mode = 'AccessExclusiveLock'`)) > 0, 'the table lock request');
    // B: the second turn's first claim; its statement's snapshot is taken now, before A commits.
    const claim = claimSegment(db, { runId: second.runId, owner: 'second-owner', leaseTtlMs: 60_000, budgetMs: 60_000 });
    await until(async () => (await count(`select count(*) as n from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock' and query like '%agent_kit_claim_run%'`)) > 0,
    'the claim to wait for the lock');
    commitClose.open();
    await close;
    releaseLock.open();
    await lock;

    const claimed = await claim;
    expect(claimed.claimed).toBe(true);
    if (!claimed.claimed) return;
    // Without migration 0023: [first question, second question], the answer missing.
    expect(claimed.begun?.history).toEqual([
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: 'the first answer' },
      { role: 'user', content: 'second question' },
    ]);
  });
});
