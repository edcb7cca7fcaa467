// Hostile paths, parameters and methods on every route of routes.ts, both stores: random and
// SQL-looking ids are a 400, random paths a 404, wrong methods a 405 with `allow`, bad query
// parameters a 400 (and ?all=1 a 403 for a non-operator). Another user's thread or run answers
// exactly like an id that does not exist (same status, headers and body once ids are masked),
// and no list reveals it. Nothing is written by any of these requests.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxRunListSize } from '../../src/event-log/read-runs.js';
import { maxStaleSeconds } from '../../src/event-log/read-status.js';
import { maxThreadItems } from '../../src/event-log/read-threads.js';
import { runStatuses } from '../../src/lease/run-row.js';
import { matchPath, routes } from '../../src/http/routes.js';
import { uuidPattern } from '../../src/store/db.js';
import { notUuid } from './arbitraries.js';
import {
  expectNothingWritten, expectRefusal, hostileRuns, operatorName, routeNamesIn, Tally, type HostileRequest, type Refusal,
} from './hostile-kit.js';
import { maskIds, openHostileFixture, type HostileFixture } from './hostile-fixture.js';

const tally = new Tally('params');
const headerList = (headers: Headers) => {
  const list: [string, string][] = [];
  headers.forEach((value, name) => list.push([name, value]));
  return list;
};
const hasLineBreakOrNul = (s: string) => s.includes('\r') || s.includes('\n') || s.includes('\u0000');
let f: HostileFixture;
let before: Record<string, string>;
const runs = { numRuns: hostileRuns };

beforeAll(async () => {
  f = await openHostileFixture();
  before = await f.snapshot();
});
afterAll(async () => {
  tally.report();
  await f?.close();
});

async function refused(
  route: string, what: string, method: string, path: string, options: HostileRequest,
  expected: readonly number[],
) {
  const response = await f.send(method, path, options);
  const refusal = await expectRefusal(tally, route, what, response, expected);
  await expectNothingWritten(tally, route, what, f.t.db, before);
  return refusal;
}

/** The routes that take an id, as [label, method, path for an id, body]. */
const idRoutes: [string, string, (id: string) => string, unknown?][] = [
  ['GET /api/threads/:id', 'GET', (id) => `/api/threads/${id}`],
  ['GET /api/threads/:id/events', 'GET', (id) => `/api/threads/${id}/events`],
  ['GET /api/runs/:id', 'GET', (id) => `/api/runs/${id}`],
  ['POST /api/runs/:id/input', 'POST', (id) => `/api/runs/${id}/input`, { questionId: 'q1', answer: 'x' }],
  ['POST /api/runs/:id/cancel', 'POST', (id) => `/api/runs/${id}/cancel`],
  ['POST /api/runs/:id/takeover', 'POST', (id) => `/api/runs/${id}/takeover`],
  ['POST /api/runs/:id/release', 'POST', (id) => `/api/runs/${id}/release`],
  ['POST /api/runs/:id/resolve-effect', 'POST', (id) => `/api/runs/${id}/resolve-effect`, { key: 'k', happened: true }],
  ['POST /api/runs/:id/restore', 'POST', (id) => `/api/runs/${id}/restore`],
];

describe('path parameters', () => {
  it('a path id that is not a uuid (random, SQL-looking, near-miss) is a 400 on every id route', async () => {
    const id = notUuid.filter((s) => !['', '.', '..'].includes(s));
    const property = fc.asyncProperty(fc.constantFrom(...idRoutes), id, async ([route, method, path, body], raw) => {
      const options = { user: 'alice', body: method === 'POST' ? body ?? {} : undefined };
      await refused(route, 'id not a uuid', method, path(encodeURIComponent(raw)), options, [400]);
    });
    await fc.assert(property, { numRuns: hostileRuns * 3 });
  });

  it('a path that names no route is a 404, and a route with the wrong method a 405', async () => {
    const segment = fc.oneof(
      fc.constantFrom('api', 'threads', 'runs', 'cron', 'drain', 'events', 'input', '%2e%2e', '%ZZ', ''),
      fc.string({ maxLength: 12 }).map(encodeURIComponent),
    );
    const method = fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS');
    const pathArb = fc.array(segment, { minLength: 1, maxLength: 5 }).map((parts) => `/api/${parts.join('/')}`);
    await fc.assert(fc.asyncProperty(pathArb, method, async (path, verb) => {
      const pathname = new URL(path, 'http://agent-kit.test').pathname;
      const matched = routes.filter((r) => matchPath(r.path, pathname) !== null);
      fc.pre(matched.every((r) => !r.methods.includes(verb))); // a real route: tested elsewhere
      const expected = matched.length === 0 ? 404 : 405;
      const label = matched.length === 0 ? `${verb} (no route)` : `${verb} ${matched[0]!.path}`;
      const what = expected === 404 ? 'random path' : 'wrong method';
      await refused(label, what, verb, path, { user: 'alice' }, [expected]);
    }), { numRuns: hostileRuns * 2 });
  });

  it('every route answers every other method with a 405 that lists the allowed ones', async () => {
    const methods = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'];
    const id = f.alice.waiting.runId;
    for (const route of routes) {
      const path = route.path.replace(':id', id);
      for (const method of methods.filter((m) => !route.methods.includes(m))) {
        const label = `${method} ${route.path}`;
        const refusal = await refused(label, 'wrong method', method, path, { user: 'alice' }, [405]);
        expect(refusal.headers.get('allow')).toBe(route.methods.join(', '));
      }
    }
    const covered = new Set([...tally.rows.values()].flatMap((r) => routeNamesIn(r.route)));
    expect([...covered].sort()).toEqual(routes.map((r) => r.name).sort());
  });
});

