// Turns on Anthropic with extended thinking on (ADR-0064), against a local Messages API that
// applies the API's rule: in a tool loop, and in a prefill, the last assistant message must start
// with a thinking block the API signed. The journal keeps each step's thinking with its signature
// and the next step's prompt sends it back; a continuation's prefill, which the API refuses with
// thinking on, gives way to the step asked again from its start. Viewers see the thinking as it
// streams, apart from the reply.
import { defaultSettingsMiddleware, wrapLanguageModel } from 'ai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startAnthropicStub, stubSignature, type AnthropicReply, type AnthropicStub } from '../../test/harness/anthropic-stub.js';
import { messageText, shownText, streamedText } from '../../test/harness/run-text.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { effectsFile, makeRuntime } from '../../test/harness/turn-kit.js';
import { formatShowCommand } from '../cli/commands/show.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { newOwner } from '../turn/runtime.js';
import { runSegment } from '../turn/run-segment.js';
import type { TurnSettings } from '../turn/settings.js';
import { resolveModel } from './resolve-model.js';

let db: Db;
let stub: AnthropicStub | undefined;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

/** Claude with thinking on, as the AI SDK sets a provider option for every call. */
const thinkingModel = (baseURL: string) => wrapLanguageModel({
  model: resolveModel('anthropic:claude-stub', { ANTHROPIC_API_KEY: 'k', ANTHROPIC_BASE_URL: baseURL }),
  middleware: defaultSettingsMiddleware({
    settings: { providerOptions: { anthropic: { thinking: { type: 'enabled', budgetTokens: 1024 } } } },
  }),
});

/** Segments of a new turn on claude with thinking on, answered by `replies`, one per settings given. */
async function thinkingTurn(replies: AnthropicReply[], ...segments: Partial<TurnSettings>[]) {
  stub = await startAnthropicStub(replies);
  const model = thinkingModel(stub.baseURL);
  const { runId } = await startTurn(db, { ownerId: 'alice', text: 'hello' });
  const outcomes = [];
  for (const settings of segments.length > 0 ? segments : [{}]) {
    outcomes.push(await runSegment(makeRuntime(db, { model, settings }), { runId, owner: newOwner('thinking') }));
  }
  const outcome = outcomes.at(-1);
  const [run] = await db.query<{ status: string; attempts: number }>('select status, attempts from agent_kit_runs where id = $1', [runId]);
  const retries = await db.query<{ data: Record<string, any> }>(
    `select data from agent_kit_thread_events where run_id = $1 and type = 'model-retry' order by seq`, [runId]);
  return { runId, outcome, outcomes, run: run!, retries: retries.map((r) => r.data), received: stub.received };
}

