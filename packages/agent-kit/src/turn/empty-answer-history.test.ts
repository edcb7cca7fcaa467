// A turn that closed without text (cancelled before any reply, or failed before the model said
// anything) stores an empty assistant message. The next turn's history leaves it out: Anthropic's
// API refuses a conversation with an empty message before its end, and an empty answer tells no
// model anything. The question it did not answer stays, before the next one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnthropicStub } from '../../test/harness/anthropic-stub.js';
import { startOpenAiStub } from '../../test/harness/openai-stub.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { resolveModel, type LanguageModelV3 } from '../model/index.js';
import { cancelRun } from '../queue/run-intents.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { runSegment } from './run-segment.js';
import { newOwner } from './runtime.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

/** A thread whose first turn was answered, whose second was cancelled before any reply. */
async function threadWithAnEmptyAnswer(model: LanguageModelV3) {
  const first = await startTurn(db, { ownerId: 'dana', text: 'first question' });
  await runSegment(makeRuntime(db, { model }), { runId: first.runId, owner: newOwner('empty') });
  const second = await startTurn(db, { threadId: first.threadId, ownerId: 'dana', text: 'never mind' });
  await cancelRun(db, { runId: second.runId });
  const outcome = await runSegment(makeRuntime(db, { model }), { runId: second.runId, owner: newOwner('empty') });
  expect(outcome).toMatchObject({ kind: 'closed', status: 'aborted' });
  const [answer] = await db.query<{ content: { text: string } }>(
    `select content from agent_kit_messages where run_id = $1 and role = 'assistant'`, [second.runId]);
  expect(answer!.content.text).toBe('');
  return first.threadId;
}

async function nextTurn(threadId: string, model: LanguageModelV3) {
  const { runId } = await startTurn(db, { threadId, ownerId: 'dana', text: 'third question' });
  const outcome = await runSegment(makeRuntime(db, { model }), { runId, owner: newOwner('empty') });
  const [run] = await db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [runId]);
  return { outcome, status: run!.status };
}

const textOf = (content: unknown): string => typeof content === 'string'
  ? content
  : (content as { text?: string }[]).map((part) => part.text ?? '').join('|');

describe('the history after a turn that closed without text', () => {
  it('on Anthropic: leaves the empty answer out, so the API takes the next turn', async () => {
    const stub = await startAnthropicStub([{ text: ['first answer'] }, { text: ['third answer'] }]);
    try {
      const model = resolveModel('anthropic:claude-stub', { ANTHROPIC_API_KEY: 'k', ANTHROPIC_BASE_URL: stub.baseURL });
      const threadId = await threadWithAnEmptyAnswer(model);
      const { outcome, status } = await nextTurn(threadId, model);
      expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
      expect(status).toBe('completed');
      // Two requests: the first turn's and the third's (the cancelled turn never called the model).
      expect(stub.received).toHaveLength(2);
      const messages = stub.received[1]!.messages;
      expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
      expect(messages.map((m) => textOf(m.content))).toEqual(['first question', 'first answer', 'never mind|third question']);
    } finally {
      await stub.close();
    }
  });

  it('on OpenAI-compatible: no empty assistant message reaches the model', async () => {
    const stub = await startOpenAiStub();
    try {
      const model = resolveModel('openai-compatible:stub-model', { OPENAI_BASE_URL: stub.baseURL, OPENAI_API_KEY: 'k' });
      const threadId = await threadWithAnEmptyAnswer(model);
      const { status } = await nextTurn(threadId, model);
      expect(status).toBe('completed');
      const messages = stub.received.at(-1)!.body.messages as { role: string; content: unknown }[];
      expect(messages.map((m) => [m.role, textOf(m.content)])).toEqual([
        ['user', 'first question'], ['assistant', 'Hello from stub'], ['user', 'never mind'], ['user', 'third question'],
      ]);
    } finally {
      await stub.close();
    }
  });
});
