// A thread whose history outgrew the model's context window (ADR-0067): the provider rejects the
// prompt, and the step is asked again at once with fewer earlier turns, the oldest dropped first,
// the current turn never cut; by the refusal's token counts when it gives them, else by half. A
// turn that is too long alone, or with the setting off, fails at once as before (ADR-0066).
import { APICallError } from 'ai';
import { simulateReadableStream } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import type { ModelMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnthropicStub } from '../../test/harness/anthropic-stub.js';
import { answering, calling, mockUsage as answeringUsage } from '../../test/harness/mock-streams.js';
import { startOpenAiStub } from '../../test/harness/openai-stub.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { effectsFile, makeRuntime } from '../../test/harness/turn-kit.js';
import { resolveModel, type LanguageModelV3 } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { z } from 'zod';
import type { AgentTool } from '../model/index.js';
import {
  capResultsToFit, cutToFit, droppableResults, dropResultsToFit, earlierTurns, keepEarlierTurns, minResultChars, pastContextWindow,
  tokensOverLimit,
} from './context-window.js';
import { buildMessages, type Step } from './journal.js';
import { isRetryableModelError, ModelStreamError, refusedForGood, streamError } from './model-retry.js';
import { runSegment } from './run-segment.js';
import { newOwner } from './runtime.js';
import type { TurnSettings } from './settings.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

const rejection = (statusCode: number, message: string, data?: unknown) => new APICallError({
  message, url: 'http://provider.test/v1/chat', requestBodyValues: {}, statusCode, ...(data === undefined ? {} : { data }),
});

const history = (turns: number): ModelMessage[] => [
  ...Array.from({ length: turns }, (_, i): ModelMessage[] => [
    { role: 'user', content: `q${i + 1}` }, { role: 'assistant', content: `a${i + 1}` },
  ]).flat(),
  { role: 'user', content: 'now' },
];

describe('pastContextWindow', () => {
  it('knows each provider\'s refusal of a prompt too long, and nothing else', () => {
    const openAi = rejection(400, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens.",
      { error: { code: 'context_length_exceeded' } });
    const byCodeOnly = rejection(400, 'Your input exceeds the limit.', { error: { code: 'context_length_exceeded' } });
    const words = [
      'prompt is too long: 208310 tokens > 200000 maximum', // Anthropic
      'The input token count (1234567) exceeds the maximum number of tokens allowed (1048576).', // Google
      'Prompt contains 40000 tokens, too large for model with 32768 maximum context length', // Mistral
      "This model's maximum prompt length is 131072 but the request contains 150000 tokens.", // xAI
      'Input is too long for requested model.', // Bedrock
      'the request exceeds the available context size, try increasing it', // llama.cpp
      'litellm.ContextWindowExceededError: too many tokens', // LiteLLM
    ];
    expect([openAi, byCodeOnly, ...words.map((w) => rejection(400, w)), rejection(413, 'Request Entity Too Large')]
      .every(pastContextWindow)).toBe(true);
    expect(pastContextWindow(new ModelStreamError('context_length_exceeded: x', 'context_length_exceeded', 400, false))).toBe(true);
    // As OpenAI's Responses API streams it: a 400, not retryable, so not asked again as is (ADR-0066).
    const streamed = streamError({ type: 'error', code: 'context_length_exceeded', message: 'Your input exceeds the context window.' });
    expect([pastContextWindow(streamed), refusedForGood(streamed), isRetryableModelError(streamed)]).toEqual([true, true, false]);
    // A rate limit or a server error that mentions the context, a bad key, no status: not one.
    expect(pastContextWindow(rejection(429, 'Rate limit reached for tokens per minute; context length 8192'))).toBe(false);
    expect(pastContextWindow(rejection(500, 'prompt is too long to process right now'))).toBe(false);
    expect(pastContextWindow(rejection(401, 'Incorrect API key provided'))).toBe(false);
    expect(pastContextWindow(new Error('prompt is too long'))).toBe(false);
    expect(pastContextWindow(null)).toBe(false);
  });

  it('reads the prompt\'s tokens and the limit when the refusal gives both', () => {
    expect(tokensOverLimit(rejection(400, "maximum context length is 8,192 tokens. However, your messages resulted in 9,120 tokens")))
      .toEqual({ used: 9120, limit: 8192 });
    expect(tokensOverLimit(rejection(400, 'prompt is too long: 208310 tokens > 200000 maximum'))).toEqual({ used: 208310, limit: 200000 });
    expect(tokensOverLimit(rejection(400,
      "maximum context length is 4096 tokens. However, you requested 4500 tokens (4000 in the messages, 500 in the completion)")))
      .toEqual({ used: 4500, limit: 4096 });
    expect(tokensOverLimit(rejection(400, 'Input is too long for requested model.'))).toBeUndefined();
    expect(tokensOverLimit(rejection(400, 'too long: 9000 tokens'))).toBeUndefined();
  });
});

