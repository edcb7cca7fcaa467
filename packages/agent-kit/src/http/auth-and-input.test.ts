// Authorisation and input validation of every route, through `handle(new Request(...))` on both
// stores: strangers get 404 (never a hint that a thread exists), operators can read and take
// over, cron routes need the bearer secret, bad bodies are refused with the right status before
// anything is written, and a replayed answer is a 409.
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  countRows, cronSecret, headerAuth, makeRequest, openHttpTest, readSse, type HttpTest,
} from '../../test/harness/http-harness.js';
import { fakeRunSegment } from '../../test/harness/fake-segment.js';
import { StoreUnavailableError } from '../errors.js';
import { createHandlers } from './handlers.js';

let t: HttpTest;
let alice: { threadId: string; runId: string };
let waiting: { threadId: string; runId: string };

async function send(method: string, path: string, options: Parameters<typeof makeRequest>[2] = {}) {
  return t.handlers.handle(makeRequest(method, path, options));
}

async function startChat(user: string, message: string) {
  const response = await send('POST', '/api/chat', { user, body: { message } });
  expect(response.status).toBe(200);
  await readSse(response);
  await t.handlers.segments.settle();
  return { threadId: response.headers.get('x-agent-kit-thread-id')!, runId: response.headers.get('x-agent-kit-run-id')! };
}

async function statusOf(runId: string) {
  await t.handlers.segments.settle();
  const [row] = await t.db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [runId]);
  return row!.status;
}

beforeAll(async () => {
  // The fake engine asks question q1 and parks, then closes once the run has an answer.
  t = await openHttpTest({ segment: { askQuestionId: 'q1' } });
  alice = await startChat('alice', 'first question');
  waiting = await startChat('alice', 'second question');
});
afterAll(async () => {
  await t.close();
});

/** Every thread and run route, for a thread and run id. */
function threadAndRunRoutes(threadId: string, runId: string): [string, string, unknown?][] {
  return [
    ['GET', `/api/threads/${threadId}`],
    ['GET', `/api/threads/${threadId}/events`],
    ['GET', `/api/runs/${runId}`],
    ['POST', `/api/runs/${runId}/input`, { questionId: 'q1', answer: 'savings' }],
    ['POST', `/api/runs/${runId}/cancel`, {}],
    ['POST', `/api/runs/${runId}/takeover`, {}],
    ['POST', `/api/runs/${runId}/release`, {}],
    ['POST', '/api/chat', { threadId, message: 'let me in' }],
  ];
}

