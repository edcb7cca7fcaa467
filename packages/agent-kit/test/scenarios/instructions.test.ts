// A runtime's instructions are the model's system prompt (ADR-0045): a string reaches every model
// step of every turn before the conversation, once; a function of the turn is asked once per
// segment (a resumed segment asks again) with the run, thread and turn; without instructions no
// system prompt is sent; a function that throws or answers a non-string fails the segment before
// any model step, as a model error does. The prompts are the ones the model was given, and the
// request an OpenAI-compatible provider sends (to a local stub) carries them first. Both stores.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { recordingStepsModel, type PlayedStep, type PromptMessage } from '../harness/steps-model.js';
import { makeRuntime, testConfig } from '../harness/turn-kit.js';
import { openTestDb } from '../harness/test-db.js';
import { startOpenAiStub } from '../harness/openai-stub.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { resolveModel, type AgentTool } from '../../src/model/index.js';
import { startTurn } from '../../src/queue/start-turn.js';
import type { Db } from '../../src/store/db.js';
import { createRuntime } from '../../src/turn/runtime.js';
import { runSegment } from '../../src/turn/run-segment.js';
import type { Instructions, TurnContext } from '../../src/turn/types.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db?.close();
});

const lookup: AgentTool<{ q: string }, { length: number }> = {
  name: 'lookup', description: 'Looks a word up', inputSchema: z.object({ q: z.string() }),
  execute: async ({ q }) => ({ length: q.length }),
};
/** A tool call, then an answer: two model steps. */
const twoSteps: PlayedStep[] = [{ calls: [{ id: 'c1', name: 'lookup', input: { q: 'durable' } }] }, { text: 'Seven letters.' }];

/** Run one turn's first segment with `instructions`; the prompts the model was given. */
async function turnWith(instructions: Instructions | undefined, options: { threadId?: string; stop?: AbortSignal } = {}) {
  const prompts: PromptMessage[][] = [];
  const rt = { ...makeRuntime(db, { model: recordingStepsModel(twoSteps, prompts), tools: { lookup } }), instructions };
  const turn = await startTurn(db, { ownerId: 'ida', text: 'How long is "durable"?', threadId: options.threadId });
  const outcome = await runSegment(rt, { runId: turn.runId, owner: `seg-${turn.runId}-1`, stopSignal: options.stop });
  return { turn, outcome, prompts, rt };
}

const systemOf = (prompt: PromptMessage[]) => prompt.filter((m) => m.role === 'system').map((m) => m.content);