describe('cutting the history to fit', () => {
  it('counts and keeps earlier turns at user messages, the current one always kept', () => {
    expect(earlierTurns(history(3))).toBe(3);
    expect(earlierTurns([{ role: 'user', content: 'now' }])).toBe(0);
    expect(keepEarlierTurns(history(3), 1).map((m) => m.content)).toEqual(['q3', 'a3', 'now']);
    expect(keepEarlierTurns(history(3), 0).map((m) => m.content)).toEqual(['now']);
    expect(keepEarlierTurns(history(3), 5)).toEqual(history(3));
  });

  it('drops the share the refusal says is over, and a twentieth more; half without numbers; undefined with none left', () => {
    const h = history(10); // 705 characters of JSON, each earlier turn 68 or 70
    const chars = JSON.stringify(h).length;
    // 30 % of the prompt over the limit (+5 %): 247 characters, so 4 of the 10 turns go.
    const cut = cutToFit(h, chars, rejection(400, 'prompt is too long: 1000 tokens > 700 maximum'))!;
    expect([cut.kept, cut.of]).toEqual([6, 10]);
    expect(cut.history[0]).toEqual({ role: 'user', content: 'q5' });
    // Barely over: still one turn fewer.
    expect(cutToFit(h, chars, rejection(400, 'prompt is too long: 1001 tokens > 1000 maximum'))!.kept).toBe(9);
    expect(cutToFit(h, chars, rejection(400, 'Input is too long for requested model.'))!.kept).toBe(5);
    expect(cutToFit(history(1), 100, rejection(400, 'Input is too long for requested model.'))!.kept).toBe(0);
    expect(cutToFit(history(0), 100, rejection(400, 'Input is too long for requested model.'))).toBeUndefined();
  });
});

/** A journal's model step calling fetch_page under `callIds`, and a tool step with its result. */
const model = (stepNo: number, callIds: string[]): Step => ({
  kind: 'model', stepNo, text: '', toolCalls: callIds.map((id) => ({ toolCallId: id, toolName: 'fetch_page', input: {} })),
} as Step);
const tool = (stepNo: number, id: string, output: unknown): Step => ({
  kind: 'tool', stepNo, toolCallId: id, toolName: 'fetch_page', outcome: 'completed', output,
} as Step);

