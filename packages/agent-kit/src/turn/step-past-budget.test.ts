// A segment cut by its deadline mid-step slices only when it leaves the next one something to go
// on from (ADR-0071), on both stores. A model that thinks longer than a segment's budget before
// its first word spends an attempt per segment, each segment-failed event saying why, and the run
// is given up after MAX_RUN_ATTEMPTS, where it was asked the same step forever before. A segment
// that journalled a step slices even on a model that cannot continue a prefill, and the next one
// asks the cut step again from its start.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { effectsFile, finalMessage, makeRuntime } from '../../test/harness/turn-kit.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { scriptedReplyText } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { runSegment } from './run-segment.js';
import type { SegmentOutcome } from './types.js';

let db: Db;
let effects: ReturnType<typeof effectsFile>;
beforeAll(async () => {
  db = await openTestDb();
  effects = effectsFile();
});
afterAll(async () => {
  effects.restore();
  await db.close();
});

/** Segments of `budgetMs` one after another until the run closes (at most `max`). */
async function segmentsUntilClosed(runtime: ReturnType<typeof makeRuntime>, runId: string, budgets: number[]) {
  const outcomes: SegmentOutcome[] = [];
  for (const [i, budgetMs] of budgets.entries()) {
    const outcome = await runSegment(runtime, { runId, owner: `w${i}`, budgetMs });
    outcomes.push(outcome);
    if (outcome.kind === 'closed') break;
  }
  return outcomes;
}

const eventsOf = (runId: string, type: string) => db.query<{ fence: number; data: Record<string, any> }>(
  'select fence, data from agent_kit_thread_events where run_id = $1 and type = $2 order by seq', [runId, type]);

describe('a segment cut by its deadline mid-step', () => {
  it('spends its attempt when it leaves nothing to go on from, so a model that thinks past every budget is given up', async () => {
    // 200 words of thinking at 5 ms each: a second, in segments of 400 ms.
    const runtime = makeRuntime(db, { tokens: 400, delayMs: 5, config: { maxRunAttempts: 2 } });
    const turn = await startTurn(db, { ownerId: 'u', text: 'ponder forever #think' });
    const outcomes = await segmentsUntilClosed(runtime, turn.runId, new Array(8).fill(400));
    expect(outcomes.map((o) => o.kind)).toEqual(['stopped', 'stopped', 'closed']);
    expect(outcomes.at(-1)).toMatchObject({ kind: 'closed', status: 'aborted' });
    const failed = await eventsOf(turn.runId, 'segment-failed');
    expect(failed.map((e) => [Number(e.fence), e.data.attempt, e.data.error.name])).toEqual([
      [1, 1, 'StepPastBudgetError'], [2, 2, 'StepPastBudgetError'],
    ]);
    expect(failed[0]!.data.error.message).toMatch(/did not finish within the segment's budget of 0\.4 s.*AGENT_KIT_INVOCATION_BUDGET/);
    // Viewers saw it think; nothing of it reached the message.
    expect(await eventsOf(turn.runId, 'reasoning-delta')).not.toEqual([]);
    expect(await finalMessage(db, turn.runId)).toEqual([{ text: '', partial: true }]);
  });

  it('slices after a journalled step on a model without prefill, and the next segment asks the cut step again', async () => {
    const tokens = 60;
    const text = 'note it #effect';
    // The tool call and its result fit in the first 400 ms; the 600 ms reply after them does not.
    const runtime = makeRuntime(db, { tokens, delayMs: 10, settings: { continueMidStep: false } });
    const turn = await startTurn(db, { ownerId: 'u', text });
    const outcomes = await segmentsUntilClosed(runtime, turn.runId, [400, 5_000]);
    expect(outcomes).toMatchObject([{ kind: 'parked', status: 'queued' }, { kind: 'closed', status: 'completed' }]);
    expect(await finalMessage(db, turn.runId)).toEqual([{ text: scriptedReplyText([text], tokens), partial: false }]);
    const [second] = (await eventsOf(turn.runId, 'segment-started')).slice(1);
    expect(second).toMatchObject({ data: { attempt: 1, continued: false, stepNo: 2 } }); // a slice spends no attempt
    expect(effects.lines().filter((line) => line.startsWith(turn.runId))).toHaveLength(1);
  });

  it('gives the run back without spending its attempt when it started with less than half of its invocation left', async () => {
    // A 600 ms reply on a model without prefill: a drain's late segment (400 ms of a 2 s
    // invocation) is cut; a segment with the whole budget finishes it (ADR-0113).
    const tokens = 60;
    const text = 'a reply that needs most of a budget';
    const runtime = makeRuntime(db, { tokens, delayMs: 10, settings: { continueMidStep: false } });
    const turn = await startTurn(db, { ownerId: 'u', text });
    expect(await runSegment(runtime, { runId: turn.runId, owner: 'late', budgetMs: 400, invocationBudgetMs: 2_000 }))
      .toEqual({ kind: 'parked', status: 'queued', fence: 1 });
    const [run] = await db.query<{ status: string; attempts: number }>('select status, attempts from agent_kit_runs where id = $1', [turn.runId]);
    expect(run).toEqual({ status: 'queued', attempts: 0 });
    expect(await eventsOf(turn.runId, 'segment-failed')).toEqual([]);
    expect((await eventsOf(turn.runId, 'run-parked')).map((e) => e.data.reason)).toEqual(['started-late']); // ADR-0121
    expect(await runSegment(runtime, { runId: turn.runId, owner: 'early', budgetMs: 2_000, invocationBudgetMs: 2_000 }))
      .toMatchObject({ kind: 'closed', status: 'completed' });
    expect(await finalMessage(db, turn.runId)).toEqual([{ text: scriptedReplyText([text], tokens), partial: false }]);
    const started = await eventsOf(turn.runId, 'segment-started');
    expect(started.map((e) => e.data.attempt)).toEqual([1, 1]);
  });

  it('still spends the attempt of a segment that had most of its invocation, saying its text cannot be continued', async () => {
    const runtime = makeRuntime(db, { tokens: 60, delayMs: 10, settings: { continueMidStep: false } });
    const turn = await startTurn(db, { ownerId: 'u', text: 'a reply longer than the budget' });
    expect(await runSegment(runtime, { runId: turn.runId, owner: 'w', budgetMs: 400, invocationBudgetMs: 700 }))
      .toMatchObject({ kind: 'stopped' });
    const [failed] = await eventsOf(turn.runId, 'segment-failed');
    expect(failed!.data.error).toMatchObject({ name: 'StepPastBudgetError' });
    expect(failed!.data.error.message).toMatch(/budget of 0\.4 s, and its text cannot be continued by this model \(no prefill/);
  });
});
