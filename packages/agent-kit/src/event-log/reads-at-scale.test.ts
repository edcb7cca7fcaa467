// Reads that must not grow with the data around them, on both stores: every statement a reader
// sends is explained with ANALYZE and may not scan or filter what it does not return.
// - Opening a turn's stream on a long thread reads the run's boundary events by index (migration
//   0020), not the thread's log: the message's seq (chat POST), the run's first event and its
//   latest park or close (AI SDK stream), its segments (run view), and which run it regenerated.
// - A thread list (one user's, or an operator's) reads its page by index among many threads
//   (migration 0021), a page deep in it too, and a run's messages come through its thread's.
// - A run list by status reads that status's runs by index among many completed ones (0019,
//   0022, and the lease and active-run keys); a page deep in the list starts at its cursor.
// - A run list of effects in doubt reads those runs by index among many settled effects (0025).
// - A page of a long thread's turns (ADR-0049) reads its runs by turn number, their messages by
//   run and its first event by the run's boundary index.
// - A deleted run's superseded runs (the self key's delete action) are found by a partial index.
// - The store's status counts the runs in flight, the due jobs and the effects in doubt through
//   the partial indexes that hold only those.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import { fakeRunSegment, testOwner } from '../../test/harness/fake-segment.js';
import { configFromEnv } from '../config.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { findMessageSeq, findRunFirstSeq, readRunBoundary, readRunSegments } from './read-events.js';
import { listRuns } from './read-runs.js';
import { readStoreStatus } from './read-status.js';
import { listRunMessages, listThreads, readAnswerLinks } from './read-threads.js';
import { readTurnPage } from './turn-window.js';

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

/** The most rows any plan node produced over all its loops: what a read touched at worst. */
function mostRowsOfANode(plans: string[]): number {
  const nodes = [...plans.join('\n').matchAll(/actual time=\S+ rows=([\d.]+) loops=(\d+)/g)];
  return Math.max(0, ...nodes.map((m) => Number(m[1]) * Number(m[2])));
}

function expectNoScan(plans: string[], table = 'agent_kit_thread_events') {
  const text = plans.join('\n');
  expect(text).not.toMatch(new RegExp(`Seq Scan on ${table}`));
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
    expectNoScan(message.plans);

    const firstSeq = await plansOf((d) => findRunFirstSeq(d, turn.runId));
    expect(firstSeq.value).toBe(messageSeq);
    expectNoScan(firstSeq.plans);

    const boundary = await plansOf((d) => readRunBoundary(d, turn.runId));
    expect(boundary.value).toEqual({ status: 'completed', lastBoundarySeq: messageSeq + 5 });
    expectNoScan(boundary.plans);

    // Which run each of a read's runs regenerated or was restored over (ADR-0093, ADR-0096): the boundary index, not the 5,000 deltas.
    const regenerations = await plansOf((d) => readAnswerLinks(d, [first.runId, turn.runId]));
    expect(regenerations.value.size).toBe(0);
    expectNoScan(regenerations.plans);
    expect(mostRowsOfANode(regenerations.plans)).toBeLessThan(10);

    const segments = await plansOf((d) => readRunSegments(d, turn.runId));
    expect(segments.value).toMatchObject([{ fence: 1, startedSeq: messageSeq + 2, endedAs: 'completed', endedSeq: messageSeq + 5 }]);
    expectNoScan(segments.plans);

    // Not a message of this thread, or not an id at all: none, without an error.
    expect(await findMessageSeq(db, turn.threadId, first.runId)).toBeNull();
    expect(await findMessageSeq(db, turn.threadId, 'not-a-uuid')).toBeNull();
  });
});

