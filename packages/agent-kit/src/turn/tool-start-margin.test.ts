// A tool call starts only with time to run: when less than the slice margin is left (the same
// rule as before a model step, ADR-0013), the segment parks the run with the call's effect not
// yet started, and the next segment starts it with a whole budget. Before, a payment could start
// with a moment left, be aborted at the deadline and end in doubt.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { stepsModel } from '../../test/harness/steps-model.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import type { AgentTool, LanguageModelV3 } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { runSegment } from './run-segment.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

// Budget 4 s, deadline safety 0.2 s, slice margin 1.5 s: nothing new starts after 2.3 s.
const budget = { budgetMs: 4_000, leaseTtlMs: 4_000 };
const settings = { sliceMarginMs: 1_500, deadlineSafetyMs: 200 };
const pastMarginMs = 2_600;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A tool that records each run and takes `ms` for the named recipients. */
function sendTool(ran: string[], slowFor: Record<string, number> = {}): AgentTool<{ to: string }, { sent: string }> {
  return {
    name: 'send_email', description: 'sends an email', inputSchema: z.object({ to: z.string() }),
    async execute({ to }) {
      ran.push(to);
      await sleep(slowFor[to] ?? 0);
      return { sent: to };
    },
  };
}

/** `model`, with its first stream held back `ms` (a slow first step). */
function slowFirstStep(model: LanguageModelV3, ms: number): LanguageModelV3 {
  let first = true;
  const inner = model as unknown as { doStream(options: unknown): Promise<unknown> };
  return {
    ...inner,
    async doStream(options: unknown) {
      if (first) {
        first = false;
        await sleep(ms);
      }
      return inner.doStream(options);
    },
  } as unknown as LanguageModelV3;
}

async function effects(runId: string) {
  return db.query<{ key: string; status: string; fence: number }>(
    'select key, status, fence from agent_kit_effects where run_id = $1 order by key', [runId],
  );
}

it('parks instead of starting a tool call when its model step ended inside the slice margin', async () => {
  const ran: string[] = [];
  const played = stepsModel([{ calls: [{ id: 'c1', name: 'send_email', input: { to: 'alice' } }] }, { text: 'Sent.' }]);
  const rt = makeRuntime(db, { model: slowFirstStep(played, pastMarginMs), tools: { send_email: sendTool(ran) }, settings });
  const turn = await startTurn(db, { ownerId: 'u', text: 'email alice' });

  const first = await runSegment(rt, { runId: turn.runId, owner: 'w1', ...budget });
  expect(first).toMatchObject({ kind: 'parked', status: 'queued' });
  expect(ran).toEqual([]);
  expect(await effects(turn.runId)).toEqual([]); // not started: nothing for anyone to reconcile

  const second = await runSegment(rt, { runId: turn.runId, owner: 'w2', ...budget });
  expect(second).toMatchObject({ kind: 'closed', status: 'completed' });
  expect(ran).toEqual(['alice']);
  expect(await effects(turn.runId)).toEqual([expect.objectContaining({ status: 'completed', fence: 2 })]);
});

it('parks before the next call of a step when the call before it used up the time', async () => {
  const ran: string[] = [];
  const model = stepsModel([
    { calls: [{ id: 'c1', name: 'send_email', input: { to: 'alice' } }, { id: 'c2', name: 'send_email', input: { to: 'bob' } }] },
    { text: 'Both sent.' },
  ]);
  const rt = makeRuntime(db, { model, tools: { send_email: sendTool(ran, { alice: pastMarginMs }) }, settings });
  const turn = await startTurn(db, { ownerId: 'u', text: 'email alice and bob' });

  const first = await runSegment(rt, { runId: turn.runId, owner: 'w1', ...budget });
  expect(first).toMatchObject({ kind: 'parked', status: 'queued' });
  expect(ran).toEqual(['alice']);
  const afterFirst = await effects(turn.runId);
  expect(afterFirst).toHaveLength(1); // bob's effect was not started by alice's tool step
  expect(afterFirst[0]).toMatchObject({ status: 'completed', fence: 1 });

  const second = await runSegment(rt, { runId: turn.runId, owner: 'w2', ...budget });
  expect(second).toMatchObject({ kind: 'closed', status: 'completed' });
  expect(ran).toEqual(['alice', 'bob']);
  expect((await effects(turn.runId)).map((e) => [e.status, e.fence])).toEqual([['completed', 1], ['completed', 2]]);
});

it('starts no tool call once the worker is asked to stop, and the next segment runs it', async () => {
  const ran: string[] = [];
  const stop = new AbortController();
  const played = stepsModel([{ calls: [{ id: 'c1', name: 'send_email', input: { to: 'carol' } }] }, { text: 'Sent.' }]);
  const inner = played as unknown as { doStream(options: unknown): Promise<unknown> };
  // SIGTERM arrives while the model streams its tool call.
  const model = { ...inner, doStream: (options: unknown) => (stop.abort(), inner.doStream(options)) } as unknown as LanguageModelV3;
  const rt = makeRuntime(db, { model, tools: { send_email: sendTool(ran) }, settings });
  const turn = await startTurn(db, { ownerId: 'u', text: 'email carol' });

  const first = await runSegment(rt, { runId: turn.runId, owner: 'w1', ...budget, stopSignal: stop.signal });
  expect(first).toMatchObject({ kind: 'parked', status: 'queued' });
  expect(ran).toEqual([]);
  expect(await effects(turn.runId)).toEqual([]);

  const second = await runSegment(rt, { runId: turn.runId, owner: 'w2', ...budget });
  expect(second).toMatchObject({ kind: 'closed', status: 'completed' });
  expect(ran).toEqual(['carol']);
});
