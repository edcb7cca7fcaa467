// Legitimate requests that the run's state refuses, both stores: replayed and racing answers to
// waiting_input, answers to runs that are not waiting, cancel, takeover and release on closed
// runs or runs not taken over. Each refusal is a 409 (403 for a non-operator) and writes nothing;
// of N identical answers sent at once exactly one is stored.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandlers, type Handlers } from '../../src/http/handlers.js';
import type { RunSegment } from '../../src/turn/types.js';
import { isBlank } from '../../src/blank.js';
import { nastyText } from './arbitraries.js';
import {
  expectNothingWritten, expectRefusal, hostileRequest, hostileRuns, operatorName, sessionAuth,
  snapshotTables, Tally, type HostileRequest,
} from './hostile-kit.js';
import { openHostileFixture, type HostileFixture, type Ids } from './hostile-fixture.js';

const tally = new Tally('state');
let f: HostileFixture;
/** Handlers whose background segment never claims: an answered run stays queued. */
let idle: Handlers;
/** Alice's run that has its answer and waits in the queue for a segment. */
let answered: Ids;
let before: Record<string, string>;
const runs = { numRuns: hostileRuns };

const neverClaims: RunSegment = async () => ({ kind: 'not-claimed', reason: 'busy' });

beforeAll(async () => {
  f = await openHostileFixture();
  idle = createHandlers({ rt: f.t.rt, authenticate: sessionAuth, runSegment: neverClaims });
  const response = await f.send('POST', '/api/chat', { user: 'alice', body: { message: 'answer me once' } });
  await response.body?.cancel();
  await f.t.handlers.segments.settle();
  answered = {
    threadId: response.headers.get('x-agent-kit-thread-id')!, runId: response.headers.get('x-agent-kit-run-id')!,
  };
  const first = await idle.handle(hostileRequest('POST', `/api/runs/${answered.runId}/input`, {
    user: 'alice', body: { questionId: 'q1', answer: 'the first answer' },
  }));
  expect(await first.json()).toEqual({ runId: answered.runId, status: 'queued' });
  await idle.segments.settle();
  before = await f.snapshot();
});
afterAll(async () => {
  tally.report();
  await idle?.segments.settle();
  await f?.close();
});

async function refused(
  route: string, what: string, path: string, options: HostileRequest, expected: readonly number[],
) {
  const response = await idle.handle(hostileRequest('POST', path, options));
  const refusal = await expectRefusal(tally, route, what, response, expected);
  await expectNothingWritten(tally, route, what, f.t.db, before);
  return refusal;
}

const answerBody = fc.record({
  questionId: fc.oneof(fc.constant('q1'), nastyText.filter((s) => s.length <= 200)),
  data: fc.oneof(nastyText.map((answer) => ({ answer })), fc.boolean().map((approved) => ({ approved }))),
}).map(({ questionId, data }) => ({ questionId, ...data }));
const hasLoneSurrogate = (json: string) => /\\ud[89a-f][0-9a-f]{2}/i.test(json);
/**
 * Postgres refuses U+0000 in text and jsonb (a 400) before the run's state is looked at, and a
 * blank answer is refused as blank (a 400).
 */
const expectedFor = (body: object) => (JSON.stringify(body).includes('\\u0000')
  || ('answer' in body && typeof body.answer === 'string' && isBlank(body.answer)) ? [400]
  : hasLoneSurrogate(JSON.stringify(body)) ? [400, 409] : [409]);

describe('answers', () => {
  it('a replayed or different answer to a run that already has its answer is a 409', async () => {
    await fc.assert(fc.asyncProperty(answerBody, async (body) => {
      const expected = expectedFor(body);
      await refused('POST /api/runs/:id/input', 'replayed answer', `/api/runs/${answered.runId}/input`,
        { user: 'alice', body }, expected);
    }), runs);
  });

  it('an answer to a completed, aborted or taken-over run is a 409', async () => {
    const target = fc.constantFrom(f.alice.completed, f.alice.aborted, f.alice.takenOver);
    await fc.assert(fc.asyncProperty(target, answerBody, async (run, body) => {
      const expected = expectedFor(body);
      await refused('POST /api/runs/:id/input', 'answer to a run not waiting', `/api/runs/${run.runId}/input`,
        { user: 'alice', body }, expected);
    }), runs);
  });

  it('of identical answers sent at once, exactly one is stored; the rest are 409 and write nothing', async () => {
    const response = await f.send('POST', '/api/chat', { user: 'erin', body: { message: 'race me' } });
    await response.body?.cancel();
    await f.t.handlers.segments.settle();
    const runId = response.headers.get('x-agent-kit-run-id')!;
    const body = { questionId: 'q1', answer: 'same' };
    const answers = await Promise.all(Array.from({ length: 12 }, () =>
      idle.handle(hostileRequest('POST', `/api/runs/${runId}/input`, { user: 'erin', body }))));
    await idle.segments.settle();
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([200, ...Array(11).fill(409)]);
    for (const losing of answers.filter((r) => r.status === 409)) {
      await expectRefusal(tally, 'POST /api/runs/:id/input', 'concurrent duplicate answer', losing, [409]);
    }
    const [counts] = await f.t.db.query<{ inputs: number; events: number }>(
      `select (select count(*)::int from agent_kit_inputs where run_id = $1) as inputs,
              (select count(*)::int from agent_kit_thread_events
               where run_id = $1 and type = 'input-received') as events`,
      [runId]);
    expect(counts).toEqual({ inputs: 1, events: 1 });
    before = await f.snapshot(); // the one accepted answer is the only write
  });
});

