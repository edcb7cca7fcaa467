// A lock taken in the wrong order deadlocks only when two calls meet at the wrong moment; each
// test forces that moment with a transaction that holds the thread row while the calls line up.
//
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
import { claimRun } from '../lease/lease.js';
import { advanceFakeNow, clearFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { claimSegment } from '../turn/segment-claim.js';
import { runSegment } from '../turn/run-segment.js';
import { regenerateTurn } from './regenerate-turn.js';
import { restoreTurn } from './restore-turn.js';
import { takeOverRun } from './run-intents.js';
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

describe.runIf(onPostgres)('the lock order of the writers of a run (Postgres)', () => {
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

  it("closes a segment's last step with its effect while the reaper reconciles that effect: no deadlock", async () => {
    // A step that finishes an effect and closes the run, written after the lease ran out and before
    // anyone claimed it. Up to migration 0041 it locked the run FOR SHARE and upgraded the lock in
    // the close, after taking the effect's row: the reaper, sharing the run and waiting for that
    // row, made a cycle (40P01).
    const turn = await startTurn(db, { ownerId: 'ann', text: 'pay then close', clientMessageId: 'lc-1' });
    const claim = await claimRun(db, { runId: turn.runId, owner: 'w1', leaseTtlMs: 60_000 });
    if (!claim.claimed) throw new Error(`not claimed: ${claim.reason}`);
    const { fence } = claim.lease;
    await db.query(`select agent_kit_record_effect($1, 'w1', $2, 'pay-1', 'started', 'pay', '{}'::jsonb)`, [turn.runId, fence]);
    await advanceFakeNow(db, 120_000);
    try {
      const holder = await holdThread(turn.threadId);
      const commit = settled(db.query<{ message_id: string | null }>(
        `select message_id from agent_kit_commit_step($1, 'w1', $2, 1, 'tool', '{}'::jsonb, 'tool-result', '{}'::jsonb,
           null, 'pay-1', 'completed', '{"paid": true}'::jsonb, 'completed', '{"text": "paid"}'::jsonb)`,
        [turn.runId, fence]));
      await waitsForALock('agent_kit_commit_step');
      const reconcile = settled(db.query(`select agent_kit_reconcile_effect($1, $2, 'pay-1', 'in_doubt') as ok`, [turn.runId, fence]));
      await waitsForALock('agent_kit_reconcile_effect'); // on the run now; on the effect's row before 0041
      holder.release();
      await holder.done;

      const [committed, reconciled] = await Promise.all([commit, reconcile]);
      expect('error' in reconciled ? reconciled.error : null).toBeNull();
      expect('value' in committed && committed.value[0]?.message_id).toEqual(expect.any(String));
      const [effect] = await db.query<{ status: string }>(`select status from agent_kit_effects where run_id = $1`, [turn.runId]);
      expect(effect!.status).toBe('completed');
    } finally {
      await clearFakeNow(db);
    }
  });

  it("replies to a held run while the thread's next turn is cancelled: no deadlock", async () => {
    // The reply gives the next queued turn its job after taking the thread row; the job's key
    // check on that run waited for the cancel, which held it and waited for the thread row (40P01).
    const held = await startTurn(db, { ownerId: 'ann', text: 'a person, please', clientMessageId: 'lh-1' });
    const next = await startTurn(db, { threadId: held.threadId, ownerId: 'ann', text: 'and then', clientMessageId: 'lh-2' });
    await takeOverRun(db, { runId: held.runId, by: 'olga' });
    await db.query('delete from agent_kit_jobs where run_id = $1', [next.runId]); // (a drain settled its blocked job)

    // The cancel of the next turn, its run locked first (as agent_kit_request_cancel does) and
    // the rest of it held back until the reply waits.
    const locked = gate();
    const go = gate();
    const cancel = settled(db.transaction(async (tx) => {
      await tx.query('select 1 from agent_kit_runs where id = $1 for update', [next.runId]);
      locked.open();
      await go.wait();
      return tx.query('select agent_kit_request_cancel($1) as status', [next.runId]);
    }));
    await locked.wait();
    const reply = settled(db.query(`select agent_kit_reply_to_run($1, 'olga', 'Done by hand.') as id`, [held.runId]));
    await waitsForALock('agent_kit_reply_to_run');
    go.open();

    const [replied, cancelled] = await Promise.all([reply, cancel]);
    // Before, the reply held the thread row and waited for the next run; the cancel held that
    // run and waited for the thread row: "deadlock detected" for one of them.
    expect('error' in replied ? replied.error : null).toBeNull();
    expect('error' in cancelled ? cancelled.error : null).toBeNull();
    const [jobs] = await db.query<{ n: number }>('select count(*)::int as n from agent_kit_jobs where run_id = $1', [next.runId]);
    expect(jobs!.n).toBe(1); // due now: its segment closes it cancelled
  });

  it("closes a run while the thread's next turn is cancelled: no deadlock", async () => {
    // As for the reply above, in the close every turn ends with (migration 0045).
    const first = await startTurn(db, { ownerId: 'ann', text: 'answer me', clientMessageId: 'lx-1' });
    const next = await startTurn(db, { threadId: first.threadId, ownerId: 'ann', text: 'then this', clientMessageId: 'lx-2' });
    const claim = await claimRun(db, { runId: first.runId, owner: 'w1', leaseTtlMs: 60_000 });
    if (!claim.claimed) throw new Error(`not claimed: ${claim.reason}`);
    await db.query('delete from agent_kit_jobs where run_id = $1', [next.runId]);
    const locked = gate();
    const go = gate();
    const cancel = settled(db.transaction(async (tx) => {
      await tx.query('select 1 from agent_kit_runs where id = $1 for update', [next.runId]);
      locked.open();
      await go.wait();
      return tx.query('select agent_kit_request_cancel($1) as status', [next.runId]);
    }));
    await locked.wait();
    const close = settled(db.query(`select agent_kit_close_run($1, 'completed', '{"text": "done"}'::jsonb, 'w1', $2) as id`,
      [first.runId, claim.lease.fence]));
    await waitsForALock('agent_kit_close_run');
    go.open();
    const [closed, cancelled] = await Promise.all([close, cancel]);
    expect('error' in closed ? closed.error : null).toBeNull();
    expect('error' in cancelled ? cancelled.error : null).toBeNull();
  });
});
