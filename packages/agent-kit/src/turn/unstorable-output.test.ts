// What Postgres cannot store, from a model or a tool (ADR-0056): a NUL or an unpaired UTF-16
// surrogate in streamed text, a tool call's input, a tool's result or error, a reconcile hook's
// answer or a provider's error; and a tool's result that is not plain JSON (a Date, a BigInt, a
// cycle). Each used to fail the segment at its first write, on every
// attempt, and a tool's result with one left its effect in doubt although it had happened. Now
// each becomes U+FFFD where it enters the engine, and the turn completes on its first attempt
// with the same text streamed, stored and given back to the model. On both stores.
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { answering, calling } from '../../test/harness/mock-streams.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { askReconcileHook } from '../effect-ledger/index.js';
import type { AgentTool } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { newOwner } from './runtime.js';
import { runSegment } from './run-segment.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

async function turnOf(model: MockLanguageModelV3, tools: Record<string, AgentTool<any, any>> = {}) {
  const rt = makeRuntime(db, { model, tools });
  const turn = await startTurn(db, { ownerId: 'alice', text: 'read me the file' });
  const outcome = await runSegment(rt, { runId: turn.runId, owner: newOwner('unstorable') });
  const [run] = await db.query<{ status: string; attempts: number; text: string | null; last_error: unknown }>(
    `select r.status, r.attempts, m.content->>'text' as text, r.last_error
     from agent_kit_runs r left join agent_kit_messages m on m.id = r.message_id where r.id = $1`, [turn.runId]);
  return { ...turn, outcome, run: run! };
}

async function eventsOf(runId: string, type: string) {
  return db.query<{ data: Record<string, unknown> }>(
    'select data from agent_kit_thread_events where run_id = $1 and type = $2 order by seq', [runId, type]);
}

const unstorableEscape = /\\u(0000|d[89a-f])/i;

