// A model request its provider refused for now (ADR-0057): the wait (the provider's Retry-After,
// else backoff with jitter), and the segment that waits and asks again instead of failing, on
// both stores. Three 429s in a row used to end a turn within a second, every attempt spent.
import { APICallError } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnthropicStub } from '../../test/harness/anthropic-stub.js';
import { startOpenAiStub } from '../../test/harness/openai-stub.js';
import { answering } from '../../test/harness/mock-streams.js';
import { messageText, shownText, streamedText } from '../../test/harness/run-text.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { salvageReason } from '../lease/salvage.js';
import { resolveModel, type LanguageModelV3 } from '../model/index.js';
import { drainQueue } from '../queue/drain-queue.js';
import { startTurn } from '../queue/start-turn.js';
import { advanceFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { isRetryableModelError, maxRetryAfterMs, retryDelayMs, streamError } from './model-retry.js';
import { newOwner } from './runtime.js';
import { runSegment } from './run-segment.js';
import type { TurnSettings } from './settings.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

function refusal(statusCode: number, headers: Record<string, string> = {}) {
  return new APICallError({
    message: statusCode === 429 ? 'Rate limit reached' : `HTTP ${statusCode}`, url: 'http://provider.test/v1/chat',
    requestBodyValues: {}, statusCode, responseHeaders: headers,
  });
}

describe('retryDelayMs', () => {
  it('backs off from 1 s, doubling to 30 s, with jitter between half and all of it', () => {
    const error = refusal(429);
    expect([1, 2, 3, 6, 10].map((retry) => retryDelayMs(error, retry, () => 0))).toEqual([500, 1_000, 2_000, 15_000, 15_000]);
    expect([1, 2, 3, 6, 10].map((retry) => retryDelayMs(error, retry, () => 1))).toEqual([1_000, 2_000, 4_000, 30_000, 30_000]);
  });

  it('waits as long as the provider asks, up to a minute', () => {
    expect(retryDelayMs(refusal(429, { 'retry-after-ms': '1500' }), 1)).toBe(1_500);
    expect(retryDelayMs(refusal(429, { 'Retry-After': '2' }), 4)).toBe(2_000);
    expect(retryDelayMs(refusal(503, { 'retry-after': '120' }), 1)).toBe(maxRetryAfterMs);
    expect(retryDelayMs(refusal(503, { 'retry-after': new Date(Date.now() - 5_000).toUTCString() }), 1)).toBe(0);
    const inTenSeconds = retryDelayMs(refusal(503, { 'retry-after': new Date(Date.now() + 10_000).toUTCString() }), 1);
    expect(inTenSeconds).toBeGreaterThan(8_000);
    expect(inTenSeconds).toBeLessThanOrEqual(10_000);
    // Unreadable: our own backoff.
    expect(retryDelayMs(refusal(429, { 'retry-after': 'soon' }), 1, () => 1)).toBe(1_000);
    // The provider's error wrapped in another keeps its headers.
    expect(retryDelayMs(new Error('wrapped', { cause: refusal(429, { 'retry-after-ms': '700' }) }), 1)).toBe(700);
  });

  it('retries what the AI SDK marks retryable (429, 5xx, timeouts), not a bad request', () => {
    expect([408, 409, 429, 500, 503, 529].map((code) => isRetryableModelError(refusal(code)))).toEqual([true, true, true, true, true, true]);
    expect([400, 401, 404].map((code) => isRetryableModelError(refusal(code)))).toEqual([false, false, false]);
    expect(isRetryableModelError(new Error('plain'))).toBe(false);
  });
});

const answer = (text: string, extra: unknown[] = []) => answering([text], extra);

/** A model whose provider refuses the first `refusals` requests with `error`, then answers. */
function refusingModel(refusals: number, error: () => Error) {
  let calls = 0;
  const model = new MockLanguageModelV3({
    doStream: async () => {
      calls += 1;
      if (calls <= refusals) throw error();
      return answer('Here it is.');
    },
  });
  return { model, calls: () => calls };
}

async function segmentOf(model: LanguageModelV3, options: {
  text?: string; settings?: Partial<TurnSettings>; budgetMs?: number; stopSignal?: AbortSignal; during?: (runId: string) => Promise<void>;
} = {}) {
  const rt = makeRuntime(db, { model, settings: options.settings, config: { invocationBudgetMs: options.budgetMs ?? 60_000 } });
  const { runId } = await startTurn(db, { ownerId: 'alice', text: options.text ?? 'hello' });
  const startedAt = Date.now();
  const segment = runSegment(rt, { runId, owner: newOwner('retry'), stopSignal: options.stopSignal });
  await options.during?.(runId);
  const outcome = await segment;
  const tookMs = Date.now() - startedAt;
  const [run] = await db.query<{ status: string; attempts: number; last_error: { message?: string } | null }>(
    'select status, attempts, last_error from agent_kit_runs where id = $1', [runId]);
  const retries = await db.query<{ data: Record<string, unknown> }>(
    `select data from agent_kit_thread_events where run_id = $1 and type = 'model-retry' order by seq`, [runId]);
  return { runId, outcome, run: run!, retries: retries.map((r) => r.data), tookMs };
}

async function untilRetryEvent(runId: string) {
  for (let i = 0; i < 500; i++) {
    const [row] = await db.query<{ n: number }>(
      `select count(*)::int as n from agent_kit_thread_events where run_id = $1 and type = 'model-retry'`, [runId]);
    if (row!.n > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('no model-retry event');
}

describe('a segment whose model request is refused for now', () => {
  it('waits as the provider asks and asks again: the turn completes on its first attempt', async () => {
    const { model, calls } = refusingModel(3, () => refusal(429, { 'retry-after-ms': '20' }));
    const { outcome, run, retries } = await segmentOf(model);
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(run).toMatchObject({ status: 'completed', attempts: 1, last_error: null });
    expect(calls()).toBe(4);
    expect(retries).toEqual([1, 2, 3].map((retry) => ({
      stepNo: 0, retry, of: 5, delayMs: 20, error: { name: 'AI_APICallError', message: 'Rate limit reached', statusCode: 429 },
      redo: false, text: '', // nothing to drop: the retry goes on from the run's text as it is
    })));
  });

  it('fails the segment once its retries are spent, with the last refusal as the run\'s error', async () => {
    const { model, calls } = refusingModel(10, () => refusal(529, { 'retry-after-ms': '5' }));
    const { outcome, run, retries } = await segmentOf(model, { settings: { modelRetries: 2 } });
    expect(outcome).toMatchObject({ kind: 'stopped', reason: 'HTTP 529' });
    expect(run).toMatchObject({ attempts: 1, last_error: { message: 'HTTP 529' } });
    expect([calls(), retries.map((r) => r.retry)]).toEqual([3, [1, 2]]);
  });

  it('refused after part of its answer, a model that continues a prefill goes on from that text, in the same segment', async () => {
    const model = new MockLanguageModelV3({
      provider: 'anthropic.messages', // continues an assistant prefill (supportsPrefill)
      doStream: [
        answering(['Half', ' of it'], [{ type: 'error', error: refusal(529, { 'retry-after-ms': '5' }) }]),
        answering([', and the rest.']),
      ],
    });
    const { runId, outcome, run, retries } = await segmentOf(model);
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(run).toMatchObject({ status: 'completed', attempts: 1 });
    expect(retries).toEqual([{
      stepNo: 0, retry: 1, of: 5, delayMs: 5, error: { name: 'AI_APICallError', message: 'HTTP 529', statusCode: 529 },
      redo: false, text: 'Half of it',
    }]);
    // Asked again with what was streamed as the assistant's prefill; viewers got each word once.
    expect(model.doStreamCalls[1]!.prompt.at(-1)).toMatchObject({ role: 'assistant', content: [{ type: 'text', text: 'Half of it' }] });
    expect(await messageText(db, runId)).toBe('Half of it, and the rest.');
    expect(await streamedText(db, runId)).toBe('Half of it, and the rest.');
    expect(await shownText(db, runId)).toBe('Half of it, and the rest.');
  });

  // The text is cut after a space and after a line break: Anthropic refuses a prefill that ends
  // in whitespace (the stub too), so the prefill goes without it and the continuation's own
  // leading whitespace is not doubled.
  for (const [cut, first, refusal, second, whole] of [
    ["Anthropic's overloaded_error", { text: ['Hello', ' from '], error: { type: 'overloaded_error', message: 'Overloaded' } },
      { name: 'ModelStreamError', message: 'overloaded_error: Overloaded', statusCode: 529 }, [' the', ' stub.'], 'Hello from the stub.'],
    ['a connection dropped', { text: ['Hello.', '\n\n'], drop: true },
      { name: 'AI_APICallError', message: 'Failed to process successful response' }, ['\n\nThe stub.'], 'Hello.\n\nThe stub.'],
    // The AI SDK ends such a step as finished ('other'): it used to close the run completed, cut.
    ['a response ended cleanly before the message_stop', { text: ['Hello', ' from '], endEarly: true },
      { name: 'ModelStreamCutError', message: 'the model stream ended before the provider finished the step (no finish reason)' },
      [' the', ' stub.'], 'Hello from the stub.'],
  ] as const) {
    it(`${cut} in the middle of a stream (a local Messages API): asked again from the text, then completed`, async () => {
      const stub = await startAnthropicStub([first, { text: second }]);
      try {
        const model = resolveModel('anthropic:claude-stub', { ANTHROPIC_API_KEY: 'k', ANTHROPIC_BASE_URL: stub.baseURL });
        const { runId, outcome, run, retries } = await segmentOf(model, { settings: { modelRetries: 1 } });
        expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
        expect(run).toMatchObject({ status: 'completed', attempts: 1 });
        expect(retries).toMatchObject([{ retry: 1, of: 1, error: refusal }]);
        expect(stub.received).toHaveLength(2);
        const prefill = first.text.join('').trimEnd();
        expect(stub.received[1]!.messages.at(-1)).toMatchObject({ role: 'assistant', content: [{ type: 'text', text: prefill }] });
        expect(await messageText(db, runId)).toBe(whole);
        expect(await streamedText(db, runId)).toBe(whole); // what viewers were streamed, whitespace once
      } finally {
        await stub.close();
      }
    });
  }

  it("an older-spec (v2) model's finish, which never has a raw reason, is taken at its word, 'unknown' too", async () => {
    const parts = [
      { type: 'stream-start', warnings: [] }, { type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'From v2.' },
      { type: 'text-end', id: 't' }, { type: 'finish', finishReason: 'unknown', usage: { inputTokens: 1, outputTokens: 2, totalTokens: 3 } },
    ];
    const v2 = {
      specificationVersion: 'v2', provider: 'community', modelId: 'old', supportedUrls: {},
      doGenerate: () => Promise.reject(new Error('stream only')),
      doStream: async () => ({ stream: new ReadableStream({ start(c) { for (const p of parts) c.enqueue(p); c.close(); } }) }),
    } as unknown as LanguageModelV3;
    const { runId, outcome, retries } = await segmentOf(v2);
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(retries).toEqual([]);
    expect(await messageText(db, runId)).toBe('From v2.');
  });

  it("OpenAI's server_error in its stream, before any text (a local chat-completions API): asked again, then completed", async () => {
    const stub = await startOpenAiStub();
    try {
      const model = resolveModel('openai-compatible:stub-model', { OPENAI_BASE_URL: stub.baseURL, OPENAI_API_KEY: 'k' });
      const { outcome, run, retries } = await segmentOf(model, { text: 'a server error, then hello', settings: { modelRetries: 1 } });
      expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
      expect(run).toMatchObject({ status: 'completed', attempts: 1 });
      expect(retries).toMatchObject([{ retry: 1, error: {
        name: 'ModelStreamError', message: 'server_error: The server had an error while processing your request.', statusCode: 500 } }]);
      expect(stub.received).toHaveLength(2);
    } finally {
      await stub.close();
    }
  });

  it('a stream error part says what the provider sent, and is retryable only for an overload, a rate limit or a server error', () => {
    expect(streamError({ type: 'overloaded_error', message: 'Overloaded' })).toMatchObject({
      name: 'ModelStreamError', message: 'overloaded_error: Overloaded', statusCode: 529, isRetryable: true });
    expect(streamError({ type: 'invalid_request_error', message: 'prompt is too long' })).toMatchObject({
      message: 'invalid_request_error: prompt is too long', isRetryable: false });
    expect(streamError({ message: 'slow down', type: 'tokens', code: 'rate_limit_exceeded' })).toMatchObject({ statusCode: 429, isRetryable: true });
    expect(streamError({ type: 'constructor', message: 'x' })).toMatchObject({ isRetryable: false });
    // The Responses API's error event, as @ai-sdk/openai passes it on: named by its code, and
    // retryable as the provider says, whatever the code.
    expect(streamError({ type: 'error', code: 'server_error', message: 'oops', statusCode: 500, isRetryable: true })).toMatchObject({
      message: 'server_error: oops', type: 'server_error', statusCode: 500, isRetryable: true });
    expect(streamError({ type: 'error', code: 'engine_warming', message: 'later', statusCode: 503, isRetryable: true })).toMatchObject({
      message: 'engine_warming: later', statusCode: 503, isRetryable: true });
    expect(streamError({ type: 'error', code: 'server_error', message: 'no', isRetryable: false })).toMatchObject({ isRetryable: false });
    expect(streamError('socket hang up').message).toBe('"socket hang up"');
    const error = new Error('kept');
    expect(streamError(error)).toBe(error);
  });

  it('refused after part of its answer, a model without prefill starts the step again: viewers drop the text, then get the answer', async () => {
    const model = new MockLanguageModelV3({
      doStream: [answer('Half', [{ type: 'error', error: refusal(503) }]), answer('The whole answer.')],
    });
    const { runId, outcome, run, retries } = await segmentOf(model);
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(run).toMatchObject({ status: 'completed', attempts: 1, last_error: null });
    expect(retries).toMatchObject([{ stepNo: 0, retry: 1, redo: true, text: '' }]);
    expect(model.doStreamCalls[1]!.prompt.at(-1)).toMatchObject({ role: 'user' }); // no prefill
    expect(await messageText(db, runId)).toBe('The whole answer.');
    expect(await shownText(db, runId)).toBe('The whole answer.');
  });

  it('refused after a tool call, the step starts again, prefill or not: the refused call never runs', async () => {
    const model = new MockLanguageModelV3({
      provider: 'anthropic.messages',
      doStream: [answer('Let me look', [{ type: 'tool-call', toolCallId: 'c1', toolName: 'record_effect', input: '{}' },
        { type: 'error', error: refusal(503) }]), answer('No need.')],
    });
    const { runId, outcome, retries } = await segmentOf(model);
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(retries).toMatchObject([{ retry: 1, redo: true, text: '' }]);
    expect(model.doStreamCalls[1]!.prompt.at(-1)).toMatchObject({ role: 'user' });
    expect(await messageText(db, runId)).toBe('No need.');
    expect(await shownText(db, runId)).toBe('No need.');
    const [effects] = await db.query<{ n: number }>('select count(*)::int as n from agent_kit_effects where run_id = $1', [runId]);
    expect(effects!.n).toBe(0);
  });

  it('a later step started again keeps the steps before it: the text goes back to what they wrote', async () => {
    const model = new MockLanguageModelV3({
      doStream: [
        answer('Noting. ', [{ type: 'tool-call', toolCallId: 'c1', toolName: 'record_effect', input: '{"note":"n"}' }]),
        answer('Half', [{ type: 'error', error: refusal(529, { 'retry-after-ms': '5' }) }]),
        answer('Noted.'),
      ],
    });
    const { runId, outcome, retries } = await segmentOf(model);
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(retries).toMatchObject([{ stepNo: 2, retry: 1, redo: true, text: 'Noting. ' }]);
    expect(await messageText(db, runId)).toBe('Noting. Noted.');
    expect(await shownText(db, runId)).toBe('Noting. Noted.');
  });

  it("OpenAI's server_error in the middle of its reply (a local chat-completions API): the step starts again, then completes", async () => {
    const stub = await startOpenAiStub();
    try {
      const model = resolveModel('openai-compatible:stub-model', { OPENAI_BASE_URL: stub.baseURL, OPENAI_API_KEY: 'k' });
      const { runId, outcome, run, retries } = await segmentOf(model, { text: 'a server error mid-reply', settings: { modelRetries: 1 } });
      expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
      expect(run).toMatchObject({ status: 'completed', attempts: 1 });
      expect(retries).toMatchObject([{ redo: true, text: '', error: { name: 'ModelStreamError', statusCode: 500 } }]);
      expect(stub.received).toHaveLength(2);
      expect(await messageText(db, runId)).toBe('Hello from stub');
      expect(await shownText(db, runId)).toBe('Hello from stub');
    } finally {
      await stub.close();
    }
  });

  it('parks the run, due when the provider said, when the wait does not fit in the segment: no process sleeps through it', async () => {
    const { model, calls } = refusingModel(1, () => refusal(429, { 'retry-after': '30' }));
    const { runId, outcome, run, retries, tookMs } = await segmentOf(model, { budgetMs: 20_000 });
    expect(outcome).toMatchObject({ kind: 'parked', status: 'queued' });
    expect(run).toMatchObject({ status: 'queued', attempts: 1 }); // the attempt stays spent
    expect(calls()).toBe(1);
    expect(tookMs).toBeLessThan(20_000);
    expect(retries).toMatchObject([{ retry: 1, delayMs: 30_000, redo: false, text: '', dueAt: expect.any(String) }]);
    const [job] = await db.query<{ due_in_s: number }>(
      `select extract(epoch from due_at - agent_kit_now())::float8 as due_in_s from agent_kit_jobs where run_id = $1`, [runId]);
    expect(job!.due_in_s).toBeGreaterThan(25);
    expect(job!.due_in_s).toBeLessThanOrEqual(30);
    const events = await db.query<{ type: string }>(`select type from agent_kit_thread_events where run_id = $1 order by seq`, [runId]);
    expect(events.map((e) => e.type).slice(-2)).toEqual(['model-retry', 'run-parked']);
  });

  it('a provider that refuses for ever, each wait too long for a segment, ends the run after the crash budget', async () => {
    const { model, calls } = refusingModel(100, () => refusal(529, { 'retry-after': '30' }));
    const rt = makeRuntime(db, { model, config: { invocationBudgetMs: 20_000, maxRunAttempts: 3 } });
    const { runId } = await startTurn(db, { ownerId: 'alice', text: 'always busy' });
    const outcomes = [];
    for (let i = 0; i < 4; i++) {
      outcomes.push((await runSegment(rt, { runId, owner: newOwner('retry') })).kind);
      // Asked again before the provider's time (a retried request), the run is left to its job.
      const early = await runSegment(rt, { runId, owner: newOwner('early') });
      outcomes.push(early.kind === 'not-claimed' ? early.reason : early.kind);
      await advanceFakeNow(db, 30_000);
    }
    expect(outcomes).toEqual(['parked', 'not-due', 'parked', 'not-due', 'parked', 'not-due', 'closed', 'closed']);
    expect(calls()).toBe(3);
    const [run] = await db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [runId]);
    expect(run!.status).toBe('aborted'); // salvaged, as a crash loop is
    const [salvaged] = await db.query<{ reason: string }>(
      `select data->>'reason' as reason from agent_kit_thread_events where run_id = $1 and type = 'run-salvaged'`, [runId]);
    expect(salvaged!.reason).toBe(salvageReason(3, 3)); // three refusals in a row, not the claim that gave up
    expect(salvaged!.reason).toMatch(/3 times in a row/);
  });

  it("after an operator's release during the wait, a drain leaves the run to the provider's time, its job moved there", async () => {
    const own = await openTestDb(); // a queue of this run alone
    try {
      const { model, calls } = refusingModel(1, () => refusal(429, { 'retry-after': '30' }));
      const rt = makeRuntime(own, { model, config: { invocationBudgetMs: 20_000 } });
      const { runId } = await startTurn(own, { ownerId: 'alice', text: 'held, then released' });
      expect(await runSegment(rt, { runId, owner: newOwner('retry') })).toMatchObject({ kind: 'parked', status: 'queued' });
      await own.query(`select agent_kit_takeover_run($1, 'op')`, [runId]);
      await own.query('select agent_kit_release_run($1)', [runId]); // its job is due now
      const early = await drainQueue(rt, { budgetMs: 4_000 });
      expect(calls()).toBe(1);
      expect(early).toMatchObject({ claimed: 0, notClaimed: 1, rescheduled: 1, errors: 0 });
      const [job] = await own.query<{ due_in_s: number }>(
        'select extract(epoch from due_at - agent_kit_now())::float8 as due_in_s from agent_kit_jobs where run_id = $1', [runId]);
      expect(job!.due_in_s).toBeGreaterThan(20);
      expect(await drainQueue(rt, { budgetMs: 4_000 })).toMatchObject({ taken: 0 }); // nothing due: no spin
      await advanceFakeNow(own, 30_000);
      expect(await drainQueue(rt, { budgetMs: 4_000 })).toMatchObject({ claimed: 1, closed: 1 });
      expect(calls()).toBe(2);
      expect(await messageText(own, runId)).toBe('Here it is.');
    } finally {
      await own.close();
    }
  });

  it('a cancel requested while it waits closes the run, without waiting out the delay', async () => {
    const { model, calls } = refusingModel(1, () => refusal(429, { 'retry-after': '30' }));
    const { outcome, run, tookMs } = await segmentOf(model, {
      during: async (runId) => {
        await untilRetryEvent(runId);
        await db.query('select agent_kit_request_cancel($1)', [runId]);
      },
    });
    expect(outcome).toMatchObject({ kind: 'closed', status: 'aborted' });
    expect(run.status).toBe('aborted');
    expect(calls()).toBe(1);
    expect(tookMs).toBeLessThan(15_000); // read within a second of the request, not after 30 s
  });

  it('a stop signal while it waits parks the run for the next segment, its attempt given back', async () => {
    const { model, calls } = refusingModel(1, () => refusal(429, { 'retry-after': '30' }));
    const stop = new AbortController();
    const { outcome, run, tookMs } = await segmentOf(model, {
      stopSignal: stop.signal,
      during: async (runId) => {
        await untilRetryEvent(runId);
        stop.abort();
      },
    });
    expect(outcome).toMatchObject({ kind: 'parked', status: 'queued' });
    expect(run).toMatchObject({ status: 'queued', attempts: 0 });
    expect(calls()).toBe(1);
    expect(tookMs).toBeLessThan(15_000);
  });
});
