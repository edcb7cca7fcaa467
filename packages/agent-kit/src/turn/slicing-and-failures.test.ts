// Deadlines and failures on both stores: a turn longer than one invocation is sliced across
// segments and still ends with the unbroken reply; a provider that errors or hangs ends the
// segment cleanly with the attempt spent and the run resumable; the mirror's write rate is bounded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { failingModel, finalMessage, freezingModel, makeRuntime } from '../../test/harness/turn-kit.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { createScriptedModel, scriptedReplyText, type LanguageModelV3 } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { runSegment } from './run-segment.js';
import type { SegmentOutcome } from './types.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

/** Why each park of the run handed it on (ADR-0121), in order. */
async function parkReasons(runId: string): Promise<(string | null)[]> {
  const rows = await db.query<{ reason: string | null }>(
    `select data->>'reason' as reason from agent_kit_thread_events where run_id = $1 and type = 'run-parked' order by seq`, [runId]);
  return rows.map((row) => row.reason);
}

async function runUntilClosed(runtime: ReturnType<typeof makeRuntime>, runId: string, budgetMs: number) {
  const outcomes: SegmentOutcome[] = [];
  for (let i = 0; i < 50; i++) {
    const outcome = await runSegment(runtime, { runId, owner: `w${i}`, budgetMs });
    outcomes.push(outcome);
    if (outcome.kind === 'closed') return outcomes;
  }
  throw new Error(`run not closed after 50 segments: ${JSON.stringify(outcomes.slice(-3))}`);
}