describe('reads among many threads', () => {
  it('list one owner\'s threads, everyone\'s, and a run\'s messages without a scan', async () => {
    await db.query(
      `insert into agent_kit_threads (owner_id, title, created_at)
       select 'many-' || (g % 100), 'old', now() - g * interval '1 minute' from generate_series(1, 5000) g`,
    );
    await db.query(`insert into agent_kit_messages (thread_id, role, content) select id, 'user', '{"text":"x"}' from agent_kit_threads`);
    const turn = await startTurn(db, { ownerId: 'many-7', text: 'newest' });
    await db.exec('analyze agent_kit_threads');
    await db.exec('analyze agent_kit_messages');

    const mine = await plansOf((d) => listThreads(d, { ownerId: 'many-7', limit: 20 }));
    expect(mine.value).toHaveLength(20);
    expect(mine.value[0]!.id).toBe(turn.threadId);
    expect(mine.value.every((t) => t.ownerId === 'many-7')).toBe(true);
    expectNoScan(mine.plans, 'agent_kit_threads');

    const all = await plansOf((d) => listThreads(d, { ownerId: null, limit: 20 }));
    expect(all.value[0]!.id).toBe(turn.threadId);
    expect(all.value.map((t) => t.createdAt.getTime())).toEqual(
      all.value.map((t) => t.createdAt.getTime()).sort((a, b) => b - a));
    expectNoScan(all.plans, 'agent_kit_threads');

    const messages = await plansOf((d) => listRunMessages(d, turn.runId));
    expect(messages.value.map((m) => [m.role, m.text])).toEqual([['user', 'newest']]);
    expectNoScan(messages.plans, 'agent_kit_messages');

    // A page deep in each list, from its cursor (ADR-0044): many-7's 30th thread, everyone's 2,500th.
    const [mineCursor] = await db.query<{ id: string }>(`select id from agent_kit_threads where owner_id = 'many-7'
      order by created_at desc, id offset 30 limit 1`);
    const [allCursor] = await db.query<{ id: string }>(
      'select id from agent_kit_threads order by created_at desc, id offset 2500 limit 1');
    const minePage = await plansOf((d) => listThreads(d, { ownerId: 'many-7', before: mineCursor!.id, limit: 10 }));
    const allPage = await plansOf((d) => listThreads(d, { ownerId: null, before: allCursor!.id, limit: 10 }));
    expect(minePage.value).toHaveLength(10);
    expect(allPage.value).toHaveLength(10);
    for (const { plans } of [minePage, allPage]) {
      expectNoScan(plans, 'agent_kit_threads');
      expect(mostRowsOfANode(plans), plans.join('\n')).toBeLessThan(100);
    }
  });
});

describe('run lists by status', () => {
  beforeAll(async () => {
    await db.query(
      `with th as (insert into agent_kit_threads (owner_id) select 'by-status' from generate_series(1, 5000) returning id)
       insert into agent_kit_runs (thread_id, turn_no, status, created_at)
       select id, 1, 'completed', now() - random() * interval '30 days' - interval '1 day' from th`,
    );
    // The oldest runs failed or were aborted: a list that walks from the newest reads them last.
    await db.query(`update agent_kit_runs set status = 'failed' where id in (
      select id from agent_kit_runs where status = 'completed' order by created_at limit 3)`);
    await db.query(`update agent_kit_runs set status = 'aborted' where id in (
      select id from agent_kit_runs where status = 'completed' order by created_at limit 2)`);
    await db.exec('analyze agent_kit_runs');
  });

  it('list the runs of each status without walking the completed ones', async () => {
    for (const status of ['failed', 'aborted', 'running', 'queued', 'waiting_input']) {
      const { value, plans } = await plansOf((d) => listRuns(d, { ownerId: null, status, limit: 20 }));
      expect(value.every((run) => run.status === status)).toBe(true);
      if (status === 'failed') expect(value.length).toBeGreaterThanOrEqual(3);
      expectNoScan(plans, 'agent_kit_runs');
    }
  });

  it('find the runs a deleted run superseded by index, as the key\'s delete action does (0035)', async () => {
    // The statement Postgres's foreign key runs for each run a thread's delete removes.
    const { plans } = await plansOf((d) => d.query(
      'update only agent_kit_runs set superseded_by = null where $1 = superseded_by', [crypto.randomUUID()]));
    expect(plans.join('\n')).toMatch(/agent_kit_runs__superseded_by_idx/);
    expectNoScan(plans, 'agent_kit_runs');
  });

  it('read a page deep in the list from its cursor, not from the newest run', async () => {
    const [cursor] = await db.query<{ id: string }>(
      `select id from agent_kit_runs where status = 'completed' order by created_at desc, id offset 2500 limit 1`);
    const everyone = await plansOf((d) => listRuns(d, { ownerId: null, before: cursor!.id, limit: 20 }));
    expect(everyone.value).toHaveLength(20);
    const failed = await plansOf((d) => listRuns(d, { ownerId: null, status: 'failed', before: cursor!.id, limit: 20 }));
    expect(failed.value.length).toBeGreaterThanOrEqual(3);
    for (const { plans } of [everyone, failed]) {
      expectNoScan(plans, 'agent_kit_runs');
      expect(mostRowsOfANode(plans), plans.join('\n')).toBeLessThan(100);
    }
  });
});