describe('leaving out tool results to fit', () => {
  const journal = [model(0, ['a']), tool(1, 'a', 'A'.repeat(100)), model(2, ['b', 'c']), tool(3, 'b', 'B'), tool(4, 'c', 'C')];

  it('may leave out only the results the model has answered, oldest first, and says so in their place', () => {
    expect(droppableResults(journal).map((step) => step.stepNo)).toEqual([1]);
    expect(droppableResults([...journal, model(5, ['d']), tool(6, 'd', 'D')]).map((step) => step.stepNo)).toEqual([1, 3, 4]);
    expect(droppableResults([model(0, ['a']), tool(1, 'a', 'A')])).toEqual([]);
    const results = (n: number) => buildMessages([], journal, { droppedResults: n })
      .filter((m) => m.role === 'tool').map((m) => (m.content as { output: unknown }[])[0]!.output);
    expect(results(0)[0]).toEqual({ type: 'json', value: 'A'.repeat(100) });
    expect(results(1)).toEqual([
      { type: 'text', value: "[This result of fetch_page (102 characters) was left out: the conversation is past the model's context window.]" },
      { type: 'json', value: 'B' }, { type: 'json', value: 'C' },
    ]);
  });

  it('drops more each time, by the same rule as earlier turns, until none is left to drop', () => {
    const long = [...journal, model(5, ['d']), tool(6, 'd', 'D')];
    const refusal = rejection(400, 'Input is too long for requested model.');
    expect(dropResultsToFit(long, 0, 500, refusal)).toBe(2); // half of 3, rounded up
    expect(dropResultsToFit(long, 2, 500, refusal)).toBe(3);
    expect(dropResultsToFit(long, 3, 500, refusal)).toBeUndefined();
    // By the counts: 102 characters of 500 cover the 10 % over and the twentieth more.
    expect(dropResultsToFit(long, 0, 500, rejection(400, 'prompt is too long: 1100 tokens > 990 maximum'))).toBe(1);
  });
});

describe('cutting the newest tool results to fit', () => {
  const refusal = rejection(400, 'Input is too long for requested model.');

  it('cuts the longest first, to the largest length that sheds what the refusal asks', () => {
    const journal = [model(0, ['a', 'b']), tool(1, 'a', 'a'.repeat(1_000)), tool(2, 'b', 'b'.repeat(9_000))];
    // Without counts, half of what they hold: of 10,000 characters, the short one whole and the long one 4,000.
    expect(capResultsToFit(journal, undefined, 12_000, refusal)).toBe(4_000);
    expect(capResultsToFit(journal, 4_000, 12_000, refusal)).toBe(1_500); // 2,500 of 5,000
    expect(capResultsToFit(journal, 1_500, 12_000, refusal)).toBe(625); // 1,250 of 2,500: both cut
    expect(capResultsToFit(journal, 625, 12_000, refusal)).toBeUndefined(); // would go under minResultChars
    expect(minResultChars).toBe(500);
    // By the counts: 20 % over (+5 %) of a 12,000-character prompt is 3,000 characters.
    expect(capResultsToFit(journal, undefined, 12_000, rejection(400, 'prompt is too long: 1000 tokens > 800 maximum'))).toBe(6_000);
    // Nothing to cut: no result after the last model step, or none longer than the cut.
    expect(capResultsToFit([...journal, model(3, [])], undefined, 12_000, refusal)).toBeUndefined();
  });

  it('sends a cut result as its head and a note; the results within the cap as they are', () => {
    const journal = [model(0, ['a', 'b']), tool(1, 'a', 'short'), tool(2, 'b', { page: 'x'.repeat(800) })];
    const outputs = buildMessages([], journal, { resultCap: 600 })
      .filter((m) => m.role === 'tool').map((m) => (m.content as { output: { type: string; value: unknown } }[])[0]!.output);
    expect(outputs[0]).toEqual({ type: 'json', value: 'short' });
    expect(outputs[1]!.type).toBe('text');
    expect(outputs[1]!.value).toBe(`${JSON.stringify({ page: 'x'.repeat(800) }).slice(0, 600)}\n[This result of fetch_page was cut to ` +
      "its first 600 of 811 characters: the conversation is past the model's context window.]");
  });
});

const question = (i: number) => `question ${i}: ${'q'.repeat(200)}`;
const answer = (i: number) => `answer ${i}: ${'a'.repeat(200)}`;

/** A thread of `turns` closed turns, each a 212-character question and answer. */
async function threadOf(turns: number): Promise<string> {
  let threadId: string | undefined;
  for (let i = 1; i <= turns; i++) {
    const started = await startTurn(db, { ...(threadId ? { threadId } : {}), ownerId: 'carol', text: question(i) });
    threadId = started.threadId;
    const model = new MockLanguageModelV3({ doStream: async () => answering([answer(i)]) });
    const outcome = await runSegment(makeRuntime(db, { model }), { runId: started.runId, owner: newOwner('earlier') });
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
  }
  return threadId!;
}

