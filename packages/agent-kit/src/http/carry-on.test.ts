// A reader of a thread carries its parked turn on (ADR-0120), on both stores with the real turn
// engine: the events request runs the thread's next turn when it finds it due when it connects,
// when its stream passes the park of a slice another server ran, and when a turn that was not due
// yet comes due while it reads. It runs nothing that is not due within its invocation, nothing
// behind an earlier open run, and nothing where the app turned it off.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headerAuth, makeRequest, payload, readSse } from '../../test/harness/http-harness.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import type { AgentKitConfig } from '../config.js';
import { findNextTurnToRun } from '../event-log/read-threads.js';
import { claimRun } from '../lease/lease.js';
import { scriptedReplyText } from '../model/index.js';
import type { Db } from '../store/db.js';
import type { HandlerDeps } from './context.js';
import { takeHandOff } from './carry-on.js';
import { createHandlers } from './handlers.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(() => db.close());

/** Handlers with the scripted model, and the turns their readers carried on (and on what). */
function server(options: { tokens?: number; config?: Partial<AgentKitConfig>; deps?: Partial<HandlerDeps> } = {}) {
  const carried: { runId: string; on: string }[] = [];
  const rt = makeRuntime(db, { tokens: options.tokens ?? 6, delayMs: 30, config: options.config });
  rt.log = (entry) => {
    if (entry.msg === 'http reader carries turn on') carried.push({ runId: String(entry.runId), on: String(entry.on) });
  };
  return { handlers: createHandlers({ rt, authenticate: headerAuth, ...options.deps }), carried };
}

async function queuedTurn(text: string, options: { threadId?: string; jobDelay?: string } = {}) {
  const [turn] = await db.query<{ thread_id: string; run_id: string }>(
    `select thread_id, run_id from agent_kit_start_turn($1, 'alice', $2, null, $3::interval)`,
    [options.threadId ?? null, text, options.jobDelay ?? '0 seconds']);
  return { threadId: turn!.thread_id, runId: turn!.run_id };
}

const statusOf = async (runId: string) =>
  (await db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [runId]))[0]!.status;

const follow = (handlers: { handle: (r: Request) => Promise<Response> }, threadId: string, after?: number) =>
  handlers.handle(makeRequest('GET', `/api/threads/${threadId}/events${after === undefined ? '' : `?after=${after}`}`, { user: 'alice' }));

/** Read a raw events stream until `runId` closes; the run-closed event's data. */
async function readToClose(response: Response, runId: string) {
  const read = await readSse(response, { until: (e) => payload(e).type === 'run-closed' && payload(e).runId === runId });
  const closed = payload(read.events.at(-1)!);
  expect(closed.type).toBe('run-closed');
  return { closed: closed.data, events: read.events.map(payload) };
}