const parity = "another user's id vs an unknown id";
/** A refusal with its ids masked and its headers listed, to compare two answers. */
const comparable = (refusal: Refusal, ids: string[]) =>
  ({ ...refusal, message: maskIds(refusal.message, ids), headers: headerList(refusal.headers) });

describe("another user's ids", () => {
  it("another user's thread or run answers exactly like an unknown id, on every id route", async () => {
    const victim = fc.constantFrom(f.bob.waiting, f.bob.completed);
    await fc.assert(fc.asyncProperty(
      fc.constantFrom(...idRoutes), victim, fc.uuid(), fc.constantFrom('alice', 'mallory'),
      async ([route, method, path, body], theirs, unknown, caller) => {
        const isThread = route.includes('/threads/');
        const ids = [isThread ? theirs.threadId : theirs.runId, unknown];
        const answers = [];
        for (const id of ids) {
          const options = { user: caller, body: method === 'POST' ? body ?? {} : undefined };
          const refusal = await refused(route, parity, method, path(id), options, [404]);
          answers.push(comparable(refusal, ids));
        }
        expect(answers[0]).toEqual(answers[1]);
      }), runs);
  });

  it("a chat to another user's thread, and an ai-sdk replay of another user's run, look like unknown ids", async () => {
    await fc.assert(fc.asyncProperty(fc.uuid(), fc.constantFrom('alice', 'mallory'), async (unknown, caller) => {
      const theirs = f.bob.waiting;
      const pairs: [string, (id: string) => [string, string, HostileRequest]][] = [
        ['POST /api/chat', (id) => ['POST', '/api/chat',
          { user: caller, body: { message: 'let me in', threadId: id } }]],
        ['GET /api/threads/:id/events', (id) => ['GET',
          `/api/threads/${f.alice.waiting.threadId}/events?format=ai-sdk&runId=${id}`, { user: 'alice' }]],
      ];
      for (const [route, make] of pairs) {
        const victimId = route === 'POST /api/chat' ? theirs.threadId : theirs.runId;
        const ids = [victimId, unknown];
        const answers = [];
        for (const id of ids) {
          const [method, path, options] = make(id);
          const refusal = await refused(route, parity, method, path, options, [404]);
          answers.push(comparable(refusal, ids));
        }
        expect(answers[0]).toEqual(answers[1]);
      }
    }), runs);
  });

  it('no list, thread or run answer shows a caller anything of another user', async () => {
    const bobIds = [f.bob.waiting, f.bob.completed].flatMap((x) => [x.threadId, x.runId]);
    const reads = ['/api/threads', '/api/runs', '/api/threads?limit=1000', '/api/runs?limit=1000&mine=0',
      `/api/threads/${f.alice.completed.threadId}`, `/api/runs/${f.alice.completed.runId}`];
    for (const caller of ['alice', 'mallory']) {
      for (const path of reads) {
        if (caller === 'mallory' && /\/api\/(threads|runs)\/[0-9a-f]/.test(path)) continue; // alice's
        const response = await f.send('GET', path, { user: caller });
        const text = await response.text();
        expect(response.status, path).toBe(200);
        for (const id of bobIds) expect(text, `${caller} ${path}`).not.toContain(id);
        expect(text).not.toContain('bob');
      }
    }
    expect(await f.snapshot()).toEqual(before);
  });
});

