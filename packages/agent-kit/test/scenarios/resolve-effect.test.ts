// An operator who has checked the outside system records the verdict on an effect in doubt
// (`agent-kit resolve-effect`, resolveEffect): the run leaves the in-doubt list, the earlier
// result is kept beside the verdict, and only an effect in doubt can be resolved. Both stores;
// the effects come from the turn engine with a tool that throws EffectInDoubtError.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { retryingModel } from '../harness/steps-model.js';
import { makeRuntime } from '../harness/turn-kit.js';
import { openTestDb } from '../harness/test-db.js';
import { resolveVerdict } from '../../src/cli/commands/resolve-effect.js';
import { resolveEffect } from '../../src/effect-ledger/index.js';
import { ConflictError, EffectInDoubtError, NotFoundError } from '../../src/index.js';
import { listRuns } from '../../src/event-log/read-runs.js';
import type { AgentTool } from '../../src/model/index.js';
import { startTurn } from '../../src/queue/start-turn.js';
import type { Db } from '../../src/store/db.js';
import { runSegment } from '../../src/turn/run-segment.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

/** A finished turn whose one charge_card call ended in doubt (or, `ok`, completed). */
async function payTurn(ok = false): Promise<{ runId: string; key: string }> {
  const tool: AgentTool<{ cents: number }, unknown> = {
    name: 'charge_card', description: 'Charge the card', inputSchema: z.object({ cents: z.number() }),
    execute: () => (ok ? Promise.resolve({ chargeId: 'ch_1' }) : Promise.reject(new EffectInDoubtError('no answer'))),
  };
  const rt = makeRuntime(db, { tools: { charge_card: tool }, model: retryingModel('charge_card', { cents: 500 }, 1) });
  const turn = await startTurn(db, { ownerId: 'olga', text: 'pay 5 EUR' });
  await runSegment(rt, { runId: turn.runId, owner: 'w1' });
  const [effect] = await db.query<{ key: string }>('select key from agent_kit_effects where run_id = $1', [turn.runId]);
  return { runId: turn.runId, key: effect!.key };
}

const inDoubtRuns = async () => (await listRuns(db, { ownerId: null, inDoubt: true, limit: 50 })).map((r) => r.id);

it('records the verdict, keeps what was known before, and takes the run off the in-doubt list', async () => {
  const charged = await payTurn();
  const notCharged = await payTurn();
  expect(await inDoubtRuns()).toEqual(expect.arrayContaining([charged.runId, notCharged.runId]));

  const done = await resolveEffect(db, { ...charged, happened: true, by: 'ops-anna', note: 'ch_9 in the dashboard' });
  expect(done).toMatchObject({ status: 'completed', tool: 'charge_card' });
  expect(done.result).toMatchObject({
    resolved: { by: 'ops-anna', note: 'ch_9 in the dashboard', happened: true },
    inDoubt: { key: charged.key },
  });
  const failed = await resolveEffect(db, { ...notCharged, happened: false, by: 'ops-anna' });
  expect(failed).toMatchObject({ status: 'failed', result: { resolved: { happened: false, note: null } } });
  const listed = await inDoubtRuns();
  expect(listed).not.toContain(charged.runId);
  expect(listed).not.toContain(notCharged.runId);
});

it('refuses to resolve an effect that is not in doubt, or that does not exist, changing nothing', async () => {
  const doubtful = await payTurn();
  await resolveEffect(db, { ...doubtful, happened: true, by: 'ops' });
  await expect(resolveEffect(db, { ...doubtful, happened: false, by: 'ops' })).rejects.toThrow(ConflictError);
  const paid = await payTurn(true);
  await expect(resolveEffect(db, { ...paid, happened: false, by: 'ops' }))
    .rejects.toThrow(/is completed, not in doubt/);
  await expect(resolveEffect(db, { runId: paid.runId, key: 'no-such-key', happened: true, by: 'ops' }))
    .rejects.toThrow(NotFoundError);
  const rows = await db.query<{ run_id: string; status: string }>(
    'select run_id, status from agent_kit_effects where run_id in ($1, $2)', [doubtful.runId, paid.runId]);
  expect(rows.map((r) => [r.run_id, r.status]).sort()).toEqual(
    [[doubtful.runId, 'completed'], [paid.runId, 'completed']].sort());
});

it('the command takes exactly one verdict', () => {
  expect(resolveVerdict({ happened: true, by: 'x' })).toBe(true);
  expect(resolveVerdict({ didNotHappen: true, by: 'x' })).toBe(false);
  expect(() => resolveVerdict({ by: 'x' })).toThrow(/exactly one of --happened and --did-not-happen/);
  expect(() => resolveVerdict({ happened: true, didNotHappen: true, by: 'x' })).toThrow(/exactly one/);
});
