// A tool that honours ctx.signal throws when the segment aborts it (its renewal was refused: the
// lease ran out while the provider call was in flight). That throw says nothing about the effect,
// which may have happened, so it must not be recorded `failed` (the model would retry under a
// new key and pay twice): the effect stays `started`, the segment ends as lost, and the next
// owner reconciles it through the tool's hook. Both stores; fake database time expires the lease.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { retryingModel } from '../../test/harness/steps-model.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { openTestDb } from '../../test/harness/test-db.js';
import type { AgentTool } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import { reapExpiredRuns } from '../reaper/index.js';
import { advanceFakeNow, clearFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { runSegment } from './run-segment.js';

let db: Db;
beforeAll(async () => { db = await openTestDb(); });
afterAll(async () => {
  await clearFakeNow(db);
  await db.close();
});

describe('a tool aborted by its own segment\'s signal', () => {
  it('leaves its effect started for the next owner, whose reconcile finds the one charge', async () => {
    const provider = new Map<string, string>(); // charges by idempotency key
    let reconcileCalls = 0;
    let first = true;
    const charge: AgentTool<{ cents: number }, { chargeId: string }> = {
      name: 'charge_card', description: 'Charge the card', inputSchema: z.object({ cents: z.number() }),
      async execute(_input, { idempotencyKey, signal }) {
        provider.set(idempotencyKey, `ch_${provider.size + 1}`); // the provider charged
        if (first) {
          first = false;
          await advanceFakeNow(db, 60_000); // a slow provider: the lease runs out, the renewal is refused
          // fetch(url, { signal }) rejects like this when the signal aborts mid-response
          await new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('This operation was aborted')), { once: true }));
        }
        return { chargeId: provider.get(idempotencyKey)! };
      },
      async reconcile({ idempotencyKey }) {
        reconcileCalls++;
        const chargeId = provider.get(idempotencyKey);
        return chargeId ? { found: true, result: { chargeId } } : { found: false };
      },
    };
    const rt = makeRuntime(db, {
      tools: { charge_card: charge },
      model: retryingModel('charge_card', { cents: 5000 }),
      // Long enough that a loaded machine's slow renewal does not end the lease on the local clock
      // before the tool runs (at 300 ms it did, and the tool never charged); the fake clock ends it.
      config: { leaseTtlMs: 2_000, invocationBudgetMs: 30_000 },
    });
    const turn = await startTurn(db, { ownerId: 'u', text: 'pay 50 EUR' });
    expect(await runSegment(rt, { runId: turn.runId, owner: 'w1' })).toMatchObject({ kind: 'lost', fence: 1 });
    expect(await db.query('select status from agent_kit_effects where run_id = $1', [turn.runId])).toEqual([{ status: 'started' }]);
    expect(await db.query(`select 1 from agent_kit_steps where run_id = $1 and kind = 'tool'`, [turn.runId])).toEqual([]);

    await reapExpiredRuns(rt);
    expect(await runSegment(rt, { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(reconcileCalls).toBe(1);
    expect(provider.size).toBe(1);
    const steps = await db.query<{ outcome: string }>(
      `select data->>'outcome' as outcome from agent_kit_steps where run_id = $1 and kind = 'tool' order by step_no`, [turn.runId]);
    expect(steps).toEqual([{ outcome: 'completed' }]);
  }, 20_000);
});