describe('instructions as a string', () => {
  it('open every model step\'s prompt, before the history and this turn, once', async () => {
    const first = await turnWith('You are the glossary bot. Answer in one line.');
    expect(first.outcome.kind).toBe('closed');
    expect(first.prompts).toHaveLength(2);
    for (const prompt of first.prompts) {
      expect(prompt[0]).toEqual({ role: 'system', content: 'You are the glossary bot. Answer in one line.' });
      expect(systemOf(prompt)).toHaveLength(1);
      expect(prompt[1]?.role).toBe('user');
    }
    expect(first.prompts[1]!.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);

    // The thread's next turn: the same instructions, then the earlier turn, then this one.
    const second = await turnWith('You are the glossary bot. Answer in one line.', { threadId: first.turn.threadId });
    expect(second.prompts[0]!.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(systemOf(second.prompts[0]!)).toEqual(['You are the glossary bot. Answer in one line.']);
  });

  it('are left out when there are none, or they are empty', async () => {
    for (const none of [undefined, '']) {
      const { outcome, prompts } = await turnWith(none);
      expect(outcome.kind).toBe('closed');
      expect(prompts.map((prompt) => prompt[0]!.role)).toEqual(['user', 'user']);
      expect(prompts.flatMap(systemOf)).toEqual([]);
    }
  });
});

describe('instructions as a function of the turn', () => {
  it('are asked once per segment with the run, thread and turn, and again by a resumed segment', async () => {
    const asked: TurnContext[] = [];
    const instructions = (turn: TurnContext) => {
      asked.push(turn);
      return `Version ${asked.length} of the instructions, for turn ${turn.turnNo}.`;
    };
    // One segment, two model steps: asked once.
    const whole = await turnWith(instructions);
    expect(whole.outcome.kind).toBe('closed');
    expect(asked).toEqual([{ runId: whole.turn.runId, threadId: whole.turn.threadId, turnNo: 1 }]);
    expect(whole.prompts.map(systemOf)).toEqual([
      ['Version 1 of the instructions, for turn 1.'], ['Version 1 of the instructions, for turn 1.'],
    ]);
    asked.length = 0;

    // The first segment is asked to stop during its first step: it commits the step and parks.
    const stop = new AbortController();
    const prompts: PromptMessage[][] = [];
    const model = recordingStepsModel(twoSteps, prompts);
    const stopping = { ...model, doStream: async (options: never) => {
      stop.abort();
      return (model as unknown as { doStream: (o: never) => Promise<unknown> }).doStream(options);
    } };
    const rt = { ...makeRuntime(db, { model: stopping as never, tools: { lookup } }), instructions };
    const turn = await startTurn(db, { ownerId: 'ida', text: 'How long is "durable"?' });
    const first = await runSegment(rt, { runId: turn.runId, owner: 'seg-a', stopSignal: stop.signal });
    expect(first.kind).toBe('parked');
    expect(asked).toEqual([{ runId: turn.runId, threadId: turn.threadId, turnNo: 1 }]);

    const resumed = { ...rt, model: recordingStepsModel(twoSteps, prompts) };
    expect((await runSegment(resumed, { runId: turn.runId, owner: 'seg-b' })).kind).toBe('closed');
    expect(asked).toHaveLength(2); // once more for the second segment, not once per step
    expect(prompts.map((prompt) => systemOf(prompt))).toEqual([
      ['Version 1 of the instructions, for turn 1.'], ['Version 2 of the instructions, for turn 1.'],
    ]);
  });

  it('that throw or answer anything but a string fail the segment before any model step', async () => {
    const broken: [Instructions, RegExp][] = [
      [() => { throw new Error('the prompt store is down'); }, /^the prompt store is down$/],
      [async () => Promise.reject(new Error('timed out reading the prompt')), /^timed out reading the prompt$/],
      [(() => 42) as never, /^instructions for turn 1 of thread .* are not a string: number$/],
    ];
    for (const [instructions, message] of broken) {
      const { turn, outcome, prompts } = await turnWith(instructions);
      expect(outcome).toMatchObject({ kind: 'stopped' });
      expect(prompts).toEqual([]); // the model was never called
      const [run] = await db.query<{ status: string; last_error: { message: string } }>(
        'select status, last_error from agent_kit_runs where id = $1', [turn.runId]);
      expect(run!.last_error.message).toMatch(message);
      expect(run!.status).toBe('running'); // its lease expired at once: the next claim retries it
      const steps = await db.query('select 1 from agent_kit_steps where run_id = $1', [turn.runId]);
      expect(steps).toEqual([]);
    }
  });
});

describe('instructions through a real provider', () => {
  it('are the system message of the chat-completions request, before the user\'s', async () => {
    const stub = await startOpenAiStub();
    try {
      const model = resolveModel('openai-compatible:stub-model', { OPENAI_BASE_URL: stub.baseURL });
      const rt = { ...makeRuntime(db, { model }), instructions: 'You are the glossary bot.' };
      const turn = await startTurn(db, { ownerId: 'ida', text: 'say hello' });
      expect((await runSegment(rt, { runId: turn.runId, owner: 'seg-stub' })).kind).toBe('closed');
      expect(stub.received.map((request) => request.body.messages)).toEqual([[
        { role: 'system', content: 'You are the glossary bot.' },
        { role: 'user', content: 'say hello' },
      ]]);
    } finally {
      await stub.close();
    }
  });
});

describe('createRuntime({ instructions })', () => {
  it('passes a string or a function on, and refuses anything else', async () => {
    const base = { db, skipSchemaCheck: true, demoTools: false } as const;
    expect((await createRuntime(testConfig(), { ...base, instructions: 'Be brief.' })).instructions).toBe('Be brief.');
    const fn = () => 'Be brief.';
    expect((await createRuntime(testConfig(), { ...base, instructions: fn })).instructions).toBe(fn);
    for (const bad of [42, { text: 'Be brief.' }, null]) {
      await expect(createRuntime(testConfig(), { ...base, instructions: bad as never })).rejects.toThrow(InvalidArgumentError);
    }
  });
});
