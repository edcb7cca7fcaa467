// A long thread's prompt stays bounded (ADR-0046): with `historyTurns: N` the model is given the
// newest N earlier turns (each its user message and final answer) and the current one, after
// the instructions; 0 gives the current message alone; unset gives every turn; a turn's own
// journal (tool calls and results) is never cut. createRuntime refuses a window that is not a
// whole number of turns. Both stores; the prompts are the ones the model was given.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { recordingStepsModel, type PlayedStep, type PromptMessage } from '../harness/steps-model.js';
import { makeRuntime, testConfig } from '../harness/turn-kit.js';
import { openTestDb } from '../harness/test-db.js';
import { InvalidArgumentError } from '../../src/errors.js';
import type { AgentTool } from '../../src/model/index.js';
import { startTurn } from '../../src/queue/start-turn.js';
import type { Db } from '../../src/store/db.js';
import { lastTurns } from '../../src/turn/journal.js';
import { createRuntime } from '../../src/turn/runtime.js';
import { runSegment } from '../../src/turn/run-segment.js';

let db: Db;
let threadId: string;

const lookup: AgentTool<{ q: string }, { length: number }> = {
  name: 'lookup', description: 'Looks a word up', inputSchema: z.object({ q: z.string() }),
  execute: async ({ q }) => ({ length: q.length }),
};

/** Run one turn of the thread to its end; the prompts its model steps were given. */
async function turn(text: string, steps: PlayedStep[], window?: number): Promise<PromptMessage[][]> {
  const prompts: PromptMessage[][] = [];
  const rt = {
    ...makeRuntime(db, { model: recordingStepsModel(steps, prompts), tools: { lookup } }),
    instructions: 'Be brief.', historyTurns: window,
  };
  const started = await startTurn(db, { ownerId: 'win', text, threadId });
  threadId = started.threadId;
  expect((await runSegment(rt, { runId: started.runId, owner: `seg-${started.runId}` })).kind).toBe('closed');
  return prompts;
}

/** A prompt as role:text lines, tool parts by type. */
const lines = (prompt: PromptMessage[]) => prompt.map((m) => `${m.role}:${typeof m.content === 'string'
  ? m.content : (m.content as { type: string; text?: string }[]).map((p) => p.text ?? p.type).join('+')}`);

beforeAll(async () => {
  db = await openTestDb();
  for (let n = 1; n <= 4; n++) await turn(`question ${n}`, [{ text: `answer ${n}` }]);
});
afterAll(async () => {
  await db?.close();
});

describe('historyTurns', () => {
  it('gives the model the newest N earlier turns and the current one, after the instructions', async () => {
    const [prompt] = await turn('question 5', [{ text: 'answer 5' }], 2);
    expect(lines(prompt!)).toEqual([
      'system:Be brief.', 'user:question 3', 'assistant:answer 3', 'user:question 4', 'assistant:answer 4', 'user:question 5',
    ]);
  });

  it('gives the current message alone with 0, every turn when unset or longer than the thread', async () => {
    expect((await turn('question 6', [{ text: 'answer 6' }], 0)).map(lines)).toEqual([['system:Be brief.', 'user:question 6']]);
    for (const window of [undefined, 1_000]) {
      const [{ n: earlier }] = await db.query<{ n: number }>(
        'select count(*)::int as n from agent_kit_runs where thread_id = $1', [threadId]) as [{ n: number }];
      const [prompt] = await turn('again', [{ text: 'ok' }], window);
      const users = lines(prompt!).filter((line) => line.startsWith('user:'));
      expect(users, String(window)).toHaveLength(earlier + 1);
      expect(users.slice(0, 6)).toEqual([1, 2, 3, 4, 5, 6].map((n) => `user:question ${n}`));
    }
  });

  it('never cuts the current turn\'s own tool calls and results', async () => {
    const prompts = await turn('how long is "window"?',
      [{ calls: [{ id: 'c1', name: 'lookup', input: { q: 'window' } }] }, { text: 'Six letters.' }], 1);
    expect(prompts).toHaveLength(2);
    expect(lines(prompts[1]!)).toEqual([
      'system:Be brief.', 'user:again', 'assistant:ok', 'user:how long is "window"?', 'assistant:lookup', 'tool:tool-result',
    ].map((line) => line.replace('assistant:lookup', 'assistant:tool-call')));
  });
});

describe('lastTurns', () => {
  it('counts turns by their user messages, keeping a turn with no answer whole', () => {
    const m = (role: 'user' | 'assistant', content: string) => ({ role, content });
    const history = [m('user', 'a'), m('assistant', 'A'), m('user', 'b'), m('user', 'c'), m('assistant', 'C'), m('user', 'd')];
    expect(lastTurns(history, 1)).toEqual(history.slice(3));
    expect(lastTurns(history, 2)).toEqual(history.slice(2));
    expect(lastTurns(history, 0)).toEqual([m('user', 'd')]);
    expect(lastTurns(history, undefined)).toBe(history);
    expect(lastTurns([], 3)).toEqual([]);
  });
});

describe('createRuntime({ historyTurns })', () => {
  it('refuses a window that is not a whole number of turns, 0 or more', async () => {
    const base = { db, skipSchemaCheck: true, demoTools: false } as const;
    expect((await createRuntime(testConfig(), { ...base, historyTurns: 20 })).historyTurns).toBe(20);
    for (const bad of [-1, 1.5, Number.NaN, Infinity, '20']) {
      await expect(createRuntime(testConfig(), { ...base, historyTurns: bad as never }), String(bad))
        .rejects.toThrow(InvalidArgumentError);
    }
  });
});
