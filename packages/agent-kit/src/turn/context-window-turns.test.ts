// A turn whose prompt is past the model's context window (ADR-0067), run end to end: against the
// OpenAI-compatible and Anthropic stubs, which refuse a prompt longer than the window they were
// given with each API's real text, and against mock models. The step is asked again at once with
// the newest earlier turns that fit, then without the turn's answered tool results, then with its
// newest result cut; a turn too long without any of them, or with the setting off, fails at once
// as before (ADR-0066). The rules themselves are tested in context-window.test.ts.
import { APICallError, simulateReadableStream } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startAnthropicStub } from '../../test/harness/anthropic-stub.js';
import { answering, calling, mockUsage as answeringUsage } from '../../test/harness/mock-streams.js';
import { startOpenAiStub } from '../../test/harness/openai-stub.js';
import { threadOfTurns } from '../../test/harness/long-thread.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { effectsFile, makeRuntime } from '../../test/harness/turn-kit.js';
import { resolveModel, type AgentTool, type LanguageModelV3 } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { minResultChars } from './context-window.js';
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

const rejection = (statusCode: number, message: string) => new APICallError({
  message, url: 'http://provider.test/v1/chat', requestBodyValues: {}, statusCode,
});

const threadOf = (turns: number) => threadOfTurns(db, turns, 'carol');

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
