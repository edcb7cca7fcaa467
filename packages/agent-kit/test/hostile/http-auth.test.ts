// Hostile credentials on every route, both stores: missing and forged session cookies (other
// key, expired, tampered payload, truncated, very long) on every user route are a 401; wrong,
// near-miss and very long cron bearer tokens on both cron routes and both methods are a 401 and
// never start a drain or a reap; with the right secret a bad budget is a 400. Nothing is written.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandlers, type Handlers } from '../../src/http/handlers.js';
import { forgedBearer, forgedCookie } from './arbitraries.js';
import {
  expectNothingWritten, expectRefusal, hostileRequest, hostileRuns, sessionAuth, Tally,
} from './hostile-kit.js';
import { openHostileFixture, type HostileFixture } from './hostile-fixture.js';

const tally = new Tally('auth');
let f: HostileFixture;
let before: Record<string, string>;
let cron: Handlers;
const cronCalls: string[] = [];

beforeAll(async () => {
  f = await openHostileFixture();
  before = await f.snapshot();
  // Spies instead of the real drain and reap: a forged token that got through would show here.
  cron = createHandlers({
    rt: f.t.rt, authenticate: sessionAuth, runSegment: f.t.runner,
    drainQueue: async () => {
      cronCalls.push('drain');
      return {};
    },
    reapExpiredRuns: async () => {
      cronCalls.push('reap');
      return {};
    },
  });
});
afterAll(async () => {
  tally.report();
  await f?.close();
});

/** Every user route, aimed at alice's waiting run and thread, with a body where it takes one. */
function userRoutes(): [string, string, string, unknown?][] {
  const { threadId, runId } = f.alice.waiting;
  return [
    ['POST /api/chat', 'POST', '/api/chat', { message: 'hi', threadId }],
    ['GET /api/threads', 'GET', '/api/threads'],
    ['GET /api/threads/:id', 'GET', `/api/threads/${threadId}`],
    ['GET /api/threads/:id/events', 'GET', `/api/threads/${threadId}/events`],
    ['GET /api/runs', 'GET', '/api/runs'],
    ['GET /api/runs/:id', 'GET', `/api/runs/${runId}`],
    ['POST /api/runs/:id/input', 'POST', `/api/runs/${runId}/input`, { questionId: 'q1', answer: 'x' }],
    ['POST /api/runs/:id/cancel', 'POST', `/api/runs/${runId}/cancel`, {}],
    ['POST /api/runs/:id/takeover', 'POST', `/api/runs/${runId}/takeover`, {}],
    ['POST /api/runs/:id/release', 'POST', `/api/runs/${f.alice.takenOver.runId}/release`, {}],
    ['POST /api/runs/:id/resolve-effect', 'POST', `/api/runs/${runId}/resolve-effect`, { key: 'k', happened: true }],
    ['POST /api/runs/:id/restore', 'POST', `/api/runs/${runId}/restore`, {}],
    ['GET /api/status', 'GET', '/api/status'],
  ];
}

describe('sessions', () => {
  it('every user route without a session cookie is a 401', async () => {
    for (const [route, method, path, body] of userRoutes()) {
      const response = await f.send(method, path, { body });
      const refusal = await expectRefusal(tally, route, 'no session', response, [401]);
      expect(refusal.headers.get('www-authenticate')).toBe('Bearer');
      await expectNothingWritten(tally, route, 'no session', f.t.db, before);
    }
  });

  it('every user route with a forged, expired, tampered or oversized session is a 401', async () => {
    const routes = userRoutes();
    await fc.assert(fc.asyncProperty(
      fc.constantFrom(...routes), fc.oneof(forgedCookie('alice'), forgedCookie('ops')),
      async ([route, method, path, body], cookie) => {
        const response = await f.send(method, path, { body, cookie });
        await expectRefusal(tally, route, 'forged session', response, [401]);
        await expectNothingWritten(tally, route, 'forged session', f.t.db, before);
      }), { numRuns: hostileRuns * 3 });
  });

  it("a session forged for the operator cannot take over, release or resolve alice's runs' effects", async () => {
    for (const [route, , path, body] of userRoutes().filter(([r]) => /takeover|release|resolve-effect/.test(r))) {
      const response = await f.send('POST', path, { body, cookie: `ak_session=${'x'.repeat(40)}.${'y'.repeat(43)}` });
      await expectRefusal(tally, route, 'forged operator session', response, [401]);
      const asAlice = await f.send('POST', path, { body, user: 'alice' });
      await expectRefusal(tally, route, 'owner is not an operator', asAlice, [403]);
      await expectNothingWritten(tally, route, 'owner is not an operator', f.t.db, before);
    }
  });
});

