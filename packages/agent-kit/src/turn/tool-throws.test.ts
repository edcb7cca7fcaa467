// What a throw from a tool's execute records (ADR-0040), on both stores. A plain error means the
// effect did not happen: `failed`, and the model may call again. EffectInDoubtError means nobody
// knows: `in_doubt`, and the model is told so. A tool with a reconcile hook is asked first: found
// → `completed` with its result; not found → `failed`; a failing hook → `in_doubt`. A payment
// provider deduplicating by key stands behind the tool; the model retries a call told it failed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { retryingModel } from '../../test/harness/steps-model.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { EffectInDoubtError } from '../index.js';
import type { AgentTool } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { runSegment } from './run-segment.js';

let db: Db;
beforeAll(async () => { db = await openTestDb(); });
afterAll(async () => { await db.close(); });

interface PaymentOptions {
  /** What the first execute throws, after (`charges`) or before the provider charged. */
  firstThrow: Error;
  charges: boolean;
  /** The reconcile hook: none, one that looks the key up, or one that fails. */
  hook: 'none' | 'lookup' | 'fails';
}

/** A charge tool over a provider that deduplicates by idempotency key; the first call throws. */
function paymentTool(options: PaymentOptions) {
  const provider = new Map<string, { chargeId: string }>();
  let calls = 0;
  const tool: AgentTool<{ cents: number }, { chargeId: string }> = {
    name: 'charge_card', description: 'Charge the card', inputSchema: z.object({ cents: z.number() }),
    async execute(_input, { idempotencyKey }) {
      const first = calls++ === 0;
      if (first && !options.charges) throw options.firstThrow;
      if (!provider.has(idempotencyKey)) provider.set(idempotencyKey, { chargeId: `ch_${provider.size + 1}` });
      if (first) throw options.firstThrow; // charged, the answer lost
      return provider.get(idempotencyKey)!;
    },
  };
  if (options.hook === 'lookup') {
    tool.reconcile = async ({ idempotencyKey }) => {
      const found = provider.get(idempotencyKey);
      return found ? { found: true, result: found } : { found: false };
    };
  }
  if (options.hook === 'fails') tool.reconcile = () => Promise.reject(new Error('payments API down'));
  return { tool, provider };
}

async function payOnce(options: PaymentOptions) {
  const { tool, provider } = paymentTool(options);
  const rt = makeRuntime(db, { tools: { charge_card: tool }, model: retryingModel('charge_card', { cents: 5000 }) });
  const turn = await startTurn(db, { ownerId: 'u', text: 'pay 50 EUR' });
  expect(await runSegment(rt, { runId: turn.runId, owner: 'w1' })).toMatchObject({ kind: 'closed', status: 'completed' });
  const effects = await db.query<{ status: string; result: unknown }>(
    'select status, result from agent_kit_effects where run_id = $1 order by key', [turn.runId]);
  const steps = await db.query<{ outcome: string; output: unknown }>(
    `select data->>'outcome' as outcome, data->'output' as output from agent_kit_steps
     where run_id = $1 and kind = 'tool' order by step_no`, [turn.runId]);
  return { charges: provider.size, effects, steps };
}

const timeout = new Error('ETIMEDOUT: no response from payments API');

describe('a tool whose execute throws', () => {
  it('with a hook that finds the effect: completed with the hook\'s result, and no second charge', async () => {
    const paid = await payOnce({ firstThrow: timeout, charges: true, hook: 'lookup' });
    expect(paid.charges).toBe(1);
    expect(paid.effects).toEqual([{ status: 'completed', result: { chargeId: 'ch_1' } }]);
    expect(paid.steps).toEqual([{ outcome: 'completed', output: { chargeId: 'ch_1' } }]);
  });

  it('with a hook that does not find it: failed, and the model\'s retry is a new call', async () => {
    const paid = await payOnce({ firstThrow: new Error('card declined'), charges: false, hook: 'lookup' });
    expect(paid.charges).toBe(1);
    expect(paid.effects.map((e) => e.status)).toEqual(['failed', 'completed']);
    expect(paid.steps[0]).toEqual({ outcome: 'failed', output: 'card declined' });
  });

  it('with a hook that fails: in doubt, the model is told so and does not retry', async () => {
    const paid = await payOnce({ firstThrow: timeout, charges: true, hook: 'fails' });
    expect(paid.charges).toBe(1);
    expect(paid.effects).toHaveLength(1);
    expect(paid.effects[0]).toMatchObject({ status: 'in_doubt', result: { reason: expect.stringContaining('payments API down') } });
    expect(paid.steps).toEqual([{ outcome: 'in_doubt', output: expect.objectContaining({ status: 'in_doubt' }) }]);
  });

  it('an EffectInDoubtError, without a hook: in doubt, the model is told so and does not retry', async () => {
    const paid = await payOnce({ firstThrow: new EffectInDoubtError('no answer from payments API'), charges: true, hook: 'none' });
    expect(paid.charges).toBe(1);
    expect(paid.effects).toHaveLength(1);
    expect(paid.effects[0]).toMatchObject({ status: 'in_doubt', result: { reason: expect.stringContaining('no answer from payments API') } });
    expect(paid.steps).toEqual([{
      outcome: 'in_doubt',
      output: expect.objectContaining({ status: 'in_doubt', message: expect.stringContaining('may or may not have happened') }),
    }]);
  });

  it('an EffectInDoubtError, with a hook that does not find it: still in doubt', async () => {
    const paid = await payOnce({ firstThrow: new EffectInDoubtError('no answer'), charges: false, hook: 'lookup' });
    expect(paid.effects.map((e) => e.status)).toEqual(['in_doubt']);
    expect(paid.charges).toBe(0);
  });

  it('a plain error without a hook: failed, as before (the tool says the effect did not happen)', async () => {
    const paid = await payOnce({ firstThrow: new Error('card declined'), charges: false, hook: 'none' });
    expect(paid.effects.map((e) => e.status)).toEqual(['failed', 'completed']);
    expect(paid.steps[0]).toEqual({ outcome: 'failed', output: 'card declined' });
    expect(paid.charges).toBe(1);
  });
});
