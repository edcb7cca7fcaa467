// A cancel or takeover recorded while the model was still deciding reaches the segment with the
// commit of the model step that asked for tool calls. No call of that step may run: the commit
// starts no effect (migration 0024) and the engine settles no call, then closes the run aborted
// (cancel) or parks it for the operator (takeover), whose release runs each call once. Both
// stores; the model requests the interrupt as its stream starts, so no mirror write sees it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stepsModel } from '../../test/harness/steps-model.js';
import { chargeTool, makeRuntime } from '../../test/harness/turn-kit.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { claimRun } from '../lease/lease.js';
import type { LanguageModelV3 } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { commitStep, type Step } from './journal.js';
import { runSegment } from './run-segment.js';

let db: Db;
beforeAll(async () => { db = await openTestDb(); });
afterAll(async () => { await db.close(); });


/** Two charges in one step, then a text; `before` runs as the first stream starts. */
function payingModel(before: () => Promise<unknown>): LanguageModelV3 {
  const inner = stepsModel([
    { calls: [{ id: 'c1', name: 'charge_card', input: { cents: 5000 } }, { id: 'c2', name: 'charge_card', input: { cents: 700 } }] },
    { text: 'Paid.' },
  ]);
  let first = true;
  return {
    ...inner,
    async doStream(options) {
      if (first) await before();
      first = false;
      return inner.doStream(options);
    },
  } as LanguageModelV3;
}

const effectRows = (runId: string) => db.query('select key, status from agent_kit_effects where run_id = $1', [runId]);
const toolSteps = (runId: string) => db.query(`select step_no from agent_kit_steps where run_id = $1 and kind = 'tool'`, [runId]);

describe('an interrupt recorded before a step\'s tool calls run', () => {
  it('a cancel closes the run aborted with no call run and no effect started', async () => {
    const charged: string[] = [];
    const turn = await startTurn(db, { ownerId: 'u', text: 'pay rent and fee' });
    const rt = makeRuntime(db, {
      tools: { charge_card: chargeTool(charged) },
      model: payingModel(() => db.query('select agent_kit_request_cancel($1)', [turn.runId])),
    });
    expect(await runSegment(rt, { runId: turn.runId, owner: 'w1' })).toMatchObject({ kind: 'closed', status: 'aborted' });
    expect(charged).toEqual([]);
    expect(await effectRows(turn.runId)).toEqual([]);
    expect(await toolSteps(turn.runId)).toEqual([]);
  });

  it('a takeover parks the run with no call run; after the release each call runs once', async () => {
    const charged: string[] = [];
    const turn = await startTurn(db, { ownerId: 'u', text: 'pay rent and fee, held' });
    const rt = makeRuntime(db, {
      tools: { charge_card: chargeTool(charged) },
      model: payingModel(() => db.query(`select agent_kit_takeover_run($1, 'op')`, [turn.runId])),
    });
    expect(await runSegment(rt, { runId: turn.runId, owner: 'w1' })).toMatchObject({ kind: 'parked', status: 'waiting_takeover' });
    expect(charged).toEqual([]);
    expect(await effectRows(turn.runId)).toEqual([]);

    await db.query('select agent_kit_release_run($1)', [turn.runId]);
    expect(await runSegment(rt, { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(charged).toEqual([`${turn.runId}:0:0`, `${turn.runId}:0:1`]);
    const statuses = (await effectRows(turn.runId)).map((row) => (row as { status: string }).status);
    expect(statuses).toEqual(['completed', 'completed']);
  });

  it('agent_kit_commit_step reports a pending cancel and starts no effect', async () => {
    const turn = await startTurn(db, { ownerId: 'u', text: 'commit under cancel' });
    const claim = await claimRun(db, { runId: turn.runId, owner: 'w1', leaseTtlMs: 30_000 });
    if (!claim.claimed) throw new Error('expected a claim');
    await db.query('select agent_kit_request_cancel($1)', [turn.runId]);
    const call = { toolCallId: 'c1', toolName: 'charge_card', input: { cents: 1 } };
    const step: Step = { kind: 'model', stepNo: 0, text: '', toolCalls: [call], finishReason: 'tool-calls' };
    const committed = await commitStep(db, claim.lease, step, { type: 'step-finished', data: { stepNo: 0 } }, {
      start: { key: `${turn.runId}:0:0`, tool: 'charge_card', input: call.input },
    });
    expect(committed).toMatchObject({ ok: true, interrupt: 'cancel' });
    expect(committed.ok && committed.started).toBeUndefined();
    expect(await effectRows(turn.runId)).toEqual([]);
  });
});