describe('cron bearer secret', () => {
  const cronRoutes = ['/api/cron/drain', '/api/cron/reap'];

  it('a wrong, near-miss or very long bearer token is a 401 on both cron routes and methods', async () => {
    await fc.assert(fc.asyncProperty(
      fc.constantFrom(...cronRoutes), fc.constantFrom('GET', 'POST'), forgedBearer(f.cronSecret),
      async (path, method, authorization) => {
        const route = `${method === 'GET' ? 'GET' : 'POST'} ${path}`;
        const response = await cron.handle(hostileRequest(method, `${path}?budget=5`, { headers: { authorization } }));
        const refusal = await expectRefusal(tally, route, 'forged bearer token', response, [401]);
        expect(refusal.message).not.toContain(f.cronSecret);
        await expectNothingWritten(tally, route, 'forged bearer token', f.t.db, before);
      }), { numRuns: hostileRuns * 3 });
    expect(cronCalls).toEqual([]);
  });

  it('a missing Authorization header, or a session cookie instead of the secret, is a 401', async () => {
    for (const path of cronRoutes) {
      for (const options of [{}, { user: 'ops' }, { headers: { cookie: `ak_session=${f.cronSecret}` } }]) {
        const response = await cron.handle(hostileRequest('POST', path, options));
        await expectRefusal(tally, `POST ${path}`, 'no bearer token', response, [401]);
      }
      await expectNothingWritten(tally, `POST ${path}`, 'no bearer token', f.t.db, before);
    }
    expect(cronCalls).toEqual([]);
  });

  it('with the right secret, a budget that is not a number in (0, 3600] is a 400 and drains nothing', async () => {
    // Strings, and numbers past an hour (as AGENT_KIT_INVOCATION_BUDGET: most likely milliseconds).
    const badBudget = fc.oneof(fc.string({ maxLength: 20 }), fc.integer({ min: 3_601, max: 10_000_000 }).map(String)).filter((s) => {
      const n = Number(s);
      return !(n > 0 && n <= 3_600);
    });
    await fc.assert(fc.asyncProperty(badBudget, async (budget) => {
      const url = `/api/cron/drain?budget=${encodeURIComponent(budget)}`;
      const headers = { authorization: `Bearer ${f.cronSecret}` };
      const response = await cron.handle(hostileRequest('POST', url, { headers }));
      await expectRefusal(tally, 'POST /api/cron/drain', 'bad budget, right secret', response, [400]);
    }), { numRuns: hostileRuns });
    await expectNothingWritten(tally, 'POST /api/cron/drain', 'bad budget, right secret', f.t.db, before);
    expect(cronCalls).toEqual([]);
  });

  it('with the right secret, a query parameter the route does not take is a 400 naming it, and runs nothing', async () => {
    // Written once into a scheduler's config, an ignored `?concurrency=4` would never do anything.
    const headers = { authorization: `Bearer ${f.cronSecret}` };
    const cases: Array<[string, RegExp]> = [
      ['/api/cron/drain?concurrency=4', /query parameter "concurrency" is not one of this route's: it takes only "budget"/],
      ['/api/cron/drain?budget=5&budjet=5', /"budjet"/],
      ['/api/cron/reap?limit=abc', /query parameter "limit" is not one of this route's: it takes none/],
      ['/api/cron/reap?budget=5', /"budget"/],
    ];
    for (const [url, says] of cases) {
      const response = await cron.handle(hostileRequest('POST', url, { headers }));
      const refusal = await expectRefusal(tally, `POST ${url.split('?')[0]}`, 'unknown query parameter', response, [400]);
      expect(refusal.message).toMatch(says);
    }
    await expectNothingWritten(tally, 'POST /api/cron/*', 'unknown query parameter', f.t.db, before);
    expect(cronCalls).toEqual([]);
    // A platform's own parameter and a cache-buster pass.
    const passed = await cron.handle(hostileRequest('POST', '/api/cron/reap?x-vercel-protection-bypass=s&_=1', { headers }));
    expect(passed.status).toBe(200);
    expect(cronCalls).toEqual(['reap']);
  });
});