describe('authentication and ownership', () => {
  it('refuses every user route without a caller (401)', async () => {
    for (const [method, path, body] of [...threadAndRunRoutes(alice.threadId, alice.runId), ['GET', '/api/threads'], ['GET', '/api/runs']] as const) {
      const response = await send(method, path, { body });
      expect(response.status, `${method} ${path}`).toBe(401);
      expect(await response.json()).toMatchObject({ error: { code: 'UNAUTHENTICATED' } });
    }
  });

  it("another user's thread and runs are not found on every route, exactly like unknown ids, and nothing is written", async () => {
    const before = await countRows(t.db);
    const unknown = threadAndRunRoutes(crypto.randomUUID(), crypto.randomUUID());
    const theirs = threadAndRunRoutes(waiting.threadId, waiting.runId);
    for (let i = 0; i < theirs.length; i++) {
      for (const [method, path, body] of [theirs[i]!, unknown[i]!]) {
        const response = await send(method, path, { user: 'mallory', body });
        expect(response.status, `${method} ${path}`).toBe(404);
        expect(await response.json()).toMatchObject({ error: { code: 'NOT_FOUND' } });
      }
    }
    const threads = await (await send('GET', '/api/threads', { user: 'mallory' })).json();
    expect(threads.threads).toEqual([]);
    const runs = await (await send('GET', '/api/runs', { user: 'mallory' })).json();
    expect(runs.runs).toEqual([]);
    expect(await countRows(t.db)).toEqual(before);
    expect(await statusOf(waiting.runId)).toBe('waiting_input');
  });

  it('an operator can read any thread, its events and its runs', async () => {
    const thread = await send('GET', `/api/threads/${alice.threadId}`, { user: 'ops', operator: true });
    expect(thread.status).toBe(200);
    const body = await thread.json();
    expect(body.thread).toMatchObject({ id: alice.threadId, ownerId: 'alice' });
    expect(body.messages.map((m: { role: string }) => m.role)).toEqual(['user']);
    expect(body.runs.map((r: { id: string }) => r.id)).toEqual([alice.runId]);
    const events = await readSse(await send('GET', `/api/threads/${alice.threadId}/events`, { user: 'ops', operator: true }),
      { until: (e) => e.event === 'run-parked' });
    expect(events.events.map((e) => e.event)).toContain('segment-started');
    const all = await (await send('GET', '/api/threads?all=1', { user: 'ops', operator: true })).json();
    expect(all.threads.map((x: { id: string }) => x.id)).toEqual(expect.arrayContaining([alice.threadId, waiting.threadId]));
    const runs = await (await send('GET', '/api/runs', { user: 'ops', operator: true })).json();
    expect(runs.runs.find((r: { id: string }) => r.id === alice.runId)).toMatchObject({
      status: 'waiting_input', fence: 1, attempts: 0, effects: 0, owner: null, ownerId: 'alice',
    });
    const run = await (await send('GET', `/api/runs/${alice.runId}`, { user: 'ops', operator: true })).json();
    expect(run.segments).toEqual([expect.objectContaining({ fence: 1, endedAs: 'waiting_input' })]);
    expect(run.run).toMatchObject({ id: alice.runId, status: 'waiting_input', waitingFor: { id: 'q1' } });
  });

  it('only an operator may list every thread, take over or release', async () => {
    expect((await send('GET', '/api/threads?all=1', { user: 'alice' })).status).toBe(403);
    expect((await send('POST', `/api/runs/${waiting.runId}/takeover`, { user: 'alice' })).status).toBe(403);
    const takeover = await send('POST', `/api/runs/${waiting.runId}/takeover`, { user: 'ops', operator: true });
    expect(await takeover.json()).toEqual({ runId: waiting.runId, status: 'waiting_takeover' });
    expect((await send('POST', `/api/runs/${waiting.runId}/release`, { user: 'alice' })).status).toBe(403);
    const release = await send('POST', `/api/runs/${waiting.runId}/release`, { user: 'ops', operator: true });
    expect(await release.json()).toEqual({ runId: waiting.runId, status: 'queued' });
    // Released, the run continues in the background: the fake engine asks again and parks.
    expect(await statusOf(waiting.runId)).toBe('waiting_input');
  });

  it('refuses a form or a text body on the routes that take none, so an HTML form on another page cannot send them', async () => {
    const before = await countRows(t.db);
    const routes = ['takeover', 'release', 'restore', 'cancel'].map((name) => `/api/runs/${waiting.runId}/${name}`);
    for (const path of routes) {
      const bodies: [string, string][] = [['application/x-www-form-urlencoded', 'a=1'], ['text/plain', '{}'], ['multipart/form-data; boundary=x', '--x--']];
      for (const [type, raw] of bodies) {
        const response = await send('POST', path, { user: 'ops', operator: true, raw, headers: { 'content-type': type } });
        expect(response.status, `${path} as ${type}`).toBe(415);
      }
      const unknown = await send('POST', path, { user: 'ops', operator: true, body: { force: true } });
      expect(unknown.status, `${path} with an unknown field`).toBe(400);
    }
    expect(await countRows(t.db)).toEqual(before);
    expect(await statusOf(waiting.runId)).toBe('waiting_input');
    // No body, or {} as JSON, as before.
    expect((await send('POST', routes[0]!, { user: 'ops', operator: true })).status).toBe(200);
    expect((await send('POST', routes[1]!, { user: 'ops', operator: true, body: {} })).status).toBe(200);
    expect(await statusOf(waiting.runId)).toBe('waiting_input');
  });

  it('takes only true from authenticate() as an operator: any other isOperator is the app\'s bug, a 500', async () => {
    const logged: Record<string, unknown>[] = [];
    const asked = (isOperator: unknown) => createHandlers({
      rt: { ...t.rt, log: (entry) => { logged.push(entry); } },
      authenticate: async () => ({ userId: 'mallory', isOperator } as never),
    }).handle(makeRequest('GET', '/api/threads?all=1'));
    for (const isOperator of ['false', 'true', 1, null]) {
      const response = await asked(isOperator);
      expect(response.status, String(isOperator)).toBe(500);
      expect(JSON.stringify(await response.json())).not.toContain('isOperator'); // (the log says it)
    }
    expect(logged.map((e) => e.error)).toContain('authenticate() returned isOperator "false"; it must be true or false');
    expect((await asked(false)).status).toBe(403);
    expect((await asked(undefined)).status).toBe(403);
    expect((await asked(true)).status).toBe(200);
  });

  it("only an operator may read the store's status; a bad ?stale= is a 400", async () => {
    const before = await countRows(t.db);
    expect((await send('GET', '/api/status', { user: 'alice' })).status).toBe(403);
    const response = await send('GET', '/api/status?stale=1', { user: 'ops', operator: true });
    expect(response.status).toBe(200);
    const status = await response.json();
    expect(status).toMatchObject({
      runs: { queued: expect.any(Number), running: expect.any(Number), waitingInput: 2, waitingTakeover: 0 },
      expiredLeases: { count: 0, oldestMs: null }, inDoubt: { effects: 0, runs: 0 }, alerts: [],
    });
    expect(Date.parse(status.at)).not.toBeNaN();
    for (const stale of ['0', 'x', '1.5', '86401', '-1', '', '1e3', '9999999']) {
      const bad = await send('GET', `/api/status?stale=${stale}`, { user: 'ops', operator: true });
      expect(bad.status, `?stale=${stale}`).toBe(400);
      expect((await bad.json()).error.message).toMatch(/^invalid query parameter "stale": /);
    }
    expect(await countRows(t.db)).toEqual(before);
  });
});

