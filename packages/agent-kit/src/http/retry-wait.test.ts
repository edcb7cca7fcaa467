// A chat request sent again while its turn waits out a model provider's Retry-After (the run
// parked for the retry, ADR-0098) does not ask the provider early: the run is left to its job,
// its attempt budget untouched; asked again once the time has come, the turn completes. Both
// stores, the real engine, a model that refuses its first request.
import { APICallError } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { headerAuth, makeRequest } from '../../test/harness/http-harness.js';
import { answering } from '../../test/harness/mock-streams.js';
import { messageText } from '../../test/harness/run-text.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { advanceFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { createHandlers, type Handlers } from './handlers.js';

let db: Db;
let handlers: Handlers;
let calls = 0;
beforeAll(async () => {
  db = await openTestDb();
  const model = new MockLanguageModelV3({
    doStream: async () => {
      calls += 1;
      if (calls === 1) {
        throw new APICallError({
          message: 'Rate limit reached', url: 'http://provider.test/v1/chat', requestBodyValues: {},
          statusCode: 429, responseHeaders: { 'retry-after': '30' },
        });
      }
      return answering(['Here it is.']);
    },
  });
  // A 20 s invocation: a 30 s wait does not fit, so the segment parks the run for the retry.
  handlers = createHandlers({ rt: makeRuntime(db, { model, config: { invocationBudgetMs: 20_000 } }), authenticate: headerAuth });
});
afterAll(async () => {
  await handlers.segments.settle();
  await db.close();
});

async function send(body: Record<string, unknown>) {
  const response = await handlers.handle(makeRequest('POST', '/api/chat', { user: 'alice', body }));
  expect(response.status).toBe(200);
  await response.body?.cancel(); // the client went away; the turn goes on
  await handlers.segments.settle();
  return response.headers.get('x-agent-kit-run-id')!;
}

async function runOf(runId: string) {
  const [run] = await db.query<{ status: string; attempts: number; waits: boolean; segments: number }>(
    `select status, attempts, retry_due_at > agent_kit_now() as waits,
       (select count(*)::int from agent_kit_thread_events e where e.run_id = r.id and e.type = 'segment-started') as segments
     from agent_kit_runs r where id = $1`, [runId]);
  return run!;
}

it('a request sent again during the wait leaves the run to its job; after it, the turn completes', async () => {
  const body = { message: 'hello', clientMessageId: 'm-1' };
  const runId = await send(body);
  expect(calls).toBe(1);
  expect(await runOf(runId)).toEqual({ status: 'queued', attempts: 1, waits: true, segments: 1 });

  expect(await send(body)).toBe(runId); // the same turn, asked again
  expect(calls).toBe(1); // the provider was not asked before its time
  expect(await runOf(runId)).toEqual({ status: 'queued', attempts: 1, waits: true, segments: 1 });

  await advanceFakeNow(db, 30_000);
  expect(await send(body)).toBe(runId);
  expect(calls).toBe(2);
  expect(await runOf(runId)).toEqual({ status: 'completed', attempts: 2, waits: null, segments: 2 });
  expect(await messageText(db, runId)).toBe('Here it is.');
});