describe('a reader carries its thread\'s turn on (ADR-0120)', () => {
  it('runs a turn it finds due when it connects', async () => {
    const { handlers, carried } = server();
    const { threadId, runId } = await queuedTurn('carry me');
    const { closed } = await readToClose(await follow(handlers, threadId), runId);
    expect(closed.status).toBe('completed');
    expect(await statusOf(runId)).toBe('completed');
    expect(carried).toEqual([{ runId, on: 'connect' }]);
    await handlers.segments.settle();
  });

  it("runs the next slice as its stream passes the park of another server's slice", async () => {
    // The first server's invocations last 4 s: the 4.5 s reply is cut at about 3 s and parked.
    const first = server({ tokens: 150, config: { invocationBudgetMs: 4_000, leaseTtlMs: 4_000 } });
    const reader = server({ tokens: 150 });
    const chat = await first.handlers.handle(makeRequest('POST', '/api/chat', { user: 'alice', body: { message: 'a long answer' } }));
    const runId = chat.headers.get('x-agent-kit-run-id')!;
    const threadId = chat.headers.get('x-agent-kit-thread-id')!;
    await chat.body!.cancel();
    for (let i = 0; i < 500 && (await statusOf(runId)) !== 'running'; i++) await new Promise((r) => setTimeout(r, 10));
    expect(await statusOf(runId)).toBe('running');
    const { closed, events } = await readToClose(await follow(reader.handlers, threadId), runId);
    expect(closed.status).toBe('completed');
    const parks = events.filter((e) => e.type === 'run-parked');
    expect(parks.map((e) => e.data.status)).toEqual(['queued']); // one slice's end, then the rest here
    expect(reader.carried).toEqual([{ runId, on: 'event' }]);
    expect(first.carried).toEqual([]);
    const [message] = await db.query<{ text: string }>(
      `select content->>'text' as text from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId]);
    expect(message!.text).toBe(scriptedReplyText(['a long answer'], 150));
    await first.handlers.segments.settle();
    await reader.handlers.segments.settle();
  });

  it('runs a turn that comes due while it reads (a retry waiting out its delay), when it comes due', async () => {
    const { handlers, carried } = server();
    const { threadId, runId } = await queuedTurn('later', { jobDelay: '800 milliseconds' });
    const response = await follow(handlers, threadId);
    await new Promise((r) => setTimeout(r, 200));
    expect(await statusOf(runId)).toBe('queued'); // not before its time
    const { closed } = await readToClose(response, runId);
    expect(closed.status).toBe('completed');
    expect(carried).toEqual([{ runId, on: 'due' }]);
    await handlers.segments.settle();
  });

  it('takes over a run whose process died, once its lease runs out', async () => {
    const { handlers, carried } = server();
    const { threadId, runId } = await queuedTurn('orphaned');
    await claimRun(db, { runId, owner: 'a-process-since-killed', leaseTtlMs: 1_500 });
    const { closed, events } = await readToClose(await follow(handlers, threadId), runId);
    expect(closed.status).toBe('completed');
    expect(carried).toEqual([{ runId, on: 'due' }]);
    expect(events.filter((e) => e.type === 'segment-started').map((e) => e.fence)).toEqual([2]); // the next fence
    await handlers.segments.settle();
  });

  it('ends its stream at a park it has too little of its invocation left to carry on, so the reader comes back to one that has', async () => {
    // Invocations of 4 s (a take margin of 1 s), streams allowed 20 s: the park comes 0.8 s before
    // the invocation ends, and the stream ends at it, with the quick reconnect's hint.
    const { handlers, carried } = server({ config: { invocationBudgetMs: 4_000, leaseTtlMs: 4_000 }, deps: { maxStreamMs: 20_000 } });
    const { threadId, runId } = await queuedTurn('parked late');
    const claimed = await claimRun(db, { runId, owner: 'elsewhere', leaseTtlMs: 60_000 });
    const startedAt = Date.now();
    const reading = readSse(await follow(handlers, threadId));
    await new Promise((r) => setTimeout(r, 3_200 - (Date.now() - startedAt)));
    const fence = claimed.claimed ? claimed.lease.fence : NaN;
    await db.query(`select agent_kit_park_run($1, 'elsewhere', $2, 'queued', null, 'slice')`, [runId, fence]);
    const read = await reading;
    expect(read.ended).toBe(true);
    expect(Date.now() - startedAt).toBeLessThan(15_000); // not at the stream's 20 s
    expect(payload(read.events.at(-1)!)).toMatchObject({ type: 'run-parked', data: { status: 'queued' } });
    expect(read.retries.at(-1)).toBe(100);
    expect(carried).toEqual([]);
    expect(await statusOf(runId)).toBe('queued');
  });

  it('reads on past a park too late to run here when another process has taken the run on', async () => {
    // As above, but a claim takes the run on in the park's own transaction (a worker, or a reader
    // with time, faster than this one): nothing is left to hand off, and the stream reads the run
    // to its end.
    const { handlers, carried } = server({ config: { invocationBudgetMs: 4_000, leaseTtlMs: 4_000 }, deps: { maxStreamMs: 20_000 } });
    const { threadId, runId } = await queuedTurn('taken on elsewhere');
    const first = await claimRun(db, { runId, owner: 'elsewhere', leaseTtlMs: 60_000 });
    const startedAt = Date.now();
    const reading = readToClose(await follow(handlers, threadId), runId);
    await new Promise((r) => setTimeout(r, 3_200 - (Date.now() - startedAt)));
    const [second] = await db.transaction(async (tx) => {
      await tx.query(`select agent_kit_park_run($1, 'elsewhere', $2, 'queued', null, 'slice')`, [runId, first.claimed ? first.lease.fence : NaN]);
      return tx.query<{ fence: string }>(`select fence from agent_kit_claim_run($1, 'other-reader', interval '1 minute')`, [runId]);
    });
    expect(second).toBeDefined();
    await new Promise((r) => setTimeout(r, 500)); // the reader sees the park and asks for the hand-off
    await db.query(`select agent_kit_close_run($1, 'completed', '{"text": "done elsewhere"}'::jsonb, 'other-reader', $2)`,
      [runId, Number(second!.fence)]);
    const { closed, events } = await reading;
    expect(closed.status).toBe('completed');
    expect(events.filter((e) => e.type === 'run-parked')).toHaveLength(1);
    expect(carried).toEqual([]);
    expect(await takeHandOff(db, runId, Number(second!.fence) - 1)).toBe(false); // closed: nothing to hand off
  });

  it('hands a park too late for all its readers off through one of them; the others read on (ADR-0122)', async () => {
    // Two readers in step, both with too little of their invocations left at the park: before,
    // both streams ended and both readers came back together, in step again at the next park.
    const { handlers, carried } = server({ config: { invocationBudgetMs: 4_000, leaseTtlMs: 4_000 }, deps: { maxStreamMs: 20_000 } });
    const { threadId, runId } = await queuedTurn('two readers in step');
    const claimed = await claimRun(db, { runId, owner: 'elsewhere', leaseTtlMs: 60_000 });
    const fence = claimed.claimed ? claimed.lease.fence : NaN;
    const startedAt = Date.now();
    const until = (e: Parameters<typeof payload>[0]) => payload(e).type === 'run-closed';
    const readers = [readSse(await follow(handlers, threadId), { until }), readSse(await follow(handlers, threadId), { until })];
    await new Promise((r) => setTimeout(r, 3_200 - (Date.now() - startedAt)));
    await db.query(`select agent_kit_park_run($1, 'elsewhere', $2, 'queued', null, 'slice')`, [runId, fence]);
    const ended = await Promise.race(readers.map((reading, i) => reading.then(() => i)));
    expect(payload((await readers[ended]!).events.at(-1)!)).toMatchObject({ type: 'run-parked', data: { status: 'queued' } });
    expect((await readers[ended]!).retries.at(-1)).toBe(100);
    // The one that ended comes back (a new request, with a whole invocation) and runs the slice;
    // the other has read on, and reads the run to its end.
    const back = await readToClose(await follow(handlers, threadId), runId);
    expect(back.closed.status).toBe('completed');
    const other = await readers[1 - ended]!;
    expect(other.events.map(payload).filter((e) => e.type === 'run-parked')).toHaveLength(1);
    expect(payload(other.events.at(-1)!)).toMatchObject({ type: 'run-closed', data: { status: 'completed' } });
    expect(carried).toEqual([{ runId, on: 'connect' }]);
    expect(await takeHandOff(db, runId, fence)).toBe(false); // each park once
  });

  describe('leaves the turn to a drain', () => {
    /** Follow the thread for a stream of 400 ms; the turns carried on meanwhile. */
    async function followBriefly(threadId: string, deps: Partial<HandlerDeps> = {}) {
      const { handlers, carried } = server({ deps: { maxStreamMs: 400, ...deps } });
      const read = await readSse(await follow(handlers, threadId));
      expect(read.ended).toBe(true);
      await handlers.segments.settle();
      return carried;
    }

    it('where the app turned it off', async () => {
      const { threadId, runId } = await queuedTurn('not here');
      expect(await followBriefly(threadId, { followersCarryOn: false })).toEqual([]);
      expect(await statusOf(runId)).toBe('queued');
    });

    it('when it comes due after the invocation ends', async () => {
      const { threadId, runId } = await queuedTurn('much later', { jobDelay: '1 hour' });
      expect(await followBriefly(threadId)).toEqual([]);
      expect(await statusOf(runId)).toBe('queued');
    });

    it('behind an earlier run of the thread still open elsewhere', async () => {
      const first = await queuedTurn('first');
      const second = await queuedTurn('second', { threadId: first.threadId });
      await claimRun(db, { runId: first.runId, owner: 'elsewhere', leaseTtlMs: 60_000 });
      // (The first: its lease runs out long after the reader's stream.)
      expect(await findNextTurnToRun(db, first.threadId)).toMatchObject({ runId: first.runId, status: 'running' });
      expect(await followBriefly(first.threadId)).toEqual([]);
      expect(await statusOf(first.runId)).toBe('running');
      expect(await statusOf(second.runId)).toBe('queued');
    });
  });

  it('finds the first open run only when it is queued, with how long until it is due', async () => {
    const { threadId, runId } = await queuedTurn('soon', { jobDelay: '30 seconds' });
    const next = await findNextTurnToRun(db, threadId);
    expect(next?.runId).toBe(runId);
    expect(next!.dueInMs).toBeGreaterThan(25_000);
    expect(next!.dueInMs).toBeLessThanOrEqual(30_000);
    await queuedTurn('behind it', { threadId });
    expect((await findNextTurnToRun(db, threadId))?.runId).toBe(runId);
  });

  it('refuses a followersCarryOn that is not a boolean', () => {
    const rt = makeRuntime(db);
    expect(() => createHandlers({ rt, authenticate: headerAuth, followersCarryOn: 'yes' as unknown as boolean }))
      .toThrow(/followersCarryOn must be true or false/);
  });
});