describe('input and cancel', () => {
  it('an answer requeues the run and its segment closes it; a replayed answer is a 409', async () => {
    const answer = { questionId: 'q1', answer: 'savings' };
    const first = await send('POST', `/api/runs/${alice.runId}/input`, { user: 'alice', body: answer });
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ runId: alice.runId, status: 'queued' });
    expect(await statusOf(alice.runId)).toBe('completed');
    const before = await countRows(t.db);
    const replay = await send('POST', `/api/runs/${alice.runId}/input`, { user: 'alice', body: answer });
    expect(replay.status).toBe(409);
    expect(await replay.json()).toMatchObject({ error: { code: 'CONFLICT' } });
    expect(await countRows(t.db)).toEqual(before);
  });

  it('an answer to a question the run did not ask is a 409', async () => {
    const response = await send('POST', `/api/runs/${waiting.runId}/input`, { user: 'alice', body: { questionId: 'q9', approved: true } });
    expect(response.status).toBe(409);
  });

  it('cancel is stored; a waiting run is closed as aborted by a background segment; a closed run is a 409', async () => {
    const run = await startChat('carol', 'cancel me');
    const cancel = await send('POST', `/api/runs/${run.runId}/cancel`, { user: 'carol' });
    expect(cancel.status).toBe(202);
    expect(await cancel.json()).toEqual({ runId: run.runId, status: 'waiting_input', cancelRequested: true });
    expect(await statusOf(run.runId)).toBe('aborted');
    expect((await send('POST', `/api/runs/${run.runId}/cancel`, { user: 'carol' })).status).toBe(409);
  });
});