describe('slicing', () => {
  it('slices a long streamed step across invocations and continues mid-step to the same reply', async () => {
    // Segments of 1 s for a reply of 2: each has time to stream some of it on a busy machine (a
    // segment cut before its first word spends its attempt instead, ADR-0071; 400 ms segments
    // were cut so once on the embedded store in a full CI run, 150 ms ones before that).
    const runtime = makeRuntime(db, { tokens: 200, delayMs: 10, settings: { mirrorIntervalMs: 20 } });
    const turn = await startTurn(db, { ownerId: 'u', text: 'a long turn' });
    const outcomes = await runUntilClosed(runtime, turn.runId, 1_000);
    expect(outcomes.length).toBeGreaterThan(1);
    expect(outcomes.slice(0, -1).filter((o) => !(o.kind === 'parked' && o.status === 'queued'))).toEqual([]);
    expect(await finalMessage(db, turn.runId)).toEqual([{ text: scriptedReplyText(['a long turn'], 200), partial: false }]);
    const [run] = await db.query<{ attempts: number; fence: number; lease_expires_at: Date | null }>(
      'select attempts, fence, lease_expires_at from agent_kit_runs where id = $1', [turn.runId],
    );
    expect(Number(run!.fence)).toBe(outcomes.length);
    expect(run!.attempts).toBe(1); // slices are voluntary: the crash budget was reset each time
    expect(await parkReasons(turn.runId)).toEqual(outcomes.slice(0, -1).map(() => 'slice'));
  });

  it('never lets a lease outlive the segment deadline', async () => {
    const runtime = makeRuntime(db, { tokens: 30, delayMs: 10, config: { leaseTtlMs: 40 } });
    const turn = await startTurn(db, { ownerId: 'u', text: 'renew me' });
    const segment = runSegment(runtime, { runId: turn.runId, owner: 'w1', budgetMs: 200, leaseTtlMs: 40 });
    let violations = 0;
    let samples = 0;
    while (samples < 20) {
      const [row] = await db.query<{ ok: boolean | null }>(
        'select lease_expires_at <= deadline_at as ok from agent_kit_runs where id = $1', [turn.runId],
      );
      if (row!.ok === false) violations++;
      samples++;
      await new Promise((r) => setTimeout(r, 8));
    }
    await segment;
    expect(violations).toBe(0);
  });

  it('slices at a step boundary when asked to stop (SIGTERM) and the next segment finishes', async () => {
    const runtime = makeRuntime(db, { tokens: 6 });
    const turn = await startTurn(db, { ownerId: 'u', text: 'stop please #effect' });
    const stop = new AbortController();
    stop.abort();
    expect(await runSegment(runtime, { runId: turn.runId, owner: 'w1', stopSignal: stop.signal })).toMatchObject({
      kind: 'parked', status: 'queued',
    });
    expect(await parkReasons(turn.runId)).toEqual(['stop']);
    expect(await runSegment(runtime, { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed', status: 'completed' });
  });

  // ADR-0117: a step longer than the platform's grace was killed with the process, and its run
  // waited for its lease (an on-call trial's worker took 15 s to stop after SIGTERM).
  it.each([
    ['goes on from its text', true],
    ['asks the step again', false],
  ])('cuts a model step that outlasts stopGraceMs once asked to stop: queued at once, no attempt spent, and the next segment %s', async (_, continueMidStep) => {
    const tokens = 60;
    const model = createScriptedModel({ tokens, delayMs: 25 }); // one step of 1.5 s or more
    const text = `a long answer, then a deploy ${continueMidStep}`;
    const turn = await startTurn(db, { ownerId: 'u', text });
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 300); // the SIGTERM, in the middle of the step
    // (The grace through the configuration, AGENT_KIT_STOP_GRACE's, as a worker reads it.)
    const runtime = makeRuntime(db, { model, settings: { continueMidStep }, config: { stopGraceMs: 200 } });
    expect(await runSegment(runtime, { runId: turn.runId, owner: 'w1', stopSignal: stop.signal }))
      .toMatchObject({ kind: 'parked', status: 'queued' });
    const whole = scriptedReplyText([text], tokens);
    const [run] = await db.query<{ attempts: number; partial: string }>('select attempts, partial from agent_kit_runs where id = $1', [turn.runId]);
    expect(run!.attempts).toBe(0);
    expect(whole.startsWith(run!.partial) && run!.partial.length < whole.length).toBe(true); // cut, not finished
    expect(run!.partial.length).toBeGreaterThan(0);
    expect(await parkReasons(turn.runId)).toEqual(['stop']);
    expect(await runSegment(makeRuntime(db, { model, settings: { continueMidStep } }), { runId: turn.runId, owner: 'w2' }))
      .toMatchObject({ kind: 'closed', status: 'completed' });
    expect((await finalMessage(db, turn.runId))[0]!.text).toBe(whole);
  });

  it('lets a step that ends within stopGraceMs finish: here the last, so the turn completes in the segment', async () => {
    const tokens = 8;
    const model = createScriptedModel({ tokens, delayMs: 25 }); // 200 ms
    const text = 'short, then a deploy';
    const turn = await startTurn(db, { ownerId: 'u', text });
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 50);
    const runtime = makeRuntime(db, { model, settings: { stopGraceMs: 60_000 } });
    expect(await runSegment(runtime, { runId: turn.runId, owner: 'w1', stopSignal: stop.signal }))
      .toMatchObject({ kind: 'closed', status: 'completed' });
    expect((await finalMessage(db, turn.runId))[0]!.text).toBe(scriptedReplyText([text], tokens));
  });
});

describe('provider failures', () => {
  it('ends the segment cleanly when the stream errors, spends the attempt, and the run resumes', async () => {
    const scripted = createScriptedModel({ tokens: 10 });
    const broken = makeRuntime(db, { model: failingModel(scripted, 4, new Error('upstream 502')) });
    const turn = await startTurn(db, { ownerId: 'u', text: 'flaky provider' });
    const outcome = await runSegment(broken, { runId: turn.runId, owner: 'w1' });
    expect(outcome).toMatchObject({ kind: 'stopped', reason: 'upstream 502' });
    const [run] = await db.query<{ status: string; expired: boolean; attempts: number; last_error: { message: string } }>(
      'select status, lease_expires_at <= agent_kit_now() as expired, attempts, last_error from agent_kit_runs where id = $1',
      [turn.runId],
    );
    expect(run).toMatchObject({ status: 'running', expired: true, attempts: 1, last_error: { message: 'upstream 502' } });
    const healthy = makeRuntime(db, { tokens: 10 });
    expect(await runSegment(healthy, { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect((await finalMessage(db, turn.runId))[0]!.text).toBe(scriptedReplyText(['flaky provider'], 10));
    const [attempts] = await db.query<{ attempts: number }>('select attempts from agent_kit_runs where id = $1', [turn.runId]);
    expect(attempts!.attempts).toBe(2);
  });

  it('asks a stream that hangs again, after the stall timeout, in the same segment (ADR-0063)', async () => {
    const hung = makeRuntime(db, {
      model: freezingModel(createScriptedModel({ tokens: 10 }), 3, new Promise(() => {}), () => {}),
      settings: { stallTimeoutMs: 100 },
    });
    const turn = await startTurn(db, { ownerId: 'u', text: 'hanging provider' });
    const outcome = await runSegment(hung, { runId: turn.runId, owner: 'w1' });
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed', fence: 1 });
    const retries = await db.query<{ data: Record<string, unknown> }>(
      `select data from agent_kit_thread_events where run_id = $1 and type = 'model-retry'`, [turn.runId]);
    expect(retries.map((r) => r.data)).toMatchObject([
      { retry: 1, redo: false, error: { name: 'ModelStalledError', message: 'the model stream sent nothing for 100 ms' } },
    ]);
    // The scripted model continues the prefill: the words before the hang are kept, none twice.
    expect((await finalMessage(db, turn.runId))[0]!.text).toBe(scriptedReplyText(['hanging provider'], 10));
  });

  it('fails the segment on a stream that hangs every time, once its retries are spent, and leaves the run resumable', async () => {
    const hanging = (): LanguageModelV3 => {
      const inner = createScriptedModel({ tokens: 10 });
      return { ...inner, doStream: async () => ({ stream: new ReadableStream({ pull: () => new Promise(() => {}) }) }) } as LanguageModelV3;
    };
    const hung = makeRuntime(db, { model: hanging(), settings: { stallTimeoutMs: 100, modelRetries: 1 } });
    const turn = await startTurn(db, { ownerId: 'u', text: 'always hanging' });
    const outcome = await runSegment(hung, { runId: turn.runId, owner: 'w1' });
    expect(outcome).toMatchObject({ kind: 'stopped', reason: 'the model stream sent nothing for 100 ms' });
    const events = await db.query<{ type: string }>(`select type from agent_kit_thread_events where run_id = $1 order by seq`, [turn.runId]);
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(['model-retry', 'segment-failed']));
    expect(await runSegment(makeRuntime(db, { tokens: 10 }), { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed' });
  });
});

describe('stream mirror', () => {
  it('keeps database writes per second bounded however fast tokens arrive', async () => {
    const runtime = makeRuntime(db, { tokens: 2_000, delayMs: 0.5, settings: { mirrorIntervalMs: 100 } });
    const turn = await startTurn(db, { ownerId: 'u', text: 'fast tokens' });
    const started = Date.now();
    const outcome = await runSegment(runtime, { runId: turn.runId, owner: 'w1' });
    expect(outcome, JSON.stringify(outcome)).toMatchObject({ kind: 'closed' });
    const seconds = (Date.now() - started) / 1000;
    const [deltas] = await db.query<{ n: number }>(
      `select count(*)::int as n from agent_kit_thread_events where run_id = $1 and type = 'text-delta'`, [turn.runId],
    );
    // One write per 100 ms interval at most, plus the final flush.
    expect(deltas!.n).toBeLessThanOrEqual(Math.ceil(seconds * 10) + 2);
    expect(deltas!.n).toBeGreaterThan(1);
    expect((await finalMessage(db, turn.runId))[0]!.text).toBe(scriptedReplyText(['fast tokens'], 2_000));
  });

  it("writes a step's first text at once, then one write per interval", async () => {
    // A fast model: its first token comes at once and the rest over 400 ms, against a 300 ms
    // interval. Waiting an interval after the segment's start would hold the first token 300 ms.
    const runtime = makeRuntime(db, { tokens: 10, delayMs: 40, settings: { mirrorIntervalMs: 300 } });
    const turn = await startTurn(db, { ownerId: 'u', text: 'fast first token' });
    const outcome = await runSegment(runtime, { runId: turn.runId, owner: 'w1' });
    expect(outcome, JSON.stringify(outcome)).toMatchObject({ kind: 'closed' });
    const events = await db.query<{ type: string; ms: number }>(
      `select type, extract(epoch from created_at - min(created_at) over ()) * 1000 as ms
       from agent_kit_thread_events where run_id = $1 and type in ('segment-started', 'text-delta') order by seq`,
      [turn.runId],
    );
    const [started, ...deltas] = events.map((e) => ({ type: e.type, ms: Number(e.ms) }));
    expect(started?.type).toBe('segment-started');
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas[0]!.ms - started!.ms).toBeLessThan(150);
    // After the first, the interval holds: no two mirror writes closer than it.
    for (let i = 1; i < deltas.length - 1; i++) expect(deltas[i]!.ms - deltas[i - 1]!.ms).toBeGreaterThanOrEqual(290);
  });
});

describe('crash budget', () => {
  it('salvages instead of running when a claim would exceed MAX_RUN_ATTEMPTS', async () => {
    const runtime = makeRuntime(db, { tokens: 10, config: { maxRunAttempts: 2 } });
    const turn = await startTurn(db, { ownerId: 'u', text: 'doomed' });
    // Two segments died after streaming some text (their leases ran out).
    await db.query(
      `update agent_kit_runs set status = 'running', owner = 'dead', fence = 2, attempts = 2, partial = 'half an ans',
         lease_expires_at = agent_kit_now() - interval '1 second', deadline_at = agent_kit_now() where id = $1`,
      [turn.runId],
    );
    expect(await runSegment(runtime, { runId: turn.runId, owner: 'w3' })).toMatchObject({ kind: 'closed', status: 'aborted' });
    expect(await finalMessage(db, turn.runId)).toEqual([{ text: 'half an ans', partial: true }]);
    // The claim that gave it up ran nothing: the run shows the two attempts its segments spent,
    // as the reaper's salvage would (it showed 3 of 2).
    expect(await db.query('select status, attempts from agent_kit_runs where id = $1', [turn.runId]))
      .toEqual([{ status: 'aborted', attempts: 2 }]);
    const [salvaged] = await db.query<{ data: { attempts: number; reason: string } }>(
      `select data from agent_kit_thread_events where run_id = $1 and type = 'run-salvaged'`, [turn.runId]);
    expect(salvaged!.data).toMatchObject({ attempts: 2, reason: expect.stringContaining('2 times in a row') });
  });
});
