// A request the provider rejects as invalid (ADR-0066): a 4xx that is not a rate limit, a timeout
// or a conflict is rejected again however often it is sent, so the turn fails at once, with the
// provider's words in its message and in its run-closed event, instead of spending its attempts
// and ending, minutes later, as salvaged; so does an account out of credit, OpenAI's 429
// `insufficient_quota`. Errors without a status still fail only the segment.
import { APICallError } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answering, calling } from '../../test/harness/mock-streams.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { effectsFile, makeRuntime } from '../../test/harness/turn-kit.js';
import { readRunSegments } from '../event-log/read-events.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { isRetryableModelError, ModelStreamError, refusedForGood } from './model-retry.js';
import { quotaExceeded, startOpenAiStub } from '../../test/harness/openai-stub.js';
import { resolveModel, type LanguageModelV3 } from '../model/index.js';
import { newOwner } from './runtime.js';
import { runSegment } from './run-segment.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

const rejection = (statusCode: number, message = `HTTP ${statusCode}`) => new APICallError({
  message, url: 'http://provider.test/v1/chat', requestBodyValues: {}, statusCode,
});

/** A model that answers with `answers` in turn, each a stream or an error to throw. */
function modelOf(...answers: (Error | (() => unknown))[]) {
  let calls = 0;
  const model = new MockLanguageModelV3({
    doStream: async () => {
      const answer = answers[Math.min(calls++, answers.length - 1)]!;
      if (answer instanceof Error) throw answer;
      return answer() as never;
    },
  });
  return { model, calls: () => calls };
}

async function turnWith(model: LanguageModelV3, text = 'hello') {
  const { runId } = await startTurn(db, { ownerId: 'alice', text });
  const outcome = await runSegment(makeRuntime(db, { model }), { runId, owner: newOwner('refused') });
  const [run] = await db.query<{ status: string; attempts: number; last_error: unknown }>(
    'select status, attempts, last_error from agent_kit_runs where id = $1', [runId]);
  const [message] = await db.query<{ content: Record<string, unknown>; partial: boolean }>(
    `select content, partial from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId]);
  const events = await db.query<{ type: string; data: Record<string, any> }>(
    'select type, data from agent_kit_thread_events where run_id = $1 order by seq', [runId]);
  return { runId, outcome, run: run!, message, events };
}

describe('refusedForGood', () => {
  it('is a 4xx other than a rate limit, a timeout or a conflict, as a response or a stream error', () => {
    expect([400, 401, 403, 404, 413, 422].map((code) => refusedForGood(rejection(code)))).toEqual(Array(6).fill(true));
    expect([408, 409, 429, 500, 503, 529].map((code) => refusedForGood(rejection(code)))).toEqual(Array(6).fill(false));
    expect(refusedForGood(new ModelStreamError('invalid_request_error: bad', 'invalid_request_error', 400, false))).toBe(true);
    expect(refusedForGood(new ModelStreamError('odd: x', 'odd', 400, true))).toBe(false); // the provider says it may pass later
    expect(refusedForGood(new Error('no status'))).toBe(false);
    // OpenAI's insufficient_quota: a 429 that no wait lifts, as a response or in the stream.
    const outOfQuota = new APICallError({
      message: 'You exceeded your current quota', url: 'http://provider.test/v1/chat', requestBodyValues: {}, statusCode: 429,
      data: { error: { message: 'You exceeded your current quota', type: 'insufficient_quota', code: 'insufficient_quota' } },
    });
    expect(outOfQuota.isRetryable).toBe(true); // as the AI SDK marks every 429
    expect([refusedForGood(outOfQuota), isRetryableModelError(outOfQuota)]).toEqual([true, false]);
    expect(refusedForGood(new ModelStreamError('insufficient_quota: x', 'insufficient_quota', 429, false))).toBe(true);
    expect(refusedForGood(null)).toBe(false);
  });
});

describe('a turn whose request the provider rejects as invalid', () => {
  it('fails at once, on its first attempt, with the provider\'s words for every viewer', async () => {
    const tooLong = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.";
    const { model, calls } = modelOf(rejection(400, tooLong));
    const { runId, outcome, run, message, events } = await turnWith(model);
    expect(outcome).toMatchObject({ kind: 'closed', status: 'failed' });
    expect(run).toMatchObject({ status: 'failed', attempts: 1 });
    expect(calls()).toBe(1); // not asked again: it would be refused again
    const error = { name: 'AI_APICallError', message: tooLong, statusCode: 400 };
    expect(message).toEqual({ content: { text: '', error }, partial: true });
    const closed = events.find((e) => e.type === 'run-closed')!;
    expect(closed.data).toMatchObject({ status: 'failed', text: '', error });
    expect(events.map((e) => e.type)).not.toContain('model-retry');
    expect(events.map((e) => e.type)).not.toContain('segment-failed');
    // What `agent-kit show` and the operator page list: the segment, and why it failed.
    expect(await readRunSegments(db, runId)).toMatchObject([
      { fence: 1, endedAs: 'failed', error: `AI_APICallError: ${tooLong}` },
    ]);
  });

  it('keeps what the turn had done: the answer so far is its message, its tool ran once', async () => {
    const effects = effectsFile();
    try {
      const { model, calls } = modelOf(() => calling('record_effect', { note: 'before the refusal' }), rejection(401, 'Incorrect API key provided'));
      const { outcome, run, message, events } = await turnWith(model);
      expect(outcome).toMatchObject({ kind: 'closed', status: 'failed' });
      expect(run).toMatchObject({ status: 'failed', attempts: 1 });
      expect(calls()).toBe(2);
      expect(effects.lines()).toHaveLength(1);
      expect(message!.content.error).toEqual({ name: 'AI_APICallError', message: 'Incorrect API key provided', statusCode: 401 });
      expect(events.filter((e) => e.type === 'tool-result')).toHaveLength(1);
    } finally {
      effects.restore();
    }
  });

  it('an account out of credit (OpenAI\'s 429 insufficient_quota) fails at once, not asked again as a rate limit is', async () => {
    const stub = await startOpenAiStub();
    try {
      const model = resolveModel('openai-compatible:stub-model', { OPENAI_BASE_URL: stub.baseURL, OPENAI_API_KEY: 'k' });
      const { outcome, run, message, events } = await turnWith(model, 'we are out of credit');
      expect(outcome).toMatchObject({ kind: 'closed', status: 'failed' });
      expect(run).toMatchObject({ status: 'failed', attempts: 1 });
      expect(stub.received).toHaveLength(1);
      expect(message!.content.error).toEqual({ name: 'AI_APICallError', message: quotaExceeded, statusCode: 429 });
      expect(events.map((e) => e.type)).not.toContain('model-retry');
    } finally {
      await stub.close();
    }
  });

  it('an error without a status still fails only the segment, for the run to be tried again', async () => {
    const { model } = modelOf(new Error('socket hang up'));
    const { outcome, run, message, events } = await turnWith(model);
    expect(outcome).toMatchObject({ kind: 'stopped', reason: 'socket hang up' });
    expect(run).toMatchObject({ status: 'running', attempts: 1, last_error: { message: 'socket hang up' } });
    expect(message).toBeUndefined();
    expect(events.map((e) => e.type)).toContain('segment-failed');
  });

  it('a turn that completes has no error in its run-closed event', async () => {
    const { model } = modelOf(() => answering(['All', ' good.']));
    const { run, events } = await turnWith(model);
    expect(run.status).toBe('completed');
    expect(events.find((e) => e.type === 'run-closed')!.data).not.toHaveProperty('error');
  });
});
