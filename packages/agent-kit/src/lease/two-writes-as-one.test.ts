// Hand-offs made of two guarded writes (an event, then the run row) are kept whole, on both stores:
// when the connection dies between the two, neither is kept, so the next try writes the event
// once. Before, a salvage or a question whose second write failed left its event behind and the
// retry appended it again (two run-salvaged or input-requested events for one hand-off).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db, Queryable } from '../store/db.js';
import { claimRun, mirrorPartial, requestInput, type Lease } from './lease.js';
import { salvageRun } from './salvage.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

/** `inner`, except that the first statement containing `text` fails as a dropped connection would. */
function dyingAt(inner: Db, text: string): Db {
  let died = false;
  const guard = (q: Queryable): Queryable['query'] => (sql, params) => {
    if (!died && sql.includes(text)) {
      died = true;
      return Promise.reject(new Error('Connection terminated unexpectedly'));
    }
    return q.query(sql, params);
  };
  return {
    ...inner,
    query: guard(inner),
    transaction: (fn) => inner.transaction((tx) => fn({ ...tx, query: guard(tx) })),
  };
}

async function claimed(text: string): Promise<Lease & { threadId: string }> {
  const { runId } = await startTurn(db, { ownerId: 'u', text });
  const result = await claimRun(db, { runId, owner: 'w1', leaseTtlMs: 30_000, budgetMs: 60_000 });
  if (!result.claimed) throw new Error(`expected a claim, got ${result.reason}`);
  return result.lease;
}

async function eventsOf(lease: Lease, type: string): Promise<number> {
  const rows = await db.query<{ n: number }>(
    'select count(*)::int as n from agent_kit_thread_events where run_id = $1 and type = $2', [lease.runId, type]);
  return rows[0]!.n;
}

async function statusOf(lease: Lease): Promise<string> {
  const rows = await db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [lease.runId]);
  return rows[0]!.status;
}

describe('two writes as one', () => {
  it('a salvage whose close fails keeps no run-salvaged event, and the retry writes it once', async () => {
    const lease = await claimed('salvage me');
    expect((await mirrorPartial(db, lease, 'half an answer')).ok).toBe(true);
    await expect(salvageRun(dyingAt(db, 'agent_kit_close_run'), lease, 'half an answer', 'budget spent'))
      .rejects.toThrow(/Connection terminated/);
    expect(await eventsOf(lease, 'run-salvaged')).toBe(0);
    expect(await statusOf(lease)).toBe('running');

    expect(await salvageRun(db, lease, 'half an answer', 'budget spent')).toEqual(expect.any(String));
    expect(await eventsOf(lease, 'run-salvaged')).toBe(1);
    expect(await statusOf(lease)).toBe('aborted');
  });

  it('a question whose park fails keeps no input-requested event, and the retry asks once', async () => {
    const lease = await claimed('ask me');
    const waitingFor = { kind: 'question', questionId: 'q1', question: 'Which plan?' };
    await expect(requestInput(dyingAt(db, 'agent_kit_park_run'), lease, waitingFor))
      .rejects.toThrow(/Connection terminated/);
    expect(await eventsOf(lease, 'input-requested')).toBe(0);
    expect(await statusOf(lease)).toBe('running');

    expect(await requestInput(db, lease, waitingFor)).toBe(true);
    expect(await eventsOf(lease, 'input-requested')).toBe(1);
    expect(await statusOf(lease)).toBe('waiting_input');
  });

  it('a stale lease writes neither', async () => {
    const lease = await claimed('stale');
    const stale = { ...lease, fence: lease.fence + 1 };
    expect(await salvageRun(db, stale, '', 'budget spent')).toBeNull();
    expect(await requestInput(db, stale, { kind: 'question', questionId: 'q2' })).toBe(false);
    expect(await eventsOf(lease, 'run-salvaged') + await eventsOf(lease, 'input-requested')).toBe(0);
    expect(await statusOf(lease)).toBe('running');
  });
});
