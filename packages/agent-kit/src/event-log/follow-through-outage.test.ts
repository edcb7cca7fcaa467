// A follower waits out a database that does not answer (a dropped connection, a restart, a
// failover): its reads are tried again, a little later each time, and it goes on from its cursor
// with no gap and no repeat; a viewer's stream sent keep-alives meanwhile instead of an error
// while its turn went on (an outsider's trial: one pg_terminate_backend ended useChat streams).
// Another error is thrown at once, and a close ends the wait.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import { StorePermissionError, StoreUnavailableError } from '../errors.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { followEvents } from './follow-events.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

/** `inner`, whose next `failures` reads of the thread log fail with what `fail` makes. */
function failingLogReads(inner: Db, fail: () => Error) {
  let failures = 0;
  let failed = 0;
  const query: Db['query'] = async (sql, params) => {
    if (sql.includes('from agent_kit_thread_events') && failures > 0) {
      failures--;
      failed++;
      throw fail();
    }
    return inner.query(sql, params);
  };
  return { db: { ...inner, query } as Db, failNext: (n: number) => (failures = n), failed: () => failed };
}

describe('a follower and a database that does not answer', () => {
  it('reads again until it answers, and goes on from its cursor', async () => {
    const faulty = failingLogReads(db, () => new StoreUnavailableError('connection terminated unexpectedly'));
    const turn = await startTurn(db, { ownerId: 'u', text: 'first' });
    const follower = followEvents(faulty.db, { threadId: turn.threadId, pollIntervalMs: 50 });
    const first = await follower.next();
    expect(first.value?.type).toBe('message');
    const seen = [first.value!.seq];
    while (follower.nextBuffered()) seen.push(follower.cursor);
    faulty.failNext(3); // the next three reads: about 250 + 500 + 1,000 ms of waiting
    await startTurn(db, { ownerId: 'u', threadId: turn.threadId, text: 'second' });
    const started = Date.now();
    const next = await follower.next();
    expect(faulty.failed()).toBe(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500);
    expect(next.value).toMatchObject({ type: 'message', seq: seen.at(-1)! + 1 }); // no gap, no repeat
    follower.close();
  });

  it('throws another error at once, and ends the wait when closed', async () => {
    const broken = failingLogReads(db, () => new StorePermissionError('permission denied for table agent_kit_thread_events'));
    const turn = await startTurn(db, { ownerId: 'u', text: 'x' });
    broken.failNext(1);
    await expect(followEvents(broken.db, { threadId: turn.threadId }).next()).rejects.toThrow(StorePermissionError);

    const down = failingLogReads(db, () => new StoreUnavailableError('ECONNREFUSED'));
    down.failNext(1_000);
    const follower = followEvents(down.db, { threadId: turn.threadId });
    const waiting = follower.next();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const closedAt = Date.now();
    follower.close();
    await expect(waiting).resolves.toEqual({ value: undefined, done: true });
    expect(Date.now() - closedAt).toBeLessThan(500); // not the rest of a 2 s pause
  });

  it('gives up after outageWaitMs (the HTTP streams pass their own length), with the store error', async () => {
    const down = failingLogReads(db, () => new StoreUnavailableError('ECONNREFUSED'));
    const turn = await startTurn(db, { ownerId: 'u', text: 'y' });
    down.failNext(1_000);
    const startedAt = Date.now();
    await expect(followEvents(down.db, { threadId: turn.threadId, outageWaitMs: 700 }).next()).rejects.toThrow(StoreUnavailableError);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(700);
    expect(down.failed()).toBeGreaterThanOrEqual(3); // 250, 500, then past the 700 ms
  });
});
