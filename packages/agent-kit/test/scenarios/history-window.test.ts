// A long thread's prompt stays bounded (ADR-0046): with `historyTurns: N` the model is given the
// newest N earlier turns (each its user message and final answer) and the current one, after
// the instructions; 0 gives the current message alone; unset gives every turn; a turn's own
// journal (tool calls and results) is never cut; a resumed segment gets the same window.
// createRuntime refuses a window that is not a whole number of turns. The store reads only the
// window (ADR-0047): agent_kit__history's tuple reads are counted. Both stores; the prompts are
// the ones the model was given.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { recordingStepsModel, type PlayedStep, type PromptMessage } from '../harness/steps-model.js';
import { failingModel, makeRuntime, testConfig } from '../harness/turn-kit.js';
import { openTestDb } from '../harness/test-db.js';
import { InvalidArgumentError } from '../../src/errors.js';
import type { AgentTool } from '../../src/model/index.js';
import { drainQueue } from '../../src/queue/drain-queue.js';
import { startTurn } from '../../src/queue/start-turn.js';
import type { Db } from '../../src/store/db.js';
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
    for (const window of [undefined, 1_000, Number.MAX_SAFE_INTEGER]) {
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

describe('a resumed segment', () => {
  it('is given the same window, read when it begins', async () => {
    const prompts: PromptMessage[][] = [];
    const model = recordingStepsModel([{ text: 'answer 7' }], prompts);
    const started = await startTurn(db, { ownerId: 'win', text: 'question 7', threadId });
    const broken = { ...makeRuntime(db, { model: failingModel(model, 0, new Error('upstream 502')) }), historyTurns: 1 };
    expect(await runSegment(broken, { runId: started.runId, owner: 'seg-7a' })).toMatchObject({ kind: 'stopped', fence: 1 });
    const healthy = { ...makeRuntime(db, { model }), historyTurns: 1 };
    expect(await runSegment(healthy, { runId: started.runId, owner: 'seg-7b' })).toMatchObject({ kind: 'closed', fence: 2 });
    const window = ['user:how long is "window"?', 'assistant:Six letters.', 'user:question 7'];
    expect(prompts.map(lines)).toEqual([window, window]);
  });
});

describe('a turn the drain runs', () => {
  it('is given the window by the drain\'s batch claim', async () => {
    const prompts: PromptMessage[][] = [];
    await startTurn(db, { ownerId: 'win', text: 'drained', threadId });
    const rt = { ...makeRuntime(db, { model: recordingStepsModel([{ text: 'answer 8' }], prompts) }), historyTurns: 1 };
    expect(await drainQueue(rt, { concurrency: 1 })).toMatchObject({ taken: 1 });
    expect(prompts.map(lines)).toEqual([['user:question 7', 'assistant:answer 7', 'user:drained']]);
  });
});

describe('agent_kit__history(thread, turn, window)', () => {
  const history = async (turnNo: number, window: number | null) => (await db.query<{ h: { role: string; text: string }[] }>(
    'select agent_kit__history($1, $2, $3::int) as h', [threadId, turnNo, window]))[0]!.h.map((m) => `${m.role}:${m.text}`);

  it('keeps an earlier turn that has no answer as one turn, and each turn\'s first user message', async () => {
    const asked = await startTurn(db, { ownerId: 'win', text: 'never answered', threadId });
    await db.query(`update agent_kit_runs set status = 'failed' where id = $1`, [asked.runId]);
    await db.query('delete from agent_kit_jobs where run_id = $1', [asked.runId]);
    const next = await startTurn(db, { ownerId: 'win', text: 'after it', threadId });
    const [{ turn_no: turnNo }] = await db.query<{ turn_no: number }>(
      'select turn_no from agent_kit_runs where id = $1', [next.runId]) as [{ turn_no: number }];
    expect(await history(turnNo, 2)).toEqual(['user:drained', 'assistant:answer 8', 'user:never answered', 'user:after it']);
    expect(await history(turnNo, 1)).toEqual(['user:never answered', 'user:after it']);
    expect(await history(turnNo, 0)).toEqual(['user:after it']);
    // The window's read and the whole read agree on every turn they share.
    const all = await history(turnNo, null);
    expect(all.slice(-4)).toEqual(await history(turnNo, 2));
    expect(await history(turnNo, turnNo + 5)).toEqual(all);
    expect(all.filter((line) => line.startsWith('user:'))).toHaveLength(turnNo);
    await db.query(`update agent_kit_runs set status = 'failed' where id = $1`, [next.runId]);
    await db.query('delete from agent_kit_jobs where run_id = $1', [next.runId]);
  });

  it('refuses a negative window', async () => {
    await expect(history(1, -1)).rejects.toThrow(/a history window is 0 or more turns, got -1/);
  });

  it('reads the window\'s messages, not the thread\'s', async () => {
    // 400 more closed turns, each with a question and an answer (bulk-written).
    await db.query(
      `with runs as (
         insert into agent_kit_runs (thread_id, turn_no, status)
         select $1, (select max(turn_no) from agent_kit_runs where thread_id = $1) + g, 'completed'
         from generate_series(1, 400) g returning id)
       insert into agent_kit_messages (thread_id, run_id, role, content)
       select $1, runs.id, role, jsonb_build_object('text', 'bulk ' || role) from runs, unnest(array['user', 'assistant']) role`,
      [threadId],
    );
    await db.exec('analyze agent_kit_runs, agent_kit_messages'); // as autovacuum would after the bulk write
    const [{ last }] = await db.query<{ last: number }>(
      'select max(turn_no) as last from agent_kit_runs where thread_id = $1', [threadId]) as [{ last: number }];
    // Tuples fetched from the messages table by one call, as Postgres counts them: the counters
    // are read before and after it in one transaction (they may hold earlier transactions' too).
    const messagesRead = (window: number | null) => db.transaction(async (tx) => {
      const count = async () => (await tx.query<{ n: number }>(
        `select (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int as n
         from pg_stat_xact_user_tables where relname = 'agent_kit_messages'`))[0]!.n;
      const before = await count();
      await tx.query('select agent_kit__history($1, $2, $3::int)', [threadId, last, window]);
      return (await count()) - before;
    });
    expect(await messagesRead(null)).toBeGreaterThan(800); // the counter counts: every message read
    expect(await messagesRead(3)).toBeLessThanOrEqual(8); // 3 earlier turns and this one, two messages each
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