describe('input validation', () => {
  const big = 'x'.repeat(70 * 1024);
  const cases: [string, Parameters<typeof makeRequest>[2], number][] = [
    ['malformed JSON', { raw: '{"message": ' }, 400],
    ['an empty body', { raw: '' }, 400],
    ['a JSON array', { body: ['hi'] }, 400],
    ['a number as message', { body: { message: 42 } }, 400],
    ['an empty message', { body: { message: '' } }, 400],
    ['a blank message', { body: { message: '   ' } }, 400],
    ['a message of invisible characters only', { body: { message: '\u200b\u200d\ufeff \u2060\u00ad\u200e' } }, 400],
    ['a message over 32 000 characters', { body: { message: 'y'.repeat(32_001) } }, 400],
    ['a malformed thread id', { body: { message: 'hi', threadId: 'thread-1' } }, 400],
    ['an unknown thread id', { body: { message: 'hi', threadId: crypto.randomUUID() } }, 404],
    ['a body over 64 KiB', { body: { message: big } }, 413],
    ['a body over 64 KiB, declared', { raw: JSON.stringify({ message: big }), headers: { 'content-length': String(big.length + 20) } }, 413],
    ['text/plain', { raw: '{"message":"hi"}', headers: { 'content-type': 'text/plain' } }, 415],
    ['no content type', { raw: '{"message":"hi"}', headers: { 'content-type': '' } }, 415],
  ];
  for (const [what, options, status] of cases) {
    it(`POST /api/chat with ${what} is a ${status} and writes nothing`, async () => {
      const before = await countRows(t.db);
      const response = await send('POST', '/api/chat', { user: 'alice', ...options });
      expect(response.status).toBe(status);
      const body = await response.json();
      expect(body.error.code).toEqual(expect.any(String));
      expect(body.error.message).toEqual(expect.any(String));
      expect(await countRows(t.db)).toEqual(before);
    });
  }

  it('rejects malformed ids, cursors, limits and input bodies with 400', async () => {
    const before = await countRows(t.db);
    const bad: [string, string, unknown?][] = [
      ['GET', '/api/runs/not-a-uuid'],
      ['GET', '/api/threads/not-a-uuid'],
      ['GET', `/api/threads/${alice.threadId}/events?after=-1`],
      ['GET', `/api/threads/${alice.threadId}/events?after=abc`],
      ['GET', `/api/threads/${alice.threadId}/events?format=xml`],
      ['GET', '/api/threads?limit=0'],
      ['GET', `/api/threads/${alice.threadId}?turns=0`],
      ['GET', `/api/threads/${alice.threadId}?turns=1001`],
      ['GET', `/api/threads/${alice.threadId}?turns=few`],
      ['GET', `/api/threads/${alice.threadId}?turns=5&beforeTurn=0`],
      ['GET', `/api/threads/${alice.threadId}?turns=5&beforeTurn=1e20`],
      ['GET', `/api/threads/${alice.threadId}?beforeTurn=2`],
      ['GET', '/api/runs?status=sleeping'],
      ['POST', `/api/runs/${waiting.runId}/input`, { questionId: 'q1' }],
      ['POST', `/api/runs/${waiting.runId}/input`, { questionId: 'q1', answer: 'a', approved: true }],
      ['POST', `/api/runs/${waiting.runId}/input`, { questionId: 'q1', approved: 'yes' }],
    ];
    for (const [method, path, body] of bad) {
      const response = await send(method, path, { user: 'alice', body });
      expect(response.status, `${method} ${path}`).toBe(400);
      const { error } = await response.json();
      expect(error.code).toBe('INVALID_ARGUMENT');
      // The parameter is named once: not 'invalid query parameter "after": query parameter "after": …'.
      expect(error.message, `${method} ${path}`).toMatch(/^invalid (path parameter|query parameter|body)\b/);
      expect(error.message.match(/parameter "/g)?.length ?? 0, error.message).toBeLessThanOrEqual(1);
    }
    // A limit says its range, whatever is wrong with it (a negative one was "not a whole number").
    for (const limit of ['-1', '0', '1.5', '1001']) {
      const response = await send('GET', `/api/runs?limit=${limit}`, { user: 'alice' });
      expect((await response.json()).error.message, limit).toMatch(/^invalid query parameter "limit": .*\b(1 to 1000|at most 1000|>=1|too small|too big)/i);
    }
    expect((await (await send('GET', '/api/runs?limit=-1', { user: 'alice' })).json()).error.message)
      .toBe('invalid query parameter "limit": must be a whole number from 1 to 1000');
    const lastEventId = await send('GET', `/api/threads/${alice.threadId}/events`, { user: 'alice', headers: { 'last-event-id': 'x' } });
    expect(lastEventId.status).toBe(400);
    expect(await countRows(t.db)).toEqual(before);
  });

  it('answers unknown routes with 404 and wrong methods with 405 and an allow header', async () => {
    const missing = await send('GET', '/api/nope', { user: 'alice' });
    expect(missing.status).toBe(404);
    const wrong = await send('DELETE', `/api/threads/${alice.threadId}`, { user: 'alice' });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET');
  });
});

describe('cron routes', () => {
  it('need the bearer secret: 401 when missing or wrong, 503 when none is configured', async () => {
    const calls: unknown[] = [];
    const handlers = createHandlers({
      rt: t.rt, authenticate: headerAuth, runSegment: fakeRunSegment(),
      drainQueue: async (_rt, options) => {
        calls.push(['drain', options]);
        return { taken: 0 };
      },
      reapExpiredRuns: async () => {
        calls.push(['reap']);
        return { scanned: 0 };
      },
    });
    const cron = (path: string, authorization?: string) =>
      handlers.handle(makeRequest('POST', path, { headers: authorization ? { authorization } : {} }));
    for (const path of ['/api/cron/drain', '/api/cron/reap']) {
      expect((await cron(path)).status).toBe(401);
      const stale = await cron(path, `Bearer ${cronSecret}x`);
      expect(stale.status).toBe(401);
      // A secret sent but not the one set is told apart from none sent (a scheduler's stale secret).
      expect(((await stale.json()) as { error: { message: string } }).error.message).toMatch(/^the cron secret does not match CRON_SECRET/);
      expect(((await (await cron(path)).json()) as { error: { message: string } }).error.message).toBe('the cron routes need Authorization: Bearer $CRON_SECRET');
      expect((await cron(path, `Basic ${cronSecret}`)).status).toBe(401);
      expect((await cron(path, 'Bearer')).status).toBe(401);
    }
    expect(calls).toEqual([]);
    const drain = await cron('/api/cron/drain?budget=10', `Bearer ${cronSecret}`);
    expect(drain.status).toBe(200);
    expect(await drain.json()).toEqual({ drain: { taken: 0 } });
    const reap = await handlers.handle(makeRequest('GET', '/api/cron/reap', { headers: { authorization: `Bearer ${cronSecret}` } }));
    expect(await reap.json()).toEqual({ reap: { scanned: 0 } });
    expect(calls).toEqual([['drain', { budgetMs: 10_000 }], ['reap']]);

    // A secret the app passes itself is held to CRON_SECRET's rule.
    for (const short of ['hunter2', '', ' '.repeat(20), 'x'.repeat(15)]) {
      expect(() => createHandlers({ rt: t.rt, authenticate: headerAuth, cronSecret: short }), JSON.stringify(short))
        .toThrow(/^cronSecret must be at least 16 characters/);
    }
    expect(() => createHandlers({ rt: { ...t.rt, config: { ...t.rt.config, cronSecret: 'short' } }, authenticate: headerAuth }))
      .toThrow(/^cronSecret must be at least 16 characters/);
    const off = createHandlers({ rt: { ...t.rt, config: { ...t.rt.config, cronSecret: undefined } }, authenticate: headerAuth });
    const response = await off.handle(makeRequest('POST', '/api/cron/drain', { headers: { authorization: 'Bearer anything' } }));
    expect(response.status).toBe(503);
    expect((await response.json()).error.code).toBe('NOT_CONFIGURED');
  });

  it('answer 503 when the store is down, the drain as the reap: not an empty report', async () => {
    const down = { ...t.rt.db, query: async () => {
      throw new StoreUnavailableError('database unavailable: connect ECONNREFUSED');
    } };
    const handlers = createHandlers({ rt: { ...t.rt, db: down, log: () => {} }, authenticate: headerAuth, runSegment: fakeRunSegment() });
    for (const path of ['/api/cron/drain', '/api/cron/reap']) {
      const response = await handlers.handle(makeRequest('GET', path, { headers: { authorization: `Bearer ${cronSecret}` } }));
      expect(response.status, path).toBe(503);
      expect(response.headers.get('retry-after')).toBe('1');
      expect(await response.json()).toEqual({ error: { code: 'STORE_UNAVAILABLE', message: 'the store is unavailable; retry later' } });
    }
  });
});
