// A segment whose write the store failed, on both stores (ADR-0081): it stops, and as soon as the
// store answers again it gives its lease up (the attempt stays spent, a `segment-failed` event says
// why), so the next reaper pass hands the run on and the turn ends once. One that had left the
// next segment text to go on from parks the run queued instead, no attempt spent (ADR-0115): an
// outsider's trial saw three blips of a failover abort 30 s turns that progressed between them. A
// store still down after `storeErrorHandBackMs` leaves the lease to run out, as before.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { finishRun } from '../../test/faults/pg-faults.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { chargeTool, freezingModel, gate, makeRuntime } from '../../test/harness/turn-kit.js';
import { stepsModel } from '../../test/harness/steps-model.js';
import { APICallError } from 'ai';
import { StoreUnavailableError } from '../errors.js';
import { takeOverRun } from '../queue/run-intents.js';
import type { LanguageModelV3 } from '../model/index.js';
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

/**
 * `inner`, whose statements fail as those of a store that went away do, while `down.now`; with
 * `down.hang`, they wait instead (as for a connection from a pool whose server is gone) and fail
 * once the store is back.
 */
function flaky(inner: Db, down: { now: boolean; hang?: boolean }): Db {
  const failure = () => new StoreUnavailableError('the database does not answer (test)');
  const gone = () => (down.hang
    ? new Promise<never>((_, reject) => {
      const poll = setInterval(() => {
        if (down.now) return;
        clearInterval(poll);
        reject(failure());
      }, 5);
    })
    : Promise.reject(failure()));
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
  text: string, settings: { storeErrorHandBackMs?: number; stopHandBackMs?: number; continueMidStep?: boolean },
  back: (segment: { failed: Promise<void>; ended: Promise<unknown> }) => Promise<unknown>,
  afterMirrored = false, stopSignal?: AbortSignal, hang = false,
) {
  const down = { now: false, hang: false };
  const frozen = gate();
  const paused = gate();
  const failed = gate();
  const model = freezingModel(createScriptedModel({ tokens, delayMs: 1 }), 6, frozen.wait(), paused.open);
  const rt = makeRuntime(flaky(db, down), { model, settings: { mirrorIntervalMs: 5, ...settings } });
  rt.log = (entry) => {
    if (entry.msg !== 'segment error') return;
    failed.open();
    down.hang = hang; // (from the segment's error on, as it hands the run back)
  };
  const turn = await startTurn(db, { ownerId: 'u', text });
  const segment = runSegment(rt, { runId: turn.runId, owner: 'cut-off', stopSignal });
  await paused.wait();
  // The six words streamed before the freeze, in the store: text the next segment goes on from.
  while (afterMirrored && (await db.query<{ p: string }>('select partial as p from agent_kit_runs where id = $1', [turn.runId]))[0]!.p === '') {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  down.now = true;
  frozen.open();
  await back({ failed: Promise.race([failed.wait(), segment]).then(() => undefined), ended: segment });
  down.now = false;
  const outcome = await segment;
  const [run] = await db.query<{ given_up: boolean; attempts: number; failed: string[]; status: string }>(
    `select coalesce(lease_expires_at <= agent_kit_now(), true) as given_up, attempts, status,
       array(select data->'error'->>'message' from agent_kit_thread_events
             where run_id = r.id and type = 'segment-failed') as failed
     from agent_kit_runs r where id = $1`, [turn.runId]);
  return { outcome, run: run!, runId: turn.runId };
}

describe('a segment whose write the store failed', () => {
  it('gives its lease up once the store answers again; the next reaper pass hands the run on', async () => {
    const text = 'a blip of the store';
    // (No text to go on from, whatever the mirror wrote: a step is asked again from its start.)
    const { outcome, run, runId } = await cutOff(text, { continueMidStep: false }, async ({ failed }) => {
      await failed;
      await new Promise((resolve) => setTimeout(resolve, 600)); // down a while: asked more than once
    });
    expect(outcome).toMatchObject({ kind: 'stopped', reason: expect.stringMatching(/does not answer/) });
    // (It held the run on its lease, the whole budget here, and said nothing of it.)
    expect(run).toEqual({ given_up: true, attempts: 1, status: 'running', failed: ['the database does not answer (test)'] });
    expect(await finishRun(makeRuntime(db, { tokens }), runId)).toEqual({ status: 'completed', rounds: 1 });
    const [message] = await db.query<{ text: string }>(
      `select content->>'text' as text from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId]);
    expect(message!.text).toBe(scriptedReplyText([text], tokens));
  });

  it('leaves the lease to run out when the store is still down after storeErrorHandBackMs', async () => {
    // The store comes back only once the segment has returned.
    const { outcome, run } = await cutOff('a long outage', { storeErrorHandBackMs: 300, continueMidStep: false }, ({ ended }) => ended);
    expect(outcome.kind).toBe('stopped');
    expect(run).toEqual({ given_up: false, attempts: 1, status: 'running', failed: [] });
  });

  it('asked to stop meanwhile (a deploy), still hands the run on if the store answers within stopHandBackMs', async () => {
    const deploy = async (stopHandBackMs: number) => {
      const stop = new AbortController();
      return cutOff('a deploy in an outage', { continueMidStep: false, stopHandBackMs }, async ({ failed }) => {
        await failed;
        stop.abort(); // the worker's SIGTERM
        await new Promise((resolve) => setTimeout(resolve, 600));
      }, false, stop.signal);
    };
    // Before, a stop ended the tries at once, and the run waited for its lease to run out.
    const handed = await deploy(10_000);
    expect(handed.outcome.kind).toBe('stopped');
    expect(handed.run).toEqual({ given_up: true, attempts: 1, status: 'running', failed: ['the database does not answer (test)'] });
    const left = await deploy(0);
    expect(left.outcome.kind).toBe('stopped');
    expect(left.run).toEqual({ given_up: false, attempts: 1, status: 'running', failed: [] });
  });

  it('asked to stop, gives up at stopHandBackMs even while a try waits for the store, not after that wait', async () => {
    // The store answers nothing (each statement hangs) until the segment has returned: a try that
    // ran past stopHandBackMs would never return here.
    const stop = new AbortController();
    const { outcome, run } = await cutOff('a deploy while statements hang', { continueMidStep: false, stopHandBackMs: 300 },
      async ({ failed, ended }) => {
        await failed;
        stop.abort(); // the worker's SIGTERM
        await ended;
      }, false, stop.signal, true);
    expect(outcome.kind).toBe('stopped');
    expect(run).toEqual({ given_up: false, attempts: 1, status: 'running', failed: [] });
  });

  it('after text the next segment goes on from, parks the run queued once the store answers, no attempt spent', async () => {
    const text = 'a blip after some words';
    const { outcome, run, runId } = await cutOff(text, {}, async ({ failed }) => {
      await failed;
      await new Promise((resolve) => setTimeout(resolve, 600));
    }, true);
    expect(outcome).toMatchObject({ kind: 'parked', status: 'queued' });
    expect(run).toEqual({ given_up: true, attempts: 0, status: 'queued', failed: [] });
    const [parked] = await db.query<{ reason: string }>(
      `select data->>'reason' as reason from agent_kit_thread_events where run_id = $1 and type = 'run-parked'`, [runId]);
    expect(parked!.reason).toBe('store-error'); // ADR-0121
    const [jobs] = await db.query<{ n: number | string }>('select count(*) as n from agent_kit_jobs where run_id = $1', [runId]);
    expect(Number(jobs!.n)).toBe(1); // due now: no reaper pass needed
    expect(await finishRun(makeRuntime(db, { tokens }), runId)).toEqual({ status: 'completed', rounds: 1 });
    const [message] = await db.query<{ text: string }>(
      `select content->>'text' as text from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId]);
    expect(message!.text).toBe(scriptedReplyText([text], tokens)); // whole, once
  });

  it('records the result of a tool that finished as the store went away, so the next segment does not doubt it', async () => {
    // The tool ran; the write of its result failed. Before, the next segment found the effect
    // `started` and, with no reconcile hook, left it in doubt for an operator (an outsider's trial).
    const down = { now: false };
    const charged: string[] = [];
    const charge = chargeTool(charged);
    const tools = { charge_card: { ...charge, async execute(input: { cents: number }, ctx: Parameters<NonNullable<typeof charge.execute>>[1]) {
      const result = await charge.execute!(input, ctx);
      down.now = true; // gone before the tool step's write
      setTimeout(() => (down.now = false), 400);
      return result;
    } } };
    const model = stepsModel([
      { calls: [{ id: 'c1', name: 'charge_card', input: { cents: 500 } }] },
      { text: 'Charged.' },
    ]);
    const rt = makeRuntime(flaky(db, down), { model, tools });
    const turn = await startTurn(db, { ownerId: 'u', text: 'charge me' });
    const outcome = await runSegment(rt, { runId: turn.runId, owner: 'w1' });
    expect(outcome).toMatchObject({ kind: 'parked', status: 'queued' }); // (its model step was journalled: progress)
    const [effect] = await db.query<{ status: string; result: unknown }>('select status, result from agent_kit_effects where run_id = $1', [turn.runId]);
    expect(effect).toEqual({ status: 'completed', result: { ok: true } });
    expect(await finishRun(makeRuntime(db, { model, tools }), turn.runId)).toEqual({ status: 'completed', rounds: 1 });
    expect(charged).toHaveLength(1);
    const [doubt] = await db.query<{ n: number | string }>(
      "select count(*) as n from agent_kit_effects where run_id = $1 and status = 'in_doubt'", [turn.runId]);
    expect(Number(doubt!.n)).toBe(0);
  });

  it('parks a run an operator asked for meanwhile as waiting_takeover, and says so', async () => {
    const text = 'held during the blip';
    const { outcome, run } = await cutOff(text, {}, async ({ failed }) => {
      await failed;
      const [row] = await db.query<{ id: string }>("select id from agent_kit_runs where owner = 'cut-off' and status = 'running'");
      await takeOverRun(db, { runId: row!.id, by: 'olga' });
    }, true);
    expect(outcome).toMatchObject({ kind: 'parked', status: 'waiting_takeover' }); // (it said queued)
    expect(run).toMatchObject({ status: 'waiting_takeover' });
  });

  it('counts no progress in text a redo of the step drops, when the store fails around that redo', async () => {
    // A prefill model streams text and a tool call, then the provider is overloaded: the step is
    // asked again from its start, the stored text dropped first. The store failing there must not
    // park the run as if that text were there to go on from (attempts reset, for ever).
    const down = { now: false };
    const overloaded = new APICallError({
      message: 'Overloaded', url: 'http://provider.test/v1/messages', requestBodyValues: {}, statusCode: 529,
      responseHeaders: { 'retry-after-ms': '1000' },
    });
    const model = {
      specificationVersion: 'v3', provider: 'anthropic.messages', modelId: 'm', supportedUrls: {},
      doGenerate: () => Promise.reject(new Error('stream only')),
      doStream: async () => ({
        stream: new ReadableStream({
          async start(controller) {
            controller.enqueue({ type: 'stream-start', warnings: [] });
            controller.enqueue({ type: 'text-start', id: 't' });
            controller.enqueue({ type: 'text-delta', id: 't', delta: 'Let me look that up. ' });
            await until(async () => (await db.query<{ p: string }>('select partial as p from agent_kit_runs where id = $1', [runId]))[0]!.p !== '');
            controller.enqueue({ type: 'text-end', id: 't' });
            controller.enqueue({ type: 'tool-call', toolCallId: 'c1', toolName: 'ask_user', input: '{"question":"which?"}' });
            await new Promise((resolve) => setTimeout(resolve, 50)); // (an error drops the chunks not yet read)
            controller.error(overloaded);
          },
        }),
      }),
    } as unknown as LanguageModelV3;
    let runId = '';
    const until = async (done: () => Promise<boolean>) => {
      while (!(await done())) await new Promise((resolve) => setTimeout(resolve, 5));
    };
    const rt = makeRuntime(flaky(db, down), { model, settings: { mirrorIntervalMs: 1 } });
    rt.log = (entry) => {
      if (entry.msg !== 'model retry') return;
      expect(entry.redo).toBe(true); // (the text is dropped: a step with a tool call is asked again from its start)
      down.now = true; // the write that drops the text fails
      setTimeout(() => (down.now = false), 400);
    };
    const turn = await startTurn(db, { ownerId: 'u', text: 'redo me' });
    runId = turn.runId;
    const outcome = await runSegment(rt, { runId: turn.runId, owner: 'redo' });
    expect(outcome).toMatchObject({ kind: 'stopped' }); // (it parked queued, attempts 0)
    const [run] = await db.query<{ status: string; attempts: number }>('select status, attempts from agent_kit_runs where id = $1', [turn.runId]);
    expect(run).toEqual({ status: 'running', attempts: 1 });
  });
});
