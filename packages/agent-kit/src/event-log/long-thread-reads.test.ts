// Opening a turn's stream on a long thread reads the run's boundary events by index (migration
// 0020), not the thread's whole log: the message's seq (chat POST), the run's first event and its
// latest park or close (AI SDK stream), its segments (run view). Both stores: every statement the
// readers send is explained with ANALYZE and may not scan or filter the thread's earlier events.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import { fakeRunSegment, testOwner } from '../../test/harness/fake-segment.js';
import { configFromEnv } from '../config.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { findMessageSeq, findRunFirstSeq, readRunBoundary, readRunSegments } from './read-events.js';

const earlierEvents = 5_000;
let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

/** Run `read` with every statement recorded, then return each one's EXPLAIN ANALYZE text. */
async function plansOf<T>(read: (db: Db) => Promise<T>): Promise<{ value: T; plans: string[] }> {
  const sent: [string, readonly unknown[] | undefined][] = [];
  const recording: Db = { ...db, kind: db.kind, query: (sql, params) => (sent.push([sql, params]), db.query(sql, params)) };
  const value = await read(recording);
  const plans: string[] = [];
  for (const [sql, params] of sent) {
    const rows = await db.query<Record<string, string>>(`explain analyze ${sql}`, params);
    plans.push(rows.map((row) => Object.values(row)[0]).join('\n'));
  }
  expect(plans.length).toBeGreaterThan(0);
  return { value, plans };
}

function expectNoScanOfTheLog(plans: string[]) {
  const text = plans.join('\n');
  expect(text).not.toMatch(/Seq Scan on agent_kit_thread_events/);
  const removed = [...text.matchAll(/Rows Removed by (?:Index Recheck|Filter): (\d+)/g)].map((m) => Number(m[1]));
  expect(Math.max(0, ...removed)).toBeLessThan(100);
}

describe('reads of one run on a long thread', () => {
  it('find the message, the first event, the boundary and the segments without reading the log', async () => {
    const rt = { db, model: 'test-model', tools: {}, config: configFromEnv({}) };
    const first = await startTurn(db, { ownerId: 'u-long', text: 'first' });
    await db.query(
      `select count(agent_kit__append_event($1, $2, 1, 'text-delta', jsonb_build_object('text', 't' || g)))
       from generate_series(1, $3::int) g`,
      [first.threadId, first.runId, earlierEvents],
    );
    await db.query(`update agent_kit_runs set status = 'completed' where id = $1`, [first.runId]);
    await db.query('delete from agent_kit_jobs');
    const turn = await startTurn(db, { threadId: first.threadId, ownerId: 'u-long', text: 'latest' });
    await fakeRunSegment({ deltas: ['a', 'b'] })(rt, { runId: turn.runId, owner: testOwner() });
    await db.exec('analyze agent_kit_thread_events');
    const messageSeq = 2 + earlierEvents + 1; // first's message and run-queued, the deltas, then ours

    const message = await plansOf((d) => findMessageSeq(d, turn.threadId, turn.messageId));
    expect(message.value).toBe(messageSeq);
    expectNoScanOfTheLog(message.plans);

    const firstSeq = await plansOf((d) => findRunFirstSeq(d, turn.runId));
    expect(firstSeq.value).toBe(messageSeq);
    expectNoScanOfTheLog(firstSeq.plans);

    const boundary = await plansOf((d) => readRunBoundary(d, turn.runId));
    expect(boundary.value).toEqual({ status: 'completed', lastBoundarySeq: messageSeq + 5 });
    expectNoScanOfTheLog(boundary.plans);

    const segments = await plansOf((d) => readRunSegments(d, turn.runId));
    expect(segments.value).toMatchObject([{ fence: 1, startedSeq: messageSeq + 2, endedAs: 'completed', endedSeq: messageSeq + 5 }]);
    expectNoScanOfTheLog(segments.plans);

    // Not a message of this thread, or not an id at all: none, without an error.
    expect(await findMessageSeq(db, turn.threadId, first.runId)).toBeNull();
    expect(await findMessageSeq(db, turn.threadId, 'not-a-uuid')).toBeNull();
  });
});
