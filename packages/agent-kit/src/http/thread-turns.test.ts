// GET /api/threads/:id?turns=N: a thread read a page of turns at a time (ADR-0049), on both
// stores. Each page names the span of the event log that replays its turns: every event of its
// turns lies at or after `fromSeq`, and an earlier page ends right before the later one begins.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRequest, openHttpTest, readSse, type HttpTest } from '../../test/harness/http-harness.js';
import { fakeRunSegment, testOwner } from '../../test/harness/fake-segment.js';
import { readEvents } from '../event-log/read-events.js';
import { startTurn } from '../queue/start-turn.js';

let t: HttpTest;
let threadId: string;
const runIds: string[] = []; // by turn: runIds[0] is turn 1

interface Page {
  window: { firstTurn: number | null; lastTurn: number | null; fromSeq: number; throughSeq: number | null; earlier: boolean };
  runs: { id: string; turnNo: number; status: string }[];
  messages: { runId: string; role: string; text: string }[];
}

async function page(query: string, user = 'tess'): Promise<Page> {
  const response = await t.handlers.handle(makeRequest('GET', `/api/threads/${threadId}?${query}`, { user }));
  expect(response.status, query).toBe(200);
  return (await response.json()) as Page;
}

/** The seq of every event of the thread, by run id. */
async function seqsByRun(): Promise<Map<string, number[]>> {
  const byRun = new Map<string, number[]>();
  for (const event of await readEvents(t.db, { threadId, afterSeq: 0, limit: 1_000 })) {
    if (!event.runId) continue;
    byRun.set(event.runId, [...(byRun.get(event.runId) ?? []), event.seq]);
  }
  return byRun;
}

beforeAll(async () => {
  t = await openHttpTest();
  for (let turn = 1; turn <= 6; turn++) {
    const response = await t.handlers.handle(makeRequest('POST', '/api/chat', {
      user: 'tess', body: { message: `question ${turn}`, ...(threadId ? { threadId } : {}) },
    }));
    expect(response.status).toBe(200);
    await readSse(response);
    await t.handlers.segments.settle();
    threadId = response.headers.get('x-agent-kit-thread-id')!;
    runIds.push(response.headers.get('x-agent-kit-run-id')!);
  }
});
afterAll(async () => {
  await t.close();
});

describe('a thread read by pages of turns', () => {
  it('the latest page: its runs, their messages, and the seq its first turn starts at', async () => {
    const latest = await page('turns=2');
    expect(latest.runs.map((run) => run.turnNo)).toEqual([5, 6]);
    expect(latest.runs.map((run) => run.id)).toEqual(runIds.slice(4));
    expect(latest.messages.map((m) => [m.role, m.text])).toEqual([
      ['user', 'question 5'], ['assistant', 'Hello, world.'], ['user', 'question 6'], ['assistant', 'Hello, world.'],
    ]);
    const seqs = await seqsByRun();
    expect(latest.window).toEqual({
      firstTurn: 5, lastTurn: 6, fromSeq: seqs.get(runIds[4]!)![0], throughSeq: null, earlier: true,
    });
  });

  it('pages back through every turn, each ending right before the next begins', async () => {
    const seqs = await seqsByRun();
    const pages: Page[] = [await page('turns=2')];
    while (pages.at(-1)!.window.earlier) pages.push(await page(`turns=2&beforeTurn=${pages.at(-1)!.window.firstTurn}`));
    expect(pages.map((p) => p.runs.map((run) => run.turnNo))).toEqual([[5, 6], [3, 4], [1, 2]]);
    expect(pages.at(-1)!.window.fromSeq).toBe(1); // the first page starts at the log's start
    for (let index = 1; index < pages.length; index++) {
      expect(pages[index]!.window.throughSeq).toBe(pages[index - 1]!.window.fromSeq - 1);
    }
    // Every event of a page's turns is at or after its fromSeq, so a replay from there shows them whole.
    for (const { window, runs } of pages) {
      for (const run of runs) expect(Math.min(...seqs.get(run.id)!)).toBeGreaterThanOrEqual(window.fromSeq);
    }
  });

  it('a page larger than the thread is all of it, and a page before turn 1 is empty', async () => {
    const all = await page('turns=50');
    expect(all.runs).toHaveLength(6);
    expect(all.window).toMatchObject({ firstTurn: 1, lastTurn: 6, fromSeq: 1, earlier: false });
    const none = await page('turns=5&beforeTurn=1');
    expect(none).toMatchObject({ runs: [], messages: [] });
    expect(none.window).toEqual({ firstTurn: null, lastTurn: null, fromSeq: 1, throughSeq: 0, earlier: false });
    // Without ?turns the route answers as it always did: every message and run.
    const whole = await (await t.handlers.handle(makeRequest('GET', `/api/threads/${threadId}`, { user: 'tess' }))).json();
    expect(whole.runs).toHaveLength(6);
    expect(whole.window).toBeUndefined();
  });

  it('names a run\'s first seq in its detail, where a replay of the run starts', async () => {
    const seqs = await seqsByRun();
    for (const runId of [runIds[0]!, runIds[4]!]) {
      const detail = await (await t.handlers.handle(makeRequest('GET', `/api/runs/${runId}`, { user: 'tess' }))).json();
      expect(detail.firstSeq).toBe(seqs.get(runId)![0]);
    }
  });

  it('is not found for another user, as the rest of the thread is', async () => {
    const response = await t.handlers.handle(makeRequest('GET', `/api/threads/${threadId}?turns=2`, { user: 'mallory' }));
    expect(response.status).toBe(404);
  });
});

describe('the latest page with turns still open', () => {
  it('reaches back to the oldest open turn, however many turns it was asked for', async () => {
    const first = await startTurn(t.db, { ownerId: 'ophelia', text: 'done' });
    await fakeRunSegment()(t.rt, { runId: first.runId, owner: testOwner() });
    const queued = [];
    for (const text of ['open 1', 'open 2', 'open 3']) queued.push(await startTurn(t.db, { threadId: first.threadId, ownerId: 'ophelia', text }));
    threadId = first.threadId;

    const latest = await page('turns=1', 'ophelia');
    expect(latest.runs.map((run) => [run.turnNo, run.status])).toEqual([[2, 'queued'], [3, 'queued'], [4, 'queued']]);
    const seqs = await seqsByRun();
    expect(latest.window).toEqual({
      firstTurn: 2, lastTurn: 4, fromSeq: seqs.get(queued[0]!.runId)![0], throughSeq: null, earlier: true,
    });
    // A page before an open turn is read as asked: the open turn is in the later page already.
    const before = await page('turns=1&beforeTurn=2', 'ophelia');
    expect(before.runs.map((run) => run.turnNo)).toEqual([1]);
    expect(before.window).toMatchObject({ fromSeq: 1, throughSeq: latest.window.fromSeq - 1, earlier: false });
  });
});
