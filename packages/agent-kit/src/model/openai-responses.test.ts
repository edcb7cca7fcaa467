// Turns on the OpenAI Responses API, the path `openai:<model>` takes without OPENAI_BASE_URL and
// so the one every real OpenAI user runs: a local Responses stub answers the real @ai-sdk/openai
// provider, and the engine runs whole turns through it on both stores (a reply, a tool call and
// its result sent back, a server_error in the middle of a reply).
import { createOpenAI } from '@ai-sdk/openai';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  responsesReasoning, startOpenAiResponsesStub, type OpenAiResponsesStub, type ResponsesInputItem,
} from '../../test/harness/openai-responses-stub.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { messageText, shownText, streamedText } from '../../test/harness/run-text.js';
import { effectsFile, makeRuntime } from '../../test/harness/turn-kit.js';
import type { LanguageModelV3 } from './provider-types.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { newOwner } from '../turn/runtime.js';
import { runSegment } from '../turn/run-segment.js';
import type { TurnSettings } from '../turn/settings.js';

let db: Db;
let stub: OpenAiResponsesStub;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});
beforeEach(async () => {
  stub = await startOpenAiResponsesStub();
});
afterEach(async () => {
  await stub.close();
});

/** One segment of a new turn saying `text`, on the Responses API model against the stub. */
async function turnOn(text: string, settings: Partial<TurnSettings> = {}) {
  const model = createOpenAI({ apiKey: 'k', baseURL: stub.baseURL }).responses('gpt-stub');
  const rt = makeRuntime(db, { model, settings });
  const { runId } = await startTurn(db, { ownerId: 'alice', text });
  const outcome = await runSegment(rt, { runId, owner: newOwner('responses') });
  const [run] = await db.query<{ status: string; attempts: number }>(
    'select status, attempts from agent_kit_runs where id = $1', [runId]);
  return { runId, outcome, run: run! };
}

async function eventsOf(runId: string) {
  return db.query<{ type: string; data: Record<string, any> }>(
    'select type, data from agent_kit_thread_events where run_id = $1 order by seq', [runId]);
}

const inputOf = (n: number) => stub.received[n]!.input as ResponsesInputItem[];

/** `model`, except that its second request fails before reaching the API, as a process dying there. */
function failingSecondRequest(model: LanguageModelV3): LanguageModelV3 {
  let calls = 0;
  return {
    specificationVersion: 'v3', provider: model.provider, modelId: model.modelId, supportedUrls: model.supportedUrls,
    doGenerate: (o) => model.doGenerate(o),
    doStream: (o) => (++calls === 2 ? Promise.reject(new Error('the process died here')) : model.doStream(o)),
  };
}

/**
 * A turn that thinks, then calls a tool, whose first segment journals the call step and runs the
 * tool, then dies on its second request: the run goes back to the queue, and the next segment
 * builds its prompt from the journal. `model` is the one that does not die.
 */
async function turnWhoseFirstSegmentDied() {
  const model = createOpenAI({ apiKey: 'k', baseURL: stub.baseURL }).responses('gpt-stub');
  const { runId } = await startTurn(db, { ownerId: 'alice', text: 'think, then use the tool' });
  const first = await runSegment(makeRuntime(db, { model: failingSecondRequest(model) }), { runId, owner: newOwner('responses') });
  return { model, runId, first };
}

describe('a turn on the OpenAI Responses API (a local /v1/responses)', () => {
  it('streams a text reply: the turn completes with it, each word a text-delta', async () => {
    const { runId, outcome, run } = await turnOn('say hello');
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(run).toMatchObject({ status: 'completed', attempts: 1 });
    expect(await messageText(db, runId)).toBe('Hello from responses');
    expect(await streamedText(db, runId)).toBe('Hello from responses');
    expect(stub.received).toHaveLength(1);
    expect(stub.received[0]).toMatchObject({ model: 'gpt-stub', stream: true });
    expect(inputOf(0)).toContainEqual({ role: 'user', content: [{ type: 'input_text', text: 'say hello' }] });
    // The engine's tools are declared as Responses function tools.
    expect(stub.received[0]!.tools).toContainEqual(expect.objectContaining({ type: 'function', name: 'record_effect' }));
  });

  it('runs the function call once and sends its output back under the same call_id, then completes', async () => {
    const effects = effectsFile();
    try {
      const { runId, outcome, run } = await turnOn('please use the tool');
      expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
      expect(run).toMatchObject({ status: 'completed', attempts: 1 });
      const rows = await db.query<{ tool: string; status: string; input: unknown; result: unknown }>(
        'select tool, status, input, result from agent_kit_effects where run_id = $1', [runId]);
      expect(rows).toEqual([{ tool: 'record_effect', status: 'completed', input: { note: 'from stub' }, result: expect.anything() }]);
      expect(effects.lines()).toHaveLength(1);
      // The journal keeps the stub's call_id as the tool call's id.
      const finished = (await eventsOf(runId)).filter((e) => e.type === 'step-finished');
      expect(finished[0]!.data.toolCalls).toEqual([{ toolCallId: 'call_stub_1', toolName: 'record_effect', input: { note: 'from stub' } }]);
      expect(stub.received).toHaveLength(2);
      const second = inputOf(1);
      const call = second.find((item) => item.type === 'function_call');
      const output = second.find((item) => item.type === 'function_call_output');
      expect(call).toMatchObject({ call_id: 'call_stub_1', name: 'record_effect', arguments: '{"note":"from stub"}' });
      expect(output).toMatchObject({ call_id: 'call_stub_1' });
      // The tool's result goes back as a JSON string, the one the ledger stored.
      expect(JSON.parse(output!.output as string)).toEqual(rows[0]!.result);
      expect(inputOf(0).some((item) => item.type === 'function_call_output')).toBe(false);
      // The call goes before its output, both after the user's message.
      const indexOf = (item: unknown) => second.indexOf(item as ResponsesInputItem);
      expect(indexOf(second.find((item) => item.role === 'user'))).toBeLessThan(indexOf(call));
      expect(indexOf(call)).toBeLessThan(indexOf(output));
      expect(await messageText(db, runId)).toBe('Hello from responses');
      expect(await streamedText(db, runId)).toBe('Hello from responses');
    } finally {
      effects.restore();
    }
  });

  it('a server_error event in the middle of the reply: the step starts again in the same segment, each word shown once', async () => {
    const { runId, outcome, run } = await turnOn('a server error mid-reply', { modelRetries: 1 });
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(run).toMatchObject({ status: 'completed', attempts: 1 });
    const retries = (await eventsOf(runId)).filter((e) => e.type === 'model-retry').map((e) => e.data);
    // No prefill on OpenAI (ADR-0061): the two words streamed are dropped and the step redone.
    expect(retries).toMatchObject([{ stepNo: 0, retry: 1, of: 1, redo: true, text: '', error: { name: 'ModelStreamError', statusCode: 500 } }]);
    expect(retries[0]!.error.message).toBe('server_error: The server had an error while processing your request.');
    expect(stub.received).toHaveLength(2);
    expect(stub.received[1]!.input).toEqual(stub.received[0]!.input); // asked the same again, no partial reply
    expect(await messageText(db, runId)).toBe('Hello from responses');
    expect(await shownText(db, runId)).toBe('Hello from responses');
  });
});

