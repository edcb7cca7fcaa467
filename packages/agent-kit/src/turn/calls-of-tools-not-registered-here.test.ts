// A process settling a call of a tool it does not have (a CLI worker with the demo tools taking
// over the web app's run) must not tell the model the call was invalid when the effect ledger
// already has the call's effect: what another process recorded there is the call's result. A
// `started` effect is left for reconciliation by a process that has the tool, by a settling step
// and by a resumed segment alike, unless the run is given up there. Both stores.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { stepsModel } from '../../test/harness/steps-model.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { formatShowCommand } from '../cli/commands/show.js';
import { startEffect } from '../effect-ledger/index.js';
import { claimRun } from '../lease/lease.js';
import type { AgentTool } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import { reapExpiredRuns } from '../reaper/index.js';
import { advanceFakeNow, clearFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { commitStep, type Step } from './journal.js';
import { runSegment } from './run-segment.js';
import { settleToolCalls } from './tool-calls.js';

let db: Db;
beforeAll(async () => { db = await openTestDb(); });
afterAll(async () => {
  await clearFakeNow(db);
  await db.close();
});

const payThenSorry = () => stepsModel([{ calls: [{ id: 'c1', name: 'charge_card', input: { cents: 1200 } }] }, { text: 'Done.' }]);

/** The web app's charge tool; its first execute charges and then hangs (the process is killed). */
function webChargeTool(provider: Map<string, string>, onHang: () => void): AgentTool<{ cents: number }, { chargeId: string }> {
  return {
    name: 'charge_card', description: 'Charge the card', inputSchema: z.object({ cents: z.number() }),
    async execute(_input, { idempotencyKey }) {
      provider.set(idempotencyKey, 'ch_1');
      onHang();
      return new Promise(() => {});
    },
    async reconcile({ idempotencyKey }) {
      const chargeId = provider.get(idempotencyKey);
      return chargeId ? { found: true, result: { chargeId } } : { found: false };
    },
  };
}

/** Start a turn in the web runtime and let its segment die inside the charge; the lease expires. */
async function webDiesMidCharge(provider: Map<string, string>) {
  let hung = false;
  const web = makeRuntime(db, { tools: { charge_card: webChargeTool(provider, () => (hung = true)) }, model: payThenSorry() });
  const turn = await startTurn(db, { ownerId: 'u', text: 'pay 12 EUR' });
  void runSegment(web, { runId: turn.runId, owner: `web-${turn.runId}`, budgetMs: 60_000 });
  while (!hung) await new Promise((resolve) => setTimeout(resolve, 20));
  await advanceFakeNow(db, 120_000);
  return { web, turn };
}

const toolSteps = (runId: string) => db.query<{ outcome: string; output: unknown }>(
  `select data->>'outcome' as outcome, data->'output' as output from agent_kit_steps where run_id = $1 and kind = 'tool'`, [runId]);

describe('a call of a tool this process does not have', () => {
  it('is settled from an in-doubt effect as in doubt, not as an invalid call', async () => {
    const provider = new Map<string, string>();
    const { web, turn } = await webDiesMidCharge(provider);
    provider.clear(); // the provider has no charge under the key: the web app's hook finds none
    await reapExpiredRuns(web); // in_doubt (not found, and the tool may still be running)
    const worker = makeRuntime(db, { model: payThenSorry() }); // the demo tools only
    expect(await runSegment(worker, { runId: turn.runId, owner: 'worker-2' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(await toolSteps(turn.runId)).toEqual([{ outcome: 'in_doubt', output: expect.objectContaining({ status: 'in_doubt' }) }]);
  }, 20_000);

  it('leaves a started effect to a process that has the tool, whose hook confirms it', async () => {
    // An outsider's trial: `agent-kit drain` (the demo tools) took over the app's run and marked
    // the charge in doubt, where the app's own worker would have found it.
    const provider = new Map<string, string>();
    const { web, turn } = await webDiesMidCharge(provider);
    const logs: Record<string, unknown>[] = [];
    const worker = { ...makeRuntime(db, { model: payThenSorry() }), log: (entry: Record<string, unknown>) => logs.push(entry) };
    await reapExpiredRuns(worker); // requeued; the effect left `started` (unregistered)
    expect(await runSegment(worker, { runId: turn.runId, owner: 'worker-4' }))
      .toEqual({ kind: 'stopped', fence: 2, reason: 'a started effect of charge_card, a tool this process does not have' });
    expect(logs).toContainEqual(expect.objectContaining({ msg: expect.stringMatching(/^a started effect of charge_card, which this process does not have/) }));
    expect(await db.query('select status from agent_kit_effects where run_id = $1', [turn.runId])).toEqual([{ status: 'started' }]);
    // agent-kit show names the claim, which wrote nothing to the thread's log (an adopter's
    // trial counted attempts 3 beside two segments).
    const segmentRows = async () => (await formatShowCommand(db, turn.runId, {}, new Date(Date.now() + 120_000)))
      .split(/^segments \(\d+\)\n/m)[1]!.split(/\n(?! )/)[0]!.split('\n').slice(1).map((line) => line.trim().split(/\s{2,}/));
    expect((await segmentRows()).map((row) => [row[0], row.at(-1)])).toEqual([
      ['1', 'lost (no end written: its process died or froze, or its deadline cut a tool call; the next fence took the run on)'],
      ['2', 'claimed, no segment begun: it settles what a dead segment started, or left the run for a tool it lacks (see its log)'],
    ]);
    await advanceFakeNow(db, 120_000); // the worker's lease runs out; the web app takes the run
    expect(await runSegment(web, { runId: turn.runId, owner: 'web-2' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(await toolSteps(turn.runId)).toEqual([{ outcome: 'completed', output: { chargeId: 'ch_1' } }]);
    expect(provider.size).toBe(1);
    expect((await segmentRows()).map((row) => [row[0], row.at(-1)])).toEqual([
      ['1', 'lost (no end written: its process died or froze, or its deadline cut a tool call; the next fence took the run on)'],
      ['2', 'no segment began (its process lacked a tool the run had started, or stopped or died first)'],
      ['3', 'completed'],
    ]);
  }, 20_000);

  it('judges it in doubt when the run is cancelled: the cancel does not wait for a process with the tool', async () => {
    const provider = new Map<string, string>();
    const { turn } = await webDiesMidCharge(provider);
    await db.query('select agent_kit_request_cancel($1)', [turn.runId]);
    const worker = makeRuntime(db, { model: payThenSorry() });
    expect(await runSegment(worker, { runId: turn.runId, owner: 'worker-6' })).toMatchObject({ kind: 'closed', status: 'aborted' });
    expect(await db.query('select status from agent_kit_effects where run_id = $1', [turn.runId])).toEqual([{ status: 'in_doubt' }]);
  }, 20_000);

  it('judges it in doubt when the run is given up there, out of attempts', async () => {
    const provider = new Map<string, string>();
    const { turn } = await webDiesMidCharge(provider);
    const worker = makeRuntime(db, { model: payThenSorry(), config: { maxRunAttempts: 1 } });
    expect(await runSegment(worker, { runId: turn.runId, owner: 'worker-5' })).toMatchObject({ kind: 'closed', status: 'aborted' });
    expect(await db.query('select status from agent_kit_effects where run_id = $1', [turn.runId])).toEqual([{ status: 'in_doubt' }]);
  }, 20_000);

  it('is settled from a completed effect with its result', async () => {
    const provider = new Map<string, string>();
    const { web, turn } = await webDiesMidCharge(provider);
    await reapExpiredRuns(web); // the web app's reaper has the hook: completed
    const worker = makeRuntime(db, { model: payThenSorry() });
    expect(await runSegment(worker, { runId: turn.runId, owner: 'worker-3' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(await toolSteps(turn.runId)).toEqual([{ outcome: 'completed', output: { chargeId: 'ch_1' } }]);
    expect(provider.size).toBe(1);
  }, 20_000);

  it('stops the segment at a started effect, recording nothing', async () => {
    const turn = await startTurn(db, { ownerId: 'u', text: 'pay, started elsewhere' });
    const claim = await claimRun(db, { runId: turn.runId, owner: 'w1', leaseTtlMs: 30_000 });
    if (!claim.claimed) throw new Error('expected a claim');
    const call = { toolCallId: 'c1', toolName: 'charge_card', input: { cents: 1 } };
    const step: Step = { kind: 'model', stepNo: 0, text: '', toolCalls: [call], finishReason: 'tool-calls' };
    expect((await commitStep(db, claim.lease, step, { type: 'step-finished', data: { stepNo: 0 } })).ok).toBe(true);
    await startEffect(db, claim.lease, `${turn.runId}:0:0`, 'charge_card', call.input);
    const ctx = { db, lease: claim.lease, tools: {}, signal: new AbortController().signal, stopAtMs: Date.now() + 30_000 };
    expect(await settleToolCalls(ctx, [step])).toMatchObject({ kind: 'stopped' });
    expect(await toolSteps(turn.runId)).toEqual([]);
    expect(await db.query('select status from agent_kit_effects where run_id = $1', [turn.runId])).toEqual([{ status: 'started' }]);
  });

  it('with no effect recorded, is still an invalid call the model can correct', async () => {
    const turn = await startTurn(db, { ownerId: 'u', text: 'call a tool nobody has' });
    const rt = makeRuntime(db, { model: stepsModel([{ calls: [{ id: 'c1', name: 'nope', input: {} }] }, { text: 'Sorry.' }]) });
    expect(await runSegment(rt, { runId: turn.runId, owner: 'w1' })).toMatchObject({ kind: 'closed', status: 'completed' });
    // One call, one result: the AI SDK reports an unknown tool's call twice (tool-call, tool-error).
    const [model] = await db.query<{ calls: number }>(
      `select jsonb_array_length(data->'toolCalls') as calls from agent_kit_steps where run_id = $1 and step_no = 0`, [turn.runId]);
    expect(model).toEqual({ calls: 1 });
    expect(await toolSteps(turn.runId)).toEqual([{ outcome: 'invalid', output: 'Unknown tool "nope".' }]);
  });
});