describe('cancel, takeover and release', () => {
  const closed = () => [f.alice.completed, f.alice.aborted];

  it('cancel of a closed run is a 409 for the owner and the operator; a body other than { shownSeq } is a 400', async () => {
    // The body may say how far the caller saw the reply (ADR-0090): a seq, nothing else.
    const cancelBody = fc.oneof(
      fc.constant({}), fc.nat().map((shownSeq) => ({ shownSeq })),
      fc.jsonValue({ maxDepth: 2 }), fc.jsonValue({ maxDepth: 1 }).map((shownSeq) => ({ shownSeq })),
    );
    const valid = (body: unknown) => typeof body === 'object' && body !== null && !Array.isArray(body)
      && Object.keys(body).every((key) => key === 'shownSeq')
      && ((body as { shownSeq?: unknown }).shownSeq === undefined || Number.isSafeInteger((body as { shownSeq: unknown }).shownSeq)
        && (body as { shownSeq: number }).shownSeq >= 0);
    await fc.assert(fc.asyncProperty(
      fc.constantFrom(...closed()), fc.constantFrom('alice', operatorName), cancelBody,
      async (run, user, body) => {
        await refused('POST /api/runs/:id/cancel', 'cancel of a closed run', `/api/runs/${run.runId}/cancel`,
          { user, body }, [valid(body) ? 409 : 400]);
      }), runs);
  });

  it('takeover of a closed run is a 409 for the operator and a 403 for the owner', async () => {
    for (const run of closed()) {
      const path = `/api/runs/${run.runId}/takeover`;
      await refused('POST /api/runs/:id/takeover', 'takeover of a closed run', path, { user: operatorName }, [409]);
      await refused('POST /api/runs/:id/takeover', 'takeover by a non-operator', path, { user: 'alice' }, [403]);
    }
  });

  it('release of a run that is not taken over is a 409; by a non-operator a 403', async () => {
    for (const run of [...closed(), f.alice.waiting, answered]) {
      const path = `/api/runs/${run.runId}/release`;
      const what = 'release of a run not taken over';
      await refused('POST /api/runs/:id/release', what, path, { user: operatorName }, [409]);
    }
    await refused('POST /api/runs/:id/release', 'release by a non-operator',
      `/api/runs/${f.alice.takenOver.runId}/release`, { user: 'alice' }, [403]);
  });

  it('a repeated takeover or cancel is answered as before and writes nothing new', async () => {
    const takeover = `/api/runs/${f.alice.takenOver.runId}/takeover`;
    const again = await idle.handle(hostileRequest('POST', takeover, { user: operatorName }));
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ runId: f.alice.takenOver.runId, status: 'waiting_takeover' });
    await expectNothingWritten(tally, 'POST /api/runs/:id/takeover', 'repeated takeover', f.t.db, before);
    const first = await idle.handle(hostileRequest('POST', `/api/runs/${answered.runId}/cancel`, { user: 'alice' }));
    expect(first.status).toBe(202);
    await idle.segments.settle();
    // Tables only: re-enqueueing is an INSERT … ON CONFLICT, which draws a jobs id it then
    // discards, so the sequence moves on while no row changes.
    const afterFirst = await snapshotTables(f.t.db, { sequences: false });
    for (let i = 0; i < 3; i++) {
      const repeat = await idle.handle(hostileRequest('POST', `/api/runs/${answered.runId}/cancel`, { user: 'alice' }));
      expect(repeat.status).toBe(202);
      await idle.segments.settle();
      expect(await snapshotTables(f.t.db, { sequences: false })).toEqual(afterFirst);
    }
  });
});
