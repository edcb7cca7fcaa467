// A segment whose write the store failed, on both stores (ADR-0081): it stops, and as soon as the
// store answers again it gives its lease up (the attempt stays spent, a `segment-failed` event says
// why), so the next reaper pass hands the run on and the turn ends once. A store still down after
// `storeErrorHandBackMs` leaves the lease to run out, as before.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { finishRun } from '../../test/faults/pg-faults.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { freezingModel, gate, makeRuntime } from '../../test/harness/turn-kit.js';
import { StoreUnavailableError } from '../errors.js';
import { createScriptedModel, scriptedReplyText } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import { clearFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { runSegment } from './run-segment.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterEach(async () => {
  await clearFakeNow(db);
});
afterAll(async () => {
  await db.close();
});

const tokens = 20;

/** `inner`, whose statements fail as those of a store that went away do, while `down.now`. */
function flaky(inner: Db, down: { now: boolean }): Db {
  const gone = () => Promise.reject(new StoreUnavailableError('the database does not answer (test)'));
  return new Proxy(inner, {
    get(target, key) {
      if (key === 'query') return (sql: string, params?: readonly unknown[]) => (down.now ? gone() : target.query(sql, params));
      if (key === 'transaction') return (fn: Parameters<Db['transaction']>[0]) => (down.now ? gone() : target.transaction(fn));
      const value: unknown = Reflect.get(target, key);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** A turn whose segment meets a store gone away mid-reply; `back` says when it answers again. */
async function cutOff(
  text: string, settings: { storeErrorHandBackMs?: number },
  back: (segment: { failed: Promise<void>; ended: Promise<unknown> }) => Promise<unknown>,
) {
  const down = { now: false };
  const frozen = gate();
  const paused = gate();
  const failed = gate();
  const model = freezingModel(createScriptedModel({ tokens, delayMs: 1 }), 6, frozen.wait(), paused.open);
  const rt = makeRuntime(flaky(db, down), { model, settings: { mirrorIntervalMs: 5, ...settings } });
  rt.log = (entry) => void (entry.msg === 'segment error' && failed.open());
  const turn = await startTurn(db, { ownerId: 'u', text });
  const segment = runSegment(rt, { runId: turn.runId, owner: 'cut-off' });
  await paused.wait();
  down.now = true;
  frozen.open();
  await back({ failed: Promise.race([failed.wait(), segment]).then(() => undefined), ended: segment });
  down.now = false;
  const outcome = await segment;
  const [run] = await db.query<{ given_up: boolean; attempts: number; failed: string[] }>(
    `select lease_expires_at <= agent_kit_now() as given_up, attempts,
       array(select data->'error'->>'message' from agent_kit_thread_events
             where run_id = r.id and type = 'segment-failed') as failed
     from agent_kit_runs r where id = $1`, [turn.runId]);
  return { outcome, run: run!, runId: turn.runId };
}

describe('a segment whose write the store failed', () => {
  it('gives its lease up once the store answers again; the next reaper pass hands the run on', async () => {
    const text = 'a blip of the store';
    const { outcome, run, runId } = await cutOff(text, {}, async ({ failed }) => {
      await failed;
      await new Promise((resolve) => setTimeout(resolve, 600)); // down a while: asked more than once
    });
    expect(outcome).toMatchObject({ kind: 'stopped', reason: expect.stringMatching(/does not answer/) });
    // (It held the run on its lease, the whole budget here, and said nothing of it.)
    expect(run).toEqual({ given_up: true, attempts: 1, failed: ['the database does not answer (test)'] });
    expect(await finishRun(makeRuntime(db, { tokens }), runId)).toEqual({ status: 'completed', rounds: 1 });
    const [message] = await db.query<{ text: string }>(
      `select content->>'text' as text from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId]);
    expect(message!.text).toBe(scriptedReplyText([text], tokens));
  });

  it('leaves the lease to run out when the store is still down after storeErrorHandBackMs', async () => {
    // The store comes back only once the segment has returned.
    const { outcome, run } = await cutOff('a long outage', { storeErrorHandBackMs: 300 }, ({ ended }) => ended);
    expect(outcome.kind).toBe('stopped');
    expect(run).toEqual({ given_up: false, attempts: 1, failed: [] });
  });
});