describe('a reasoning model on the Responses API (ADR-0064)', () => {
  it('sends the step\'s reasoning item back, by reference and before the call, in the step after a tool call', async () => {
    const effects = effectsFile();
    try {
      const { runId, outcome, run } = await turnOn('think, then use the tool');
      expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
      expect(run).toMatchObject({ status: 'completed', attempts: 1 });
      expect(effects.lines()).toHaveLength(1);
      const [step] = await db.query<{ data: Record<string, any> }>(
        'select data from agent_kit_steps where run_id = $1 and step_no = 0', [runId]);
      expect(step!.data.reasoning).toEqual([{
        text: responsesReasoning, providerMetadata: { openai: { itemId: 'rs_stub_1', reasoningEncryptedContent: null } },
      }]);
      // The response's usage, as the journal keeps it (ADR-0065), its cached and reasoning counts included.
      expect(step!.data.usage).toEqual({ inputTokens: 12, outputTokens: 3, cacheReadTokens: 0, reasoningTokens: 0 });
      expect(stub.received).toHaveLength(2);
      const second = inputOf(1);
      const reference = second.findIndex((item) => item.type === 'item_reference');
      expect(second[reference]).toEqual({ type: 'item_reference', id: 'rs_stub_1' });
      expect(reference).toBeLessThan(second.findIndex((item) => item.type === 'function_call'));
      expect(second.filter((item) => item.type === 'item_reference')).toHaveLength(1);
      // Reasoning is not text: the reply shows only the answer's words, and viewers its summary apart (ADR-0070).
      expect(await messageText(db, runId)).toBe('Hello from responses');
      expect(await streamedText(db, runId)).toBe('Hello from responses');
      const shown = await db.query<{ type: string; text: string | null }>(
        `select type, data->>'text' as text from agent_kit_thread_events
         where run_id = $1 and type in ('reasoning-delta', 'step-finished') order by seq`, [runId]);
      expect(shown.map((e) => (e.type === 'reasoning-delta' ? e.text : e.type)).join('|')) // the stub thinks in each step
        .toBe(`${responsesReasoning}|step-finished|${responsesReasoning}|step-finished`);
    } finally {
      effects.restore();
    }
  });

  it('a resumed run rebuilds the reference from its journal: the next segment\'s request names the same item', async () => {
    const effects = effectsFile();
    try {
      const { model, runId, first } = await turnWhoseFirstSegmentDied();
      expect(first).toMatchObject({ kind: 'stopped', reason: 'the process died here' });
      expect(await runSegment(makeRuntime(db, { model }), { runId, owner: newOwner('responses') }))
        .toMatchObject({ kind: 'closed', status: 'completed' });
      expect(stub.received).toHaveLength(2); // the failed request never reached the stub
      expect(inputOf(1)).toContainEqual({ type: 'item_reference', id: 'rs_stub_1' });
      expect(effects.lines()).toHaveLength(1);
    } finally {
      effects.restore();
    }
  });

  it('a reasoning item the API no longer has: the step is asked again without the reasoning, and completes', async () => {
    const effects = effectsFile();
    try {
      const { model, runId } = await turnWhoseFirstSegmentDied();
      stub.forget(); // the stored response expired while the run waited
      expect(await runSegment(makeRuntime(db, { model }), { runId, owner: newOwner('responses') }))
        .toMatchObject({ kind: 'closed', status: 'completed' });
      expect(stub.received).toHaveLength(3);
      expect(inputOf(1)).toContainEqual({ type: 'item_reference', id: 'rs_stub_1' }); // refused: 404
      expect(inputOf(2).some((item) => item.type === 'item_reference')).toBe(false);
      const retries = (await eventsOf(runId)).filter((e) => e.type === 'model-retry').map((e) => e.data);
      expect(retries).toMatchObject([{ stepNo: 2, retry: 1, redo: false, error: { statusCode: 404, message: "Item with id 'rs_stub_1' not found." } }]);
      expect(effects.lines()).toHaveLength(1);
      expect(await messageText(db, runId)).toBe('Hello from responses');
    } finally {
      effects.restore();
    }
  });
});