/** The next turn of `threadId` on `model`, and what it left. */
async function nextTurn(threadId: string, model: LanguageModelV3, text: string, settings: Partial<TurnSettings> = {}) {
  const { runId } = await startTurn(db, { threadId, ownerId: 'carol', text });
  const outcome = await runSegment(makeRuntime(db, { model, settings }), { runId, owner: newOwner('fit') });
  const [run] = await db.query<{ status: string; attempts: number }>('select status, attempts from agent_kit_runs where id = $1', [runId]);
  const [message] = await db.query<{ content: Record<string, any> }>(
    `select content from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId]);
  const events = await db.query<{ type: string; data: Record<string, any> }>(
    'select type, data from agent_kit_thread_events where run_id = $1 order by seq', [runId]);
  const cuts = events.filter((e) => e.type === 'model-retry').map((e) => e.data);
  return { outcome, run: run!, message: message?.content, events, cuts };
}

/** The texts of the user messages a chat-completions request carried. */
const userTexts = (messages: { role: string; content: unknown }[]) =>
  messages.filter((m) => m.role === 'user').map((m) => JSON.stringify(m.content));

describe('a turn whose thread is past the model\'s context window', () => {
  it('on OpenAI-compatible: asked again at once with the newest turns that fit, and completes on its first attempt', async () => {
    const threadId = await threadOf(12);
    const stub = await startOpenAiStub({ contextChars: 2_000 });
    try {
      const model = resolveModel('openai-compatible:stub-model', { OPENAI_BASE_URL: stub.baseURL, OPENAI_API_KEY: 'k' });
      const { outcome, run, message, cuts } = await nextTurn(threadId, model, 'and now?');
      expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
      expect(run).toMatchObject({ status: 'completed', attempts: 1 });
      expect(message!.text).toBe('Hello from stub');
      // One refusal: its counts said how much to drop, and what was left fit.
      expect(stub.received).toHaveLength(2);
      const [refused, fitted] = stub.received.map((r) => r.body.messages);
      expect(userTexts(refused!)).toHaveLength(13);
      const kept = userTexts(fitted!);
      expect(JSON.stringify(fitted).length).toBeLessThanOrEqual(2_000);
      expect(kept.at(-1)).toBe(JSON.stringify('and now?'));
      expect(kept.slice(0, -1)).toEqual(userTexts(refused!).slice(13 - kept.length, -1)); // the newest, in order
      expect(fitted![0]!.role).toBe('user');
      expect(cuts).toEqual([expect.objectContaining({
        stepNo: 0, delayMs: 0, earlierTurns: { kept: kept.length - 1, of: 12 }, text: '',
        error: expect.objectContaining({ statusCode: 400 }),
      })]);
      expect(kept.length - 1).toBeGreaterThan(0);
    } finally {
      await stub.close();
    }
  });

  it('on Anthropic: "prompt is too long" is read the same way', async () => {
    const threadId = await threadOf(12);
    const stub = await startAnthropicStub([{ text: ['Fits', ' now.'] }], { contextChars: 2_500 });
    try {
      const model = resolveModel('anthropic:claude-stub', { ANTHROPIC_API_KEY: 'k', ANTHROPIC_BASE_URL: stub.baseURL });
      const { outcome, message, cuts } = await nextTurn(threadId, model, 'and now?');
      expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
      expect(message!.text).toBe('Fits now.');
      expect(stub.received).toHaveLength(2);
      const fitted = stub.received[1]!.messages;
      expect(JSON.stringify(fitted).length).toBeLessThanOrEqual(2_500);
      expect(fitted[0]!.role).toBe('user');
      expect(cuts).toHaveLength(1);
      expect(cuts[0]!.earlierTurns.of).toBe(12);
    } finally {
      await stub.close();
    }
  });

  /** A model that refuses, without numbers, any prompt with more than `most` earlier questions. */
  function refusingPast(most: number | null, then = () => answering(['Fine.'])) {
    const prompts: string[] = [];
    const model = new MockLanguageModelV3({
      doStream: async ({ prompt }) => {
        const text = JSON.stringify(prompt);
        prompts.push(text);
        if (most === null || (text.match(/question \d+:/g) ?? []).length > most) throw rejection(400, 'Input is too long for requested model.');
        return then();
      },
    });
    return { model, prompts };
  }

  it('without counts in the refusal: half the earlier turns each time, until one fits', async () => {
    const threadId = await threadOf(8);
    const { model, prompts } = refusingPast(2);
    const { outcome, run, cuts } = await nextTurn(threadId, model, 'and now?');
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(run.attempts).toBe(1);
    expect(cuts.map((c) => c.earlierTurns)).toEqual([{ kept: 4, of: 8 }, { kept: 2, of: 8 }]);
    expect(prompts).toHaveLength(3);
    expect(prompts[2]).toContain('question 7:');
    expect(prompts[2]).not.toContain('question 6:');
  });

  it('a turn too long on its own fails at once with the refusal, once no earlier turn is left', async () => {
    const threadId = await threadOf(4);
    const { model, prompts } = refusingPast(null);
    const { outcome, run, message, cuts, events } = await nextTurn(threadId, model, 'and now?');
    expect(outcome).toMatchObject({ kind: 'closed', status: 'failed' });
    expect(run).toMatchObject({ status: 'failed', attempts: 1 });
    expect(cuts.map((c) => c.earlierTurns.kept)).toEqual([2, 1, 0]);
    expect(prompts).toHaveLength(4);
    expect(message!.error).toMatchObject({ message: 'Input is too long for requested model.', statusCode: 400 });
    expect(events.at(-1)!.type).toBe('run-closed');
  });

  it('with fitContextWindow off, fails at once as before', async () => {
    const threadId = await threadOf(2);
    const { model, prompts } = refusingPast(0);
    const { outcome, cuts } = await nextTurn(threadId, model, 'and now?', { fitContextWindow: false });
    expect(outcome).toMatchObject({ kind: 'closed', status: 'failed' });
    expect(cuts).toEqual([]);
    expect(prompts).toHaveLength(1);
  });

  it('mid-turn, after a tool ran: the step after it is cut to fit, the tool\'s call and result kept, the tool run once', async () => {
    const effects = effectsFile();
    try {
      const threadId = await threadOf(6);
      let calls = 0;
      const prompts: string[] = [];
      // The first step fits with every earlier turn; its long tool call puts the next past the window.
      const model = new MockLanguageModelV3({
        doStream: async ({ prompt }) => {
          const text = JSON.stringify(prompt);
          prompts.push(text);
          if (calls++ === 0) return calling('record_effect', { note: 'n'.repeat(1_500) });
          if (text.length > 3_500) throw rejection(400, `prompt is too long: ${Math.ceil(text.length / 4)} tokens > 875 maximum`);
          return answering(['Recorded.']);
        },
      });
      const { outcome, message, cuts } = await nextTurn(threadId, model, 'record it');
      expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
      expect(message!.text).toBe('Recorded.');
      expect(effects.lines()).toHaveLength(1);
      expect(cuts).toEqual([expect.objectContaining({ stepNo: 2, earlierTurns: expect.objectContaining({ of: 6 }) })]);
      const last = prompts.at(-1)!;
      expect(last).toContain('n'.repeat(1_500)); // the call
      expect(last).toContain('tool-result');
      expect(last).toContain('record it');
      expect(last).not.toContain('question 1:');
    } finally {
      effects.restore();
    }
  });

  it('a turn too long once no earlier turn is left: its answered tool results go, oldest first, the newest kept', async () => {
    const threadId = await threadOf(2);
    const fetchPage: AgentTool<{ url: string }, string> = {
      name: 'fetch_page', description: 'Fetch a page.', inputSchema: z.object({ url: z.string() }),
      execute: async ({ url }) => `${url}: ${'p'.repeat(2_000)}`,
    };
    const fetching = (id: string, url: string) => ({ stream: simulateReadableStream({ chunks: [
      { type: 'tool-call', toolCallId: id, toolName: 'fetch_page', input: JSON.stringify({ url }) },
      { type: 'finish', finishReason: { unified: 'tool-calls', raw: undefined }, usage: answeringUsage },
    ] as never[] }) }) as never;
    const prompts: string[] = [];
    const model = new MockLanguageModelV3({
      doStream: async ({ prompt }) => {
        const text = JSON.stringify(prompt);
        prompts.push(text);
        if (text.length > 3_500) throw rejection(400, `prompt is too long: ${Math.ceil(text.length / 4)} tokens > 875 maximum`);
        const fetched = (text.match(/: p{2000}/g) ?? []).length + (text.match(/was left out/g) ?? []).length;
        return fetched === 0 ? fetching('call-a', 'first') : fetched === 1 ? fetching('call-b', 'second') : answering(['Read both.']);
      },
    });
    const { runId } = await startTurn(db, { threadId, ownerId: 'carol', text: 'read two pages' });
    const outcome = await runSegment(makeRuntime(db, { model, tools: { fetch_page: fetchPage } }), { runId, owner: newOwner('fit') });
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    const events = await db.query<{ type: string; data: Record<string, any> }>(
      `select type, data from agent_kit_thread_events where run_id = $1 and type = 'model-retry' order by seq`, [runId]);
    // The earlier turns first (both, by the counts), then the first page's result.
    expect(events.map((e) => e.data.earlierTurns ?? e.data.toolResults)).toEqual([{ kept: 0, of: 2 }, { dropped: 1, of: 1 }]);
    const last = prompts.at(-1)!;
    expect(last).not.toContain('first: ppp');
    expect(last).toContain('This result of fetch_page');
    expect(last).toContain(`second: ${'p'.repeat(2_000)}`); // the newest, which the step is asked about
    expect(last).not.toContain('question 1:');
    expect(prompts).toHaveLength(5);
  });

  it('a tool result too long for the model: the newest result is cut to fit, the journal keeps it whole', async () => {
    const fetchPage: AgentTool<{ url: string }, string> = {
      name: 'fetch_page', description: 'Fetch a page.', inputSchema: z.object({ url: z.string() }),
      execute: async () => 'p'.repeat(6_000),
    };
    const prompts: string[] = [];
    const model = new MockLanguageModelV3({
      doStream: async ({ prompt }) => {
        const text = JSON.stringify(prompt);
        prompts.push(text);
        if (prompts.length === 1) return calling('fetch_page', { url: 'big' });
        if (text.length > 3_500) throw rejection(400, `prompt is too long: ${Math.ceil(text.length / 4)} tokens > 875 maximum`);
        return answering(['Read the start of it.']);
      },
    });
    const { runId } = await startTurn(db, { ownerId: 'carol', text: 'read a big page' });
    const outcome = await runSegment(makeRuntime(db, { model, tools: { fetch_page: fetchPage } }), { runId, owner: newOwner('fit') });
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    const retries = await db.query<{ data: Record<string, any> }>(
      `select data from agent_kit_thread_events where run_id = $1 and type = 'model-retry' order by seq`, [runId]);
    expect(retries).toHaveLength(1);
    const { cutTo } = retries[0]!.data.toolResults;
    expect(cutTo).toBeGreaterThanOrEqual(minResultChars);
    expect(cutTo).toBeLessThan(6_000);
    expect(prompts).toHaveLength(3);
    expect(prompts[2]).toContain(`was cut to its first ${cutTo} of 6000 characters`);
    const [step] = await db.query<{ data: { output: string } }>(
      `select data from agent_kit_steps where run_id = $1 and kind = 'tool'`, [runId]);
    expect(step!.data.output).toHaveLength(6_000);
  });
});