describe('what Postgres cannot store, from a model or a tool', () => {
  it('streamed text: a NUL and unpaired surrogates become U+FFFD, a pair split between deltas stays whole', async () => {
    const model = new MockLanguageModelV3({ doStream: [answering(['Hello\u0000', ' \uD83D', '\uDE00 world \uDC00', '!\uD800'])] });
    const { runId, outcome, run } = await turnOf(model);
    const shown = 'Hello\uFFFD \u{1F600} world \uFFFD!\uFFFD';
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(run).toMatchObject({ status: 'completed', attempts: 1, text: shown });
    // What viewers were streamed is what was stored, unit for unit.
    const streamed = (await eventsOf(runId, 'text-delta')).map((e) => e.data.text).join('');
    expect(streamed).toBe(shown);
    expect((await eventsOf(runId, 'step-finished')).map((e) => e.data.text)).toEqual([shown]);
  });

  it('a tool call\'s input and the tool\'s result: the tool runs once, its effect is recorded completed, the model gets what was stored', async () => {
    const inputs: unknown[] = [];
    const readFile: AgentTool<{ path: string }, unknown> = {
      name: 'read_file',
      description: 'Read a file.',
      inputSchema: z.object({ path: z.string() }),
      async execute(input) {
        inputs.push(input);
        return { 'name\u0000': 'utf-16 \uD800text', bytes: [0, 1], lines: ['a\u0000b'] };
      },
    };
    const model = new MockLanguageModelV3({ doStream: [calling('read_file', { path: 'notes\u0000.txt' }), answering(['Read it.'])] });
    const { runId, outcome, run } = await turnOf(model, { read_file: readFile });
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(run).toMatchObject({ status: 'completed', attempts: 1, text: 'Read it.' });
    expect(inputs).toEqual([{ path: 'notes\uFFFD.txt' }]);

    const stored = { 'name\uFFFD': 'utf-16 \uFFFDtext', bytes: [0, 1], lines: ['a\uFFFDb'] };
    const effects = await db.query<{ status: string; input: unknown; result: unknown }>(
      'select status, input, result from agent_kit_effects where run_id = $1', [runId]);
    expect(effects).toEqual([{ status: 'completed', input: { path: 'notes\uFFFD.txt' }, result: stored }]);
    expect((await eventsOf(runId, 'tool-result')).map((e) => e.data.output)).toEqual([stored]);
    // The model's second step was given the stored result, not the tool's raw one.
    const toolMessage = model.doStreamCalls[1]!.prompt.find((message) => message.role === 'tool');
    expect(toolMessage).toMatchObject({ content: [{ type: 'tool-result', output: { value: stored } }] });
    expect(JSON.stringify(model.doStreamCalls[1]!.prompt)).not.toMatch(unstorableEscape);
  });

  it('a tool\'s result that is not plain JSON (a Date, a BigInt as a database driver returns them, a cycle): recorded completed at once', async () => {
    let calls = 0;
    const cyclic: Record<string, unknown> = { id: 'o-1' };
    cyclic.self = cyclic;
    const lookUp: AgentTool<{ path: string }, unknown> = {
      name: 'read_file',
      description: 'Read a file.',
      inputSchema: z.object({ path: z.string() }),
      async execute() {
        return [{ createdAt: new Date(0), id: 10n }, cyclic][calls++];
      },
    };
    for (const expected of [
      { createdAt: '1970-01-01T00:00:00.000Z', id: '10' },
      { unstorable: expect.stringMatching(/^the tool ran, but what it returned has no JSON form to keep \(Converting circular/) },
    ]) {
      const model = new MockLanguageModelV3({ doStream: [calling('read_file', { path: 'x' }), answering(['Found it.'])] });
      const { runId, run } = await turnOf(model, { read_file: lookUp });
      // A Date made the model's next step refuse its prompt (the turn waited for the reaper and
      // spent an attempt); a BigInt or a cycle failed the record of an effect that had happened.
      expect(run).toMatchObject({ status: 'completed', attempts: 1, text: 'Found it.' });
      const effects = await db.query<{ status: string; result: unknown }>(
        'select status, result from agent_kit_effects where run_id = $1', [runId]);
      expect(effects).toEqual([{ status: 'completed', result: expected }]);
      const toolMessage = model.doStreamCalls[1]!.prompt.find((message) => message.role === 'tool');
      expect(toolMessage).toMatchObject({ content: [{ type: 'tool-result', output: { value: expected } }] });
    }
    expect(calls).toBe(2);
  });

  it('a tool\'s thrown error: recorded failed with the message the model is told', async () => {
    const failing: AgentTool<{ path: string }, unknown> = {
      name: 'read_file',
      description: 'Read a file.',
      inputSchema: z.object({ path: z.string() }),
      async execute() {
        throw new Error('bad byte \u0000 at 12');
      },
    };
    const model = new MockLanguageModelV3({ doStream: [calling('read_file', { path: 'x' }), answering(['Could not.'])] });
    const { runId, run } = await turnOf(model, { read_file: failing });
    expect(run).toMatchObject({ status: 'completed', attempts: 1, text: 'Could not.' });
    const effects = await db.query<{ status: string; result: unknown }>(
      'select status, result from agent_kit_effects where run_id = $1', [runId]);
    expect(effects).toEqual([{ status: 'failed', result: { error: 'bad byte \uFFFD at 12' } }]);
    expect(JSON.stringify(model.doStreamCalls[1]!.prompt)).toContain('bad byte \uFFFD at 12');
  });

  it('a provider\'s error: the segment records it and gives the run back, instead of failing on the record', async () => {
    const model = new MockLanguageModelV3({
      doStream: async () => {
        throw new Error('upstream said \u0000\uDC00');
      },
    });
    const { outcome, run } = await turnOf(model);
    expect(outcome).toMatchObject({ kind: 'stopped', reason: 'upstream said \u0000\uDC00' });
    expect(run.last_error).toMatchObject({ message: 'upstream said \uFFFD\uFFFD' });
  });

  it('a reconcile hook\'s answer, and its failure', async () => {
    const found: AgentTool<object, unknown> = {
      name: 'pay', description: 'Pay.', inputSchema: z.object({}),
      reconcile: async () => ({ found: true, result: { receipt: 'r\u0000' } }),
    };
    expect(await askReconcileHook(found, 'k1')).toEqual({ status: 'completed', result: { receipt: 'r\uFFFD' } });
    const failing: AgentTool<object, unknown> = {
      name: 'pay', description: 'Pay.', inputSchema: z.object({}),
      reconcile: async () => {
        throw new Error('gateway \uD800');
      },
    };
    expect(await askReconcileHook(failing, 'k2'))
      .toEqual({ status: 'in_doubt', result: { reason: 'reconcile hook failed: gateway \uFFFD', key: 'k2' } });
  });
});
