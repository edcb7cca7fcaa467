// A run given up at its crash budget while an effect is in doubt (its segment died mid-payment)
// must say so where people look: the run-salvaged event and the partial message name the in-doubt
// effects, and the run list counts them (`agent-kit runs`, listRuns, GET /api/runs). Both salvage
// paths: the reaper's give-up and a segment that claims a run whose budget is spent. Both stores.
// The salvaged message keeps the questions the run asked and their answers (ADR-0087), as a
// closed one does.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { stepsModel } from '../../test/harness/steps-model.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { formatRunsCommand } from '../cli/commands/runs.js';
import { listRuns } from '../event-log/read-runs.js';
import type { AgentTool, LanguageModelV3 } from '../model/index.js';
import type { ModelStreamPart } from '../model/provider-types.js';
import { startTurn } from '../queue/start-turn.js';
import { advanceFakeNow, clearFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { runSegment } from '../turn/run-segment.js';
import { reapExpiredRuns } from './reap-expired-runs.js';

let db: Db;
beforeAll(async () => { db = await openTestDb(); });
afterAll(async () => { await clearFakeNow(db); await db.close(); });

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** A model whose every step calls charge_card once. */
const chargingModel = {
  specificationVersion: 'v3', provider: 'test', modelId: 'charging', supportedUrls: {},
  doGenerate: () => Promise.reject(new Error('stream only')),
  async doStream() {
    const parts = [
      { type: 'stream-start', warnings: [] },
      { type: 'tool-call', toolCallId: 'c1', toolName: 'charge_card', input: '{"cents":9900}' },
      { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage },
    ] as ModelStreamPart[];
    return { stream: new ReadableStream<ModelStreamPart>({ start(c) { for (const p of parts) c.enqueue(p); c.close(); } }) };
  },
} as unknown as LanguageModelV3;

/** The provider never answers the charge, so the segment's deadline comes mid-tool. */
const chargeCard: AgentTool<{ cents: number }, unknown> = {
  name: 'charge_card', description: 'Charge the card', inputSchema: z.object({ cents: z.number() }),
  execute: () => new Promise(() => {}),
};

/** A run whose only segment died while charging: its effect is left `started`, its lease expired. */
async function runDiedMidPayment(ownerId: string) {
  await clearFakeNow(db);
  const rt = makeRuntime(db, { tools: { charge_card: chargeCard }, model: chargingModel, config: { maxRunAttempts: 1 } });
  const turn = await startTurn(db, { ownerId, text: 'buy the plan' });
  await db.query('delete from agent_kit_jobs where run_id = $1', [turn.runId]);
  expect(await runSegment(rt, { runId: turn.runId, owner: `${ownerId}-w1`, budgetMs: 1_000, leaseTtlMs: 1_000 }))
    .toMatchObject({ kind: 'stopped', reason: 'deadline during tool' });
  await advanceFakeNow(db, 10_000);
  return { rt, runId: turn.runId, key: `${turn.runId}:0:0` };
}

async function salvagedEvent(runId: string) {
  const [event] = await db.query<{ data: Record<string, unknown> }>(
    `select data from agent_kit_thread_events where run_id = $1 and type = 'run-salvaged'`, [runId]);
  return event?.data;
}

async function finalContent(runId: string) {
  const [message] = await db.query<{ content: Record<string, unknown>; partial: boolean }>(
    `select content, partial from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId]);
  return message;
}

describe('a run salvaged with an effect in doubt', () => {
  it('names the effect in its run-salvaged event and partial message when the reaper gives it up', async () => {
    const { rt, runId, key } = await runDiedMidPayment('doubt-reaper');
    expect(await reapExpiredRuns(rt)).toMatchObject({ salvaged: 1, inDoubt: 1 });
    expect(await salvagedEvent(runId)).toMatchObject({ inDoubt: [{ key, tool: 'charge_card' }] });
    expect(await finalContent(runId)).toEqual({
      content: { text: '', salvaged: true, inDoubt: [{ key, tool: 'charge_card' }] }, partial: true,
    });
  });

  it('names the effect in its run-salvaged event when a segment claims it past its crash budget', async () => {
    const { rt, runId, key } = await runDiedMidPayment('doubt-segment');
    expect(await runSegment(rt, { runId, owner: 'doubt-segment-w2', budgetMs: 5_000 }))
      .toMatchObject({ kind: 'closed', status: 'aborted' });
    expect(await salvagedEvent(runId)).toMatchObject({ inDoubt: [{ key, tool: 'charge_card' }] });
  });

  it('says there were none when nothing is in doubt, and keeps the message as it was', async () => {
    await clearFakeNow(db);
    const rt = makeRuntime(db, { config: { maxRunAttempts: 1 } });
    const turn = await startTurn(db, { ownerId: 'doubt-none', text: 'hello' });
    await db.query('delete from agent_kit_jobs where run_id = $1', [turn.runId]);
    await db.query(`select * from agent_kit_claim_run($1, 'dead', '1 second'::interval, '1 second'::interval)`, [turn.runId]);
    await advanceFakeNow(db, 10_000);
    expect(await reapExpiredRuns(rt)).toMatchObject({ salvaged: 1 });
    expect(await salvagedEvent(turn.runId)).toMatchObject({ inDoubt: [] });
    expect(await finalContent(turn.runId)).toEqual({ content: { text: '', salvaged: true }, partial: true });
  });

  it('is counted in the run list: listRuns, `agent-kit runs` and its --json', async () => {
    const { rt, runId } = await runDiedMidPayment('doubt-list');
    await reapExpiredRuns(rt);
    const [summary] = (await listRuns(db, { ownerId: 'doubt-list', limit: 5 }));
    expect(summary).toMatchObject({ id: runId, status: 'aborted', effects: 1, inDoubt: 1 });

    const [header, ...rows] = (await formatRunsCommand(db, { status: 'aborted' }, new Date())).trimEnd().split('\n');
    const column = header!.indexOf('IN DOUBT');
    expect(column).toBeGreaterThan(header!.indexOf('EFFECTS'));
    const row = rows.find((line) => line.startsWith(runId))!;
    expect(row.slice(column).split(/\s+/)[0]).toBe('1');
    const json = JSON.parse(await formatRunsCommand(db, { json: true, status: 'aborted' }, new Date())) as unknown[];
    expect(json).toContainEqual(expect.objectContaining({ id: runId, inDoubt: 1 }));
  });
});

describe('a salvaged run that asked the user something', () => {
  /** A run that asked, was answered by a typed message, then died in its next segment. */
  async function runDiedAfterAnAnswer(ownerId: string) {
    await clearFakeNow(db);
    const model = stepsModel([
      { text: 'Let me ask. ', calls: [{ id: 'q1', name: 'ask_user', input: { question: 'Which colour?' } }] },
      { text: 'Blue it is.' },
    ]);
    const rt = makeRuntime(db, { model, config: { maxRunAttempts: 1 } });
    const turn = await startTurn(db, { ownerId, text: 'pick a colour' });
    expect(await runSegment(rt, { runId: turn.runId, owner: `${ownerId}-w1` })).toMatchObject({ status: 'waiting_input' });
    const typed = await startTurn(db, { threadId: turn.threadId, ownerId, text: 'blue' });
    await db.query('delete from agent_kit_jobs where run_id = $1', [turn.runId]);
    await db.query(`select * from agent_kit_claim_run($1, 'dead', '1 second'::interval, '1 second'::interval)`, [turn.runId]);
    await advanceFakeNow(db, 10_000);
    const asked = [{
      id: 'q1', kind: 'question', toolName: 'ask_user', question: 'Which colour?', answer: 'blue', at: 12, answeredBy: typed.messageId,
    }];
    return { rt, runId: turn.runId, asked };
  }

  it('keeps them in its message when the reaper gives it up', async () => {
    const { rt, runId, asked } = await runDiedAfterAnAnswer('asked-reaper');
    expect(await reapExpiredRuns(rt)).toMatchObject({ salvaged: 1 });
    expect(await finalContent(runId)).toEqual({ content: { text: 'Let me ask. ', salvaged: true, asked }, partial: true });
  });

  it('keeps them in its message when a segment claims it past its crash budget', async () => {
    const { rt, runId, asked } = await runDiedAfterAnAnswer('asked-segment');
    expect(await runSegment(rt, { runId, owner: 'asked-segment-w2', budgetMs: 5_000 }))
      .toMatchObject({ kind: 'closed', status: 'aborted' });
    expect(await finalContent(runId)).toEqual({ content: { text: 'Let me ask. ', salvaged: true, asked }, partial: true });
  });

  it('keeps an approval given but not yet acted on as approved', async () => {
    await clearFakeNow(db);
    const transfer = { amount: 5, to: 'Ann' };
    const model = stepsModel([{ text: 'Pay? ', calls: [{ id: 't1', name: 'transfer_funds', input: transfer }] }, { text: 'Paid.' }]);
    const rt = makeRuntime(db, { model, config: { maxRunAttempts: 1 } });
    const turn = await startTurn(db, { ownerId: 'asked-approval', text: 'pay Ann' });
    expect(await runSegment(rt, { runId: turn.runId, owner: 'asked-approval-w1' })).toMatchObject({ status: 'waiting_input' });
    await db.query(`select agent_kit_submit_input($1, 't1', '{"approved":true}'::jsonb)`, [turn.runId]); // the input route
    await db.query('delete from agent_kit_jobs where run_id = $1', [turn.runId]);
    await db.query(`select * from agent_kit_claim_run($1, 'dead', '1 second'::interval, '1 second'::interval)`, [turn.runId]);
    await advanceFakeNow(db, 10_000);
    expect(await reapExpiredRuns(rt)).toMatchObject({ salvaged: 1 });
    expect((await finalContent(turn.runId))!.content).toEqual({
      text: 'Pay? ', salvaged: true,
      asked: [{ id: 't1', kind: 'approval', toolName: 'transfer_funds', input: transfer, approved: true, at: 5 }],
    });
  });
});
