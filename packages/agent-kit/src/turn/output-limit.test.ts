// A reply cut at the model's output limit (ADR-0068): a model that continues a prefill (Anthropic,
// against a local Messages API that stops with `max_tokens`) is asked to go on from the reply's
// text, up to `continueAtOutputLimit` requests more, and the turn's one message is the whole
// reply, its usage the sum of the requests. A model that cannot (OpenAI-compatible) ends the
// reply where the limit cut it, and its step-finished event says so, as the continued one does
// when its continuations run out. A step with reasoning is not continued.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnthropicStub, type AnthropicReply } from '../../test/harness/anthropic-stub.js';
import { startOpenAiStub } from '../../test/harness/openai-stub.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { formatShowCommand } from '../cli/commands/show.js';
import { addUsage } from '../event-log/token-usage.js';
import { resolveModel, type LanguageModelV3 } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
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

async function turnOn(model: LanguageModelV3, text: string, settings: Partial<TurnSettings> = {}) {
  const { runId } = await startTurn(db, { ownerId: 'dana', text });
  const outcome = await runSegment(makeRuntime(db, { model, settings }), { runId, owner: newOwner('limit') });
  const [message] = await db.query<{ text: string; partial: boolean }>(
    `select content->>'text' as text, partial from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId]);
  const steps = await db.query<{ data: Record<string, any> }>(
    `select data from agent_kit_steps where run_id = $1 and kind = 'model' order by step_no`, [runId]);
  const events = await db.query<{ type: string; data: Record<string, any> }>(
    'select type, data from agent_kit_thread_events where run_id = $1 order by seq', [runId]);
  const deltas = events.filter((e) => e.type === 'text-delta').map((e) => e.data.text as string).join('');
  return { runId, outcome, message: message!, steps: steps.map((s) => s.data), events, deltas };
}

async function onAnthropic(replies: AnthropicReply[], settings: Partial<TurnSettings> = {}) {
  const stub = await startAnthropicStub(replies);
  try {
    const model = resolveModel('anthropic:claude-stub', { ANTHROPIC_API_KEY: 'k', ANTHROPIC_BASE_URL: stub.baseURL });
    return { ...(await turnOn(model, 'tell me a story', settings)), received: stub.received };
  } finally {
    await stub.close();
  }
}

const assistantTail = (body: { messages: { role: string; content: unknown }[] }) => {
  const last = body.messages.at(-1)!;
  return last.role === 'assistant' ? JSON.stringify(last.content) : null;
};

describe('a reply cut at the output limit', () => {
  it('goes on from its text on a model that continues a prefill: one message, one step, the usage of both requests', async () => {
    const { outcome, message, steps, events, deltas, received } = await onAnthropic([
      { text: ['Once upon', ' a time '], maxTokens: true },
      { text: ['there was', ' a fox.'] },
    ]);
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(message).toEqual({ text: 'Once upon a time there was a fox.', partial: false });
    expect(deltas).toBe('Once upon a time there was a fox.'); // each word streamed once
    expect(received).toHaveLength(2);
    expect(assistantTail(received[0]!)).toBeNull();
    expect(assistantTail(received[1]!)).toContain('Once upon a time'); // the prefill, its trailing space gone (ADR-0060)
    expect(steps).toHaveLength(1);
    expect(steps[0]).toMatchObject({ text: 'Once upon a time there was a fox.', finishReason: 'stop' });
    // The stub reports 3 tokens in and one out per text piece, per request.
    expect(steps[0]!.usage).toMatchObject({ inputTokens: 6, outputTokens: 4 });
    const finished = events.filter((e) => e.type === 'step-finished');
    expect(finished).toHaveLength(1);
    expect(finished[0]!.data).not.toHaveProperty('finishReason');
    expect(events.map((e) => e.type)).not.toContain('model-retry');
  });

  it('stops going on after continueAtOutputLimit requests, and its step-finished says the limit cut it', async () => {
    const { runId, outcome, message, steps, events, received } = await onAnthropic([
      { text: ['One.'], maxTokens: true }, { text: [' Two.'], maxTokens: true }, { text: [' Three.'], maxTokens: true },
    ], { continueAtOutputLimit: 2 });
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(message.text).toBe('One. Two. Three.');
    expect(received).toHaveLength(3);
    expect(steps[0]).toMatchObject({ finishReason: 'length' });
    expect(events.find((e) => e.type === 'step-finished')!.data).toMatchObject({ finishReason: 'length' });
    // The operator's view of the run marks the step.
    expect(await formatShowCommand(db, runId, {}, new Date())).toMatch(/\n\s+0\s+model\s+1\s+One\. Two\. Three\. {2}\[output limit\]/);
  });

  it('is not continued with continueAtOutputLimit 0, nor when the step had reasoning', async () => {
    const off = await onAnthropic([{ text: ['Cut'], maxTokens: true }, { text: [' never sent'] }], { continueAtOutputLimit: 0 });
    expect([off.message.text, off.received.length]).toEqual(['Cut', 1]);
    const thinking = await onAnthropic([{ thinking: 'hmm', text: ['Cut'], maxTokens: true }, { text: [' never sent'] }]);
    expect([thinking.message.text, thinking.received.length]).toEqual(['Cut', 1]);
    expect(thinking.steps[0]).toMatchObject({ finishReason: 'length' });
  });

  it('ends where the limit cut it on a model that cannot continue a prefill, saying so', async () => {
    const stub = await startOpenAiStub();
    try {
      const model = resolveModel('openai-compatible:stub-model', { OPENAI_BASE_URL: stub.baseURL, OPENAI_API_KEY: 'k' });
      const { outcome, message, events } = await turnOn(model, 'tell me a long story');
      expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
      expect(message.text).toBe('Hello from stub');
      expect(stub.received).toHaveLength(1);
      expect(events.find((e) => e.type === 'step-finished')!.data).toMatchObject({ finishReason: 'length' });
    } finally {
      await stub.close();
    }
  });
});

describe('addUsage', () => {
  it('adds count by count, keeping only counts either reported', () => {
    expect(addUsage({ inputTokens: 3, outputTokens: 2 }, { inputTokens: 4, reasoningTokens: 1 }))
      .toEqual({ inputTokens: 7, outputTokens: 2, reasoningTokens: 1 });
    expect(addUsage(undefined, { inputTokens: 1 })).toEqual({ inputTokens: 1 });
    expect(addUsage({ outputTokens: 1 }, undefined)).toEqual({ outputTokens: 1 });
    expect(addUsage(undefined, undefined)).toBeUndefined();
  });
});