describe('query parameters and cursors', () => {
  const isIntIn = (s: string, max: number) => /^[0-9]{1,9}$/.test(s) && Number(s) >= 1 && Number(s) <= max;
  const cursorOk = (s: string) => /^\d{1,15}$/.test(s);
  const value = fc.oneof(notUuid, fc.string({ maxLength: 20 }), fc.integer().map(String),
    fc.constantFrom('-1', '0', '1.5', '1e3', '0x10', '9'.repeat(16), '1000001', 'Infinity', ' 1', '+1'));
  const thread = () => f.alice.completed.threadId;
  const q = encodeURIComponent;
  const events = () => `/api/threads/${thread()}/events`;
  const statuses = runStatuses as readonly string[];
  /** [route, parameter, the request for a value, whether the value is valid]. */
  const cases: [string, string, (v: string) => [string, HostileRequest], (v: string) => boolean][] = [
    ['GET /api/threads', '?limit=', (v) => [`/api/threads?limit=${q(v)}`, {}],
      (v) => isIntIn(v, maxThreadItems)],
    ['GET /api/threads', '?all=', (v) => [`/api/threads?all=${q(v)}`, {}],
      (v) => ['0', '1', 'true', 'false'].includes(v)],
    ['GET /api/runs', '?limit=', (v) => [`/api/runs?limit=${q(v)}`, {}], (v) => isIntIn(v, maxRunListSize)],
    ['GET /api/runs', '?status=', (v) => [`/api/runs?status=${q(v)}`, {}], (v) => statuses.includes(v)],
    ['GET /api/runs', '?inDoubt=', (v) => [`/api/runs?inDoubt=${q(v)}`, {}],
      (v) => ['0', '1', 'true', 'false'].includes(v)],
    ['GET /api/runs', '?mine=', (v) => [`/api/runs?mine=${q(v)}`, {}],
      (v) => ['0', '1', 'true', 'false'].includes(v)],
    ['GET /api/runs', '?thread=', (v) => [`/api/runs?thread=${q(v)}`, {}], (v) => uuidPattern.test(v)],
    // No generated value is one of alice's run or thread ids: every page cursor is refused.
    ['GET /api/runs', '?before=', (v) => [`/api/runs?before=${q(v)}`, {}], () => false],
    ['GET /api/threads', '?before=', (v) => [`/api/threads?before=${q(v)}`, {}], () => false],
    ['GET /api/threads/:id/events', '?after=', (v) => [`${events()}?after=${q(v)}`, {}], cursorOk],
    ['GET /api/threads/:id/events', 'Last-Event-ID', (v) => [events(), { headers: { 'last-event-id': v } }],
      (v) => v.trim() === '' || cursorOk(v.trim())],
    ['GET /api/threads/:id/events', '?format=', (v) => [`${events()}?format=${q(v)}`, {}],
      (v) => ['sse', 'ai-sdk'].includes(v)],
    ['GET /api/threads/:id/events', '?runId= (ai-sdk)', (v) => [`${events()}?format=ai-sdk&runId=${q(v)}`, {}],
      (v) => v === ''],
    // Only an operator reads the status: as alice, any ?stale= is a 403 first (below).
    ['GET /api/status', '?stale=', (v) => [`/api/status?stale=${q(v)}`, { user: operatorName }],
      (v) => /^\d{1,6}$/.test(v) && isIntIn(v, maxStaleSeconds)],
  ];

  it('a bad limit, status, flag, cursor, page cursor, format or run id is a 400', async () => {
    await fc.assert(fc.asyncProperty(fc.constantFrom(...cases), value, async ([route, param, make, valid], v) => {
      fc.pre(!valid(v) && !hasLineBreakOrNul(v));
      const [path, options] = make(v);
      await refused(route, `bad ${param}`, 'GET', path, { user: 'alice', ...options }, [400]);
    }), { numRuns: hostileRuns * 3 });
  });

  it('?all=1 from a non-operator is a 403', async () => {
    for (const v of ['1', 'true']) {
      const path = `/api/threads?all=${v}`;
      await refused('GET /api/threads', '?all=1 without operator', 'GET', path, { user: 'alice' }, [403]);
    }
  });

  it('the store status from a non-operator is a 403, whatever its ?stale=', async () => {
    for (const path of ['/api/status', '/api/status?stale=60', '/api/status?stale=x']) {
      await refused('GET /api/status', 'status without operator', 'GET', path, { user: 'alice' }, [403]);
    }
  });
});