describe('a turn on Anthropic with extended thinking on', () => {
  it('sends the thinking block back, signed, at the start of the tool call\'s message: the turn completes', async () => {
    const effects = effectsFile();
    try {
      const { runId, outcome, run, received } = await thinkingTurn([
        { thinking: 'The user wants a note.', text: [], toolUse: { name: 'record_effect', input: { note: 'thought of' } } },
        { text: ['Noted.'] },
      ]);
      expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
      expect(run).toMatchObject({ status: 'completed', attempts: 1 });
      expect(effects.lines()).toHaveLength(1);
      expect(received).toHaveLength(2);
      expect(received[0]!.thinking).toMatchObject({ type: 'enabled' });
      const call = received[1]!.messages.findLast((message) => message.role === 'assistant')!;
      expect(call.content).toMatchObject([
        { type: 'thinking', thinking: 'The user wants a note.', signature: stubSignature(1) },
        { type: 'tool_use', name: 'record_effect', input: { note: 'thought of' } },
      ]);
      const [step] = await db.query<{ data: Record<string, any> }>(
        'select data from agent_kit_steps where run_id = $1 and step_no = 0', [runId]);
      expect(step!.data.reasoning).toEqual([
        { text: 'The user wants a note.', providerMetadata: { anthropic: { signature: stubSignature(1) } } },
      ]);
      // `agent-kit show` marks the step that kept reasoning.
      expect(await formatShowCommand(db, runId, {}, new Date())).toMatch(/\n\s+0\s+model\s+1\s+\[calls record_effect\] {2}\[reasoning\]/);
      // Thinking is not the reply: the message and the reply viewers see have only the text.
      expect(await messageText(db, runId)).toBe('Noted.');
      expect(await streamedText(db, runId)).toBe('Noted.');
      // Viewers see it apart, as it streamed, ahead of the step's tool call (ADR-0070).
      const shown = await db.query<{ type: string; text: string | null }>(
        `select type, data->>'text' as text from agent_kit_thread_events
         where run_id = $1 and type in ('reasoning-delta', 'step-finished') order by seq`, [runId]);
      expect(shown.map((e) => (e.type === 'reasoning-delta' ? e.text : e.type)).join('|'))
        .toBe('The user wants a note.|step-finished|step-finished');
    } finally {
      effects.restore();
    }
  });

  it('an overload mid-reply: the prefill it would go on from is refused, so the step starts again and completes', async () => {
    const { runId, outcome, run, retries, received } = await thinkingTurn([
      { thinking: 'First go.', text: ['Half', ' of it'], error: { type: 'overloaded_error', message: 'Overloaded' } },
      { thinking: 'Second go.', text: ['The whole', ' answer.'] },
    ], { modelRetries: 2 });
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(run).toMatchObject({ status: 'completed', attempts: 1 });
    expect(retries).toMatchObject([
      { stepNo: 0, retry: 1, redo: false, text: 'Half of it', error: { statusCode: 529 } },
      { stepNo: 0, retry: 2, redo: true, text: '', error: { name: 'AI_APICallError', statusCode: 400 } },
    ]);
    expect(retries[1]!.error.message).toMatch(/must start with a thinking block/);
    expect(received).toHaveLength(3);
    expect(received[1]!.messages.at(-1)).toMatchObject({ role: 'assistant', content: [{ type: 'text', text: 'Half of it' }] });
    expect(received[2]!.messages.at(-1)!.role).toBe('user');
    expect(await messageText(db, runId)).toBe('The whole answer.');
    expect(await shownText(db, runId)).toBe('The whole answer.');
  });

  it('a segment that died mid-reply: the next one\'s prefill is refused, so it asks for the step from its start', async () => {
    const { runId, outcomes, run, retries, received } = await thinkingTurn([
      { thinking: 'First go.', text: ['Half', ' of it'], drop: true },
      { thinking: 'Second go.', text: ['The whole', ' answer.'] },
    ], { modelRetries: 0 }, { modelRetries: 1 });
    expect(outcomes).toMatchObject([{ kind: 'stopped' }, { kind: 'closed', status: 'completed' }]);
    expect(run).toMatchObject({ status: 'completed', attempts: 2 });
    const started = await db.query<{ data: Record<string, any> }>(
      `select data from agent_kit_thread_events where run_id = $1 and type = 'segment-started' order by seq`, [runId]);
    expect(started[1]!.data).toMatchObject({ continued: true, text: 'Half of it' });
    expect(retries).toMatchObject([{ stepNo: 0, retry: 1, redo: true, text: '', error: { statusCode: 400 } }]);
    expect(received).toHaveLength(3);
    expect(received[1]!.messages.at(-1)).toMatchObject({ role: 'assistant', content: [{ type: 'text', text: 'Half of it' }] });
    expect(await messageText(db, runId)).toBe('The whole answer.');
    expect(await shownText(db, runId)).toBe('The whole answer.');
  });

  it('a prefill refused with no retries left fails the segment, for the next one to ask without it', async () => {
    const { outcome, run, retries, received } = await thinkingTurn([
      { thinking: 'First go.', text: ['Half'], error: { type: 'overloaded_error', message: 'Overloaded' } },
      { thinking: 'Second go.', text: ['Whole.'] }, // what the refused request would have got
    ], { modelRetries: 1 });
    // Not a refusal for good (ADR-0066): the request without the prefill would have been taken.
    expect(outcome).toMatchObject({ kind: 'stopped', reason: expect.stringMatching(/must start with a thinking block/) });
    expect(run).toMatchObject({ status: 'running', attempts: 1 });
    expect(retries).toHaveLength(1);
    expect(received).toHaveLength(2);
  });
});