describe('run lists of effects in doubt', () => {
  it('list the runs with an effect in doubt without reading the settled effects', async () => {
    await db.query(
      `with th as (insert into agent_kit_threads (owner_id) select 'doubt-' || (g % 10) from generate_series(1, 3000) g returning id)
       insert into agent_kit_runs (thread_id, turn_no, status, created_at)
       select id, 1, 'completed', now() - random() * interval '30 days' - interval '1 day' from th`,
    );
    const doubtRuns = `select r.id from agent_kit_runs r join agent_kit_threads t on t.id = r.thread_id
      where t.owner_id like 'doubt-%'`;
    await db.query(
      `insert into agent_kit_effects (run_id, key, status, fence, tool)
       select r.id, r.id || ':' || k || ':0', case when k = 2 then 'failed' else 'completed' end, 1, 'charge_card'
       from (${doubtRuns}) r, generate_series(1, 2) k`,
    );
    // The oldest three runs' first charge is in doubt (a list walking from the newest reads them
    // last); one of those runs was aborted.
    const inDoubt = await db.query<{ id: string }>(
      `update agent_kit_effects set status = 'in_doubt' where key like '%:1:0' and run_id in (
         select r.id from agent_kit_runs r where r.id in (${doubtRuns}) order by r.created_at limit 3)
       returning run_id as id`,
    );
    const [aborted] = await db.query<{ id: string }>(
      `update agent_kit_runs set status = 'aborted' where id = $1 returning id`, [inDoubt[0]!.id]);
    await db.exec('analyze agent_kit_runs');
    await db.exec('analyze agent_kit_effects');

    const all = await plansOf((d) => listRuns(d, { ownerId: null, inDoubt: true, limit: 20 }));
    expect(new Set(all.value.map((run) => run.id))).toEqual(new Set(inDoubt.map((row) => row.id)));
    expect(all.value.every((run) => run.inDoubt === 1 && run.effects === 2)).toBe(true);
    const byStatus = await plansOf((d) => listRuns(d, { ownerId: null, status: 'aborted', inDoubt: true, limit: 20 }));
    expect(byStatus.value.map((run) => run.id)).toEqual([aborted!.id]);
    for (const { plans } of [all, byStatus]) {
      expectNoScan(plans, 'agent_kit_effects');
      expectNoScan(plans, 'agent_kit_runs');
      expect(mostRowsOfANode(plans), plans.join('\n')).toBeLessThan(100);
    }
  });
});

describe('a page of turns of a long thread', () => {
  it('reads the page\'s runs, messages and first seq without reading the other turns', async () => {
    const turns = 2_000;
    const first = await startTurn(db, { ownerId: 'u-turns', text: 'turn 1' });
    await db.query(`update agent_kit_runs set status = 'completed' where id = $1`, [first.runId]);
    await db.query('delete from agent_kit_jobs');
    // Turns 2..N as start_turn leaves them, closed: a run, its user message and answer, and the
    // message event its turn's replay starts at (the bulk of a real log is left out).
    await db.query(
      `with runs as (
         insert into agent_kit_runs (thread_id, turn_no, status)
         select $1, g, 'completed' from generate_series(2, $2::int) g returning id, turn_no
       ), messages as (
         insert into agent_kit_messages (thread_id, run_id, role, content)
         select $1, r.id, role, jsonb_build_object('text', role || ' ' || r.turn_no)
         from runs r cross join (values ('user'), ('assistant')) roles(role) returning run_id
       )
       select count(agent_kit__append_event($1, r.id, 0, 'message', jsonb_build_object('runId', r.id)))
       from (select id, turn_no from runs order by turn_no) r`,
      [first.threadId, turns],
    );
    for (const table of ['agent_kit_runs', 'agent_kit_messages', 'agent_kit_thread_events']) await db.exec(`analyze ${table}`);

    const latest = await plansOf((d) => readTurnPage(d, first.threadId, { turns: 20 }));
    expect(latest.value.runs.map((run) => run.turnNo)).toEqual(Array.from({ length: 20 }, (_, i) => turns - 19 + i));
    expect(latest.value.messages).toHaveLength(40);
    expect(latest.value.window).toMatchObject({ firstTurn: turns - 19, earlier: true, fromSeq: 2 + turns - 20 });
    const deep = await plansOf((d) => readTurnPage(d, first.threadId, { turns: 20, beforeTurn: 1_000 }));
    expect(deep.value.runs.map((run) => run.turnNo)).toEqual(Array.from({ length: 20 }, (_, i) => 980 + i));
    expect(deep.value.window).toMatchObject({ fromSeq: 2 + 979, throughSeq: 2 + 999 - 1 });
    for (const { plans } of [latest, deep]) {
      for (const table of ['agent_kit_runs', 'agent_kit_messages', 'agent_kit_thread_events']) expectNoScan(plans, table);
      expect(mostRowsOfANode(plans)).toBeLessThan(100);
    }
  });
});

describe('the store status', () => {
  it('counts the work in flight by index, not the closed runs or the settled effects', async () => {
    const { value, plans } = await plansOf((d) => readStoreStatus(d));
    expect(value.inDoubt).toEqual({ effects: 3, runs: 3 }); // the in-doubt list's, above
    expect(value.runs.queued).toBeGreaterThan(0);
    for (const table of ['agent_kit_runs', 'agent_kit_effects', 'agent_kit_jobs']) expectNoScan(plans, table);
    expect(mostRowsOfANode(plans), plans.join('\n')).toBeLessThan(100);
  });
});
