// A page of the event log reads the same as rows (Postgres' form) and as one JSON value (PGlite's
// form, ADR-0025), on both stores: every field, awkward data and timestamps included.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { readEventPage, readEvents } from './read-events.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

// Events the log can hold: no run (fence 0), deep and odd JSON, an empty object, a timestamp with
// microseconds (both forms must truncate it to the same millisecond), a far one and an old one.
const oddEvents: Array<{ runId: boolean; fence: number; type: string; data: unknown; at: string }> = [
  { runId: false, fence: 0, type: 'message', data: { text: 'quote " backslash \\ newline \n tab \t' }, at: '2026-11-30 22:17:54.123999+00' },
  { runId: true, fence: 7, type: 'text-delta', data: { text: 'ünïcödé ✓ 😀 \u2028' }, at: '2026-11-30 22:17:54.999999+00' },
  { runId: true, fence: 2 ** 40, type: 'tool-call', data: { n: [1, -2.5, 1e21, 0.1, null, true], o: { a: { b: [] } } }, at: '1999-12-31 23:59:59.000001+00' },
  { runId: true, fence: 3, type: 'run-closed', data: {}, at: '2300-01-01 00:00:00+05:30' },
  { runId: false, fence: 0, type: 'x'.repeat(200), data: { big: 'y'.repeat(100_000) }, at: '2026-01-01 00:00:00.5+00' },
];

describe('readEventPage', () => {
  it('gives the same events as rows and as one JSON value, from every cursor and page size', async () => {
    const turn = await startTurn(db, { ownerId: 'u-page', text: 'both forms' });
    for (const e of oddEvents) {
      await db.query(
        `with s as (update agent_kit_threads set last_seq = last_seq + 1 where id = $1 returning last_seq)
         insert into agent_kit_thread_events (thread_id, seq, run_id, fence, type, data, created_at)
         select $1, s.last_seq, $2, $3, $4, $5::jsonb, $6::timestamptz from s`,
        [turn.threadId, e.runId ? turn.runId : null, e.fence, e.type, JSON.stringify(e.data), e.at],
      );
    }
    const total = 2 + oddEvents.length; // startTurn's message and run-queued come first
    const all = await readEventPage(db, 'rows', turn.threadId, 0, 1000);
    expect(all.map((e) => e.seq)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    expect(all.slice(2).map((e) => e.data)).toEqual(oddEvents.map((e) => e.data));
    expect(all.slice(2).map((e) => e.createdAt.toISOString())).toEqual([
      '2026-11-30T22:17:54.123Z', '2026-11-30T22:17:54.999Z', '1999-12-31T23:59:59.000Z',
      '2299-12-31T18:30:00.000Z', '2026-01-01T00:00:00.500Z',
    ]);
    for (let after = 0; after <= total; after++) {
      for (const limit of [1, 3, 1000]) {
        const rows = await readEventPage(db, 'rows', turn.threadId, after, limit);
        const json = await readEventPage(db, 'json', turn.threadId, after, limit);
        expect(json).toEqual(rows);
        expect(rows).toEqual(all.slice(after, after + limit));
      }
    }
  });

  it('readEvents reads PGlite in the JSON form and Postgres in rows', async () => {
    const turn = await startTurn(db, { ownerId: 'u-page', text: 'which form' });
    const statements: string[] = [];
    const watched: Db = { ...db, kind: db.kind, query: (sql, params) => (statements.push(sql), db.query(sql, params)) };
    const events = await readEvents(watched, { threadId: turn.threadId });
    expect(events.map((e) => e.type)).toEqual(['message', 'run-queued']);
    expect(statements).toHaveLength(1);
    expect(statements[0]!.includes('json_agg')).toBe(db.kind === 'pglite');
    expect(await readEventPage(db, 'json', '00000000-0000-0000-0000-000000000000', 0, 10)).toEqual([]);
  });
});
