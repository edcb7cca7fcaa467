// Regenerate and restore take the thread row, and every writer of a run (a claim, a segment's
// writes, a close, a cancel) takes its run before the thread row. A regenerate that locked the
// message's run after the thread row deadlocked with that run's first claim when the turn was
// still queued (ADR-0104, migration 0040): Postgres broke the cycle by failing one of them with
// 40P01, a drain's whole batch of claims or a 500 for the regenerate. The interleaving is forced
// with a transaction that holds the thread row while both calls line up behind it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gate, makeRuntime } from '../../test/harness/turn-kit.js';
import { onPostgres, openTestDb } from '../../test/harness/test-db.js';
import { ConflictError } from '../errors.js';
import type { Db } from '../store/db.js';
import { claimSegment } from '../turn/segment-claim.js';
import { runSegment } from '../turn/run-segment.js';
import { regenerateTurn } from './regenerate-turn.js';
import { restoreTurn } from './restore-turn.js';
import { startTurn } from './start-turn.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb({ poolMax: 6 });
});
afterAll(async () => {
  await db.close();
});

/** Until a statement whose text holds `call` waits for a lock. */
async function waitsForALock(call: string): Promise<void> {
  const startedMs = Date.now();
  for (;;) {
    const [row] = await db.query<{ n: number }>(
      `select count(*)::int as n from pg_stat_activity
       where datname = current_database() and wait_event_type = 'Lock' and query like $1`, [`%${call}%`]);
    if (row!.n > 0) return;
    if (Date.now() - startedMs > 10_000) throw new Error(`timed out waiting for ${call} to wait for a lock`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A transaction that holds the thread's row until the returned gate opens. */
async function holdThread(threadId: string) {
  const held = gate();
  const release = gate();
  const done = db.transaction(async (tx) => {
    await tx.query('select 1 from agent_kit_threads where id = $1 for update', [threadId]);
    held.open();
    await release.wait();
  });
  await held.wait();
  return { release: () => release.open(), done };
}

const settled = <T>(promise: Promise<T>) => promise.then((value) => ({ value }), (error: unknown) => ({ error }));

describe.runIf(onPostgres)('the lock order of regenerate and restore (Postgres)', () => {
  const run = (runId: string) => runSegment(makeRuntime(db), { runId, owner: 'w' });

  it('refuses to regenerate a queued turn while its first claim comes, and the claim goes through', async () => {
    const first = await startTurn(db, { ownerId: 'ann', text: 'first', clientMessageId: 'lo-1' });
    expect(await run(first.runId)).toMatchObject({ kind: 'closed', status: 'completed' });
    const second = await startTurn(db, { threadId: first.threadId, ownerId: 'ann', text: 'second', clientMessageId: 'lo-2' });

    const holder = await holdThread(first.threadId);
    const regenerate = settled(regenerateTurn(db, { threadId: first.threadId, ownerId: 'ann', message: 'lo-2' }));
    await waitsForALock('agent_kit_regenerate_turn');
    const claim = settled(claimSegment(db, { runId: second.runId, owner: 'drain', leaseTtlMs: 60_000, budgetMs: 60_000 }));
    await waitsForALock('agent_kit_claim_run');
    holder.release();
    await holder.done;

    const [regenerated, claimed] = await Promise.all([regenerate, claim]);
    // Before migration 0040 one of the two failed with "deadlock detected" (40P01).
    expect('error' in regenerated && regenerated.error).toBeInstanceOf(ConflictError);
    expect('value' in claimed && claimed.value).toMatchObject({ claimed: true });
  });

  it('restores an earlier answer while a new turn waits for the thread: both go through, in that order', async () => {
    const first = await startTurn(db, { ownerId: 'ann', text: 'ask me', clientMessageId: 'lr-1' });
    expect(await run(first.runId)).toMatchObject({ kind: 'closed', status: 'completed' });
    const again = await regenerateTurn(db, { threadId: first.threadId, ownerId: 'ann', message: 'lr-1' });
    expect(await run(again.runId)).toMatchObject({ kind: 'closed', status: 'completed' });

    const holder = await holdThread(first.threadId);
    const restore = settled(restoreTurn(db, { runId: first.runId, ownerId: 'ann' }));
    await waitsForALock('agent_kit_restore_turn');
    const next = settled(startTurn(db, { threadId: first.threadId, ownerId: 'ann', text: 'and then', clientMessageId: 'lr-2' }));
    await waitsForALock('agent_kit_start_turn');
    holder.release();
    await holder.done;

    const [restored, started] = await Promise.all([restore, next]);
    expect('value' in restored && restored.value).toMatchObject({ runId: first.runId, restored: true });
    expect('value' in started && started.value).toMatchObject({ created: true });
  });
});
