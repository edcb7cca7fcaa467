// The queue drain on both stores, with null-turn runners (claim, then close/park/lose/throw) so
// the queue is tested apart from the model: every queued run is closed once, jobs it cannot use
// are settled and never lost, the budget and the stop signal end the taking, and (Postgres) two
// drains at once never claim a run twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onPostgres, openTestDb } from '../../test/harness/test-db.js';
import {
  closeWith, count, nullTurn, parkForInput, parkOnStop, runState, stopMidStep, testRuntime,
} from '../../test/chaos/null-turn.js';
import { claimRun, closeRun } from '../lease/lease.js';
import { gate } from '../../test/harness/turn-kit.js';
import { reapExpiredRuns } from '../reaper/reap-expired-runs.js';
import { advanceFakeNow, clearFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import type { RunSegment } from '../turn/types.js';
import { drainQueue, takeMarginMs } from './drain-queue.js';
import { enqueueRun, settleJob, takeJobs, takeJobsForDrain } from './jobs.js';
import { startTurn } from './start-turn.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb({ poolMax: 20 });
});
afterAll(async () => {
  await db.close();
});

/** Clear the queue so each test sees only its own jobs. */
async function emptyQueue() {
  await db.query('delete from agent_kit_jobs');
}

/** `n` queued runs, each in a new thread, or all in one thread (later ones blocked). */
async function newRuns(n: number, oneThread = false) {
  const runs: { runId: string; threadId: string }[] = [];
  for (let i = 0; i < n; i++) {
    const threadId = oneThread ? runs[0]?.threadId : undefined;
    const turn = await startTurn(db, { ownerId: 'user-1', text: `hello ${i}`, threadId });
    runs.push({ runId: turn.runId, threadId: turn.threadId });
  }
  return runs;
}

async function newRun() {
  return startTurn(db, { ownerId: 'user-1', text: 'hello' });
}

describe('drainQueue', () => {
  it('closes every queued run exactly once with the null turn and leaves no job behind', async () => {
    await emptyQueue();
    const runs = [];
    for (let i = 0; i < 5; i++) runs.push((await startTurn(db, { ownerId: 'u', text: `solo ${i}` })).runId);
    const report = await drainQueue(testRuntime(db), { runSegment: nullTurn(), concurrency: 2 });
    expect(report).toMatchObject({ taken: 5, claimed: 5, closed: 5, notClaimed: 0, errors: 0 });
    for (const runId of runs) expect(await runState(db, runId)).toEqual({ status: 'completed', fence: 1, messages: 1, jobs: 0 });
  });

  it('tells each segment the whole budget of its invocation, of which it got what was left (ADR-0113)', async () => {
    await emptyQueue();
    await newRuns(3);
    const seen: Array<{ budgetMs?: number; invocationBudgetMs?: number }> = [];
    const inner = nullTurn();
    const segment: RunSegment = (rt, options) => {
      seen.push({ budgetMs: options.budgetMs, invocationBudgetMs: options.invocationBudgetMs });
      return inner(rt, options);
    };
    const rt = testRuntime(db);
    await drainQueue(rt, { runSegment: segment, concurrency: 1, budgetMs: 20_000 });
    const whole = Math.min(20_000, rt.config.invocationBudgetMs);
    expect(seen).toHaveLength(3);
    for (const given of seen) {
      expect(given.invocationBudgetMs).toBe(whole);
      expect(given.budgetMs).toBeLessThanOrEqual(whole);
    }
  });

  it('claims fresh runs in one batch statement and hands each segment its claim', async () => {
    await emptyQueue();
    for (let i = 0; i < 6; i++) await startTurn(db, { ownerId: 'u', text: `batch ${i}` });
    const claims: { owners: number; rows: number }[] = [];
    let singleClaims = 0;
    const recording: Db = {
      ...db,
      async query(sql, params) {
        const rows = await db.query(sql, params);
        if (sql.includes('agent_kit_claim_due_runs(')) claims.push({ owners: (params![0] as string[]).length, rows: rows.length });
        if (sql.includes('agent_kit_claim_run(')) singleClaims++;
        return rows as never;
      },
    };
    let preClaimed = 0;
    const counting: RunSegment = (rt, options) => {
      if (options.preClaimed) preClaimed++;
      return nullTurn()(rt, options);
    };
    const report = await drainQueue(testRuntime(recording), { runSegment: counting, concurrency: 6 });
    expect(report).toMatchObject({ taken: 6, claimed: 6, closed: 6, notClaimed: 0, errors: 0 });
    expect(preClaimed).toBe(6);
    expect(singleClaims).toBe(0);
    expect(claims.filter((c) => c.rows > 0)).toEqual([{ owners: 6, rows: 6 }]);
  });

  it("runs a thread's queued turns in order: later turns wait, then the close enqueues them", async () => {
    await emptyQueue();
    const first = await startTurn(db, { ownerId: 'u', text: 'one' });
    const second = await startTurn(db, { ownerId: 'u', threadId: first.threadId, text: 'two' });
    const third = await startTurn(db, { ownerId: 'u', threadId: first.threadId, text: 'three' });
    const report = await drainQueue(testRuntime(db), { runSegment: nullTurn(), concurrency: 3 });
    expect(report.closed, JSON.stringify(report)).toBe(3);
    for (const { runId } of [first, second, third]) {
      expect(await runState(db, runId)).toEqual({ status: 'completed', fence: 1, messages: 1, jobs: 0 });
    }
    const closed = await db.query<{ run_id: string }>(
      `select run_id from agent_kit_thread_events where thread_id = $1 and type = 'run-closed' order by seq`,
      [first.threadId]);
    expect(closed.map((e) => e.run_id)).toEqual([first.runId, second.runId, third.runId]);
  });

  it('looks again when the last segment ended while it claimed: its close enqueued the next turn', async () => {
    await emptyQueue();
    const first = await startTurn(db, { ownerId: 'u', text: 'one' });
    const second = await startTurn(db, { ownerId: 'u', threadId: first.threadId, text: 'two' });
    // The race, made certain: the second claim and the take after it both read the queue before
    // the first turn's close enqueues the second, and return only after that segment has ended.
    const closing = gate();
    const firstEnded = gate();
    let claims = 0;
    let takenBeforeClose: unknown[] | undefined;
    const racing: Db = {
      ...db,
      async query(sql, params) {
        const rows = await db.query(sql, params);
        if (sql.includes('agent_kit_claim_due_runs(')) claims++;
        if (claims === 2 && takenBeforeClose === undefined && sql.includes('agent_kit_take_jobs(')) {
          takenBeforeClose = rows;
          closing.open();
          await firstEnded.wait();
          await new Promise((resolve) => setImmediate(resolve)); // the drain's own bookkeeping of the end
        }
        return rows as never;
      },
    };
    const closeAfterGate: RunSegment = nullTurn(async (rt, lease, options) => {
      if (lease.runId === first.runId) await closing.wait();
      const outcome = await closeWith('done')(rt, lease, options);
      if (lease.runId === first.runId) firstEnded.open();
      return outcome;
    });
    const report = await drainQueue(testRuntime(racing), { runSegment: closeAfterGate, concurrency: 2, pollMs: 5 });
    expect(takenBeforeClose).toEqual([]); // the take read the queue before the close: nothing due yet
    expect(claims).toBeGreaterThanOrEqual(3); // it claimed again after the empty claim and take
    expect(report.closed, JSON.stringify(report)).toBe(2);
    expect(await runState(db, second.runId)).toEqual({ status: 'completed', fence: 1, messages: 1, jobs: 0 });
  });

  it('moves the job of a run with a live lease to that lease expiry instead of dropping it', async () => {
    await emptyQueue();
    const { runId } = await newRun();
    const claim = await claimRun(db, { runId, owner: 'holder', leaseTtlMs: 60_000 });
    expect(claim.claimed).toBe(true);
    expect(await enqueueRun(db, runId)).toBe(true); // a stray job for a run someone holds
    const report = await drainQueue(testRuntime(db), { runSegment: nullTurn() });
    expect(report).toMatchObject({ taken: 1, notClaimed: 1, rescheduled: 1, claimed: 0 });
    const [job] = await db.query<{ same: boolean }>(
      `select j.due_at = r.lease_expires_at as same from agent_kit_jobs j join agent_kit_runs r on r.id = j.run_id
       where j.run_id = $1`, [runId]);
    expect(job?.same).toBe(true);
  });

  it('drops the job of a closed run', async () => {
    await emptyQueue();
    const { runId } = await newRun();
    const claim = await claimRun(db, { runId, owner: 'holder', leaseTtlMs: 60_000 });
    if (!claim.claimed) throw new Error('expected a claim');
    await closeRun(db, claim.lease, 'completed', { text: 'done elsewhere' });
    await db.query('insert into agent_kit_jobs (run_id, due_at) values ($1, agent_kit_now())', [runId]);
    const report = await drainQueue(testRuntime(db), { runSegment: nullTurn() });
    expect(report).toMatchObject({ taken: 1, notClaimed: 1, dropped: 1 });
    expect(await runState(db, runId)).toEqual({ status: 'completed', fence: 1, messages: 1, jobs: 0 });
  });

  it('counts a run deleted under a batch-claimed segment as lost, and leaves nothing behind', async () => {
    await emptyQueue();
    const { runId, threadId } = await newRun();
    const deleteFirst: RunSegment = async (rt, options) => {
      await rt.db.query('delete from agent_kit_threads where id = $1', [threadId]); // cascades
      return nullTurn()(rt, options);
    };
    const report = await drainQueue(testRuntime(db), { runSegment: deleteFirst });
    expect(report).toMatchObject({ taken: 1, claimed: 1, lost: 1, notClaimed: 0, errors: 0 });
    expect(await count(db, 'select count(*) as n from agent_kit_jobs where run_id = $1', [runId])).toBe(0);
  });

  it('drops the job of a waiting run, and the answer enqueues it again (nothing lost)', async () => {
    await emptyQueue();
    const { runId } = await newRun();
    const first = await drainQueue(testRuntime(db), { runSegment: nullTurn(parkForInput) });
    expect(first).toMatchObject({ claimed: 1, parked: 1 });
    await db.query('insert into agent_kit_jobs (run_id, due_at) values ($1, agent_kit_now())', [runId]);
    const second = await drainQueue(testRuntime(db), { runSegment: nullTurn() });
    expect(second).toMatchObject({ taken: 1, notClaimed: 1, dropped: 1, claimed: 0 });
    expect((await runState(db, runId)).jobs).toBe(0);
    await db.query(`select agent_kit_submit_input($1, 'q1', '{"text":"blue"}')`, [runId]);
    const third = await drainQueue(testRuntime(db), { runSegment: nullTurn() });
    expect(third).toMatchObject({ taken: 1, closed: 1 });
    expect(await runState(db, runId)).toEqual({ status: 'completed', fence: 2, messages: 1, jobs: 0 });
  });

  it('keeps a job that was re-enqueued after the drain took it, even if its run is blocked', async () => {
    await emptyQueue();
    const runs = await newRuns(2, true);
    const [taken] = await takeJobs(db, 1, 60_000);
    expect(taken?.runId).toBe(runs[0]!.runId);
    const [blocked] = await takeJobs(db, 1, 60_000);
    expect(blocked?.runId).toBe(runs[1]!.runId);
    // The blocked run's job is made due again (as a close's enqueue would) before the settle.
    await enqueueRun(db, runs[1]!.runId);
    expect(await settleJob(db, blocked!.jobId)).toBe('due');
    expect((await runState(db, runs[1]!.runId)).jobs).toBe(1);
    // Without the re-enqueue, the blocked run's job is dropped: the earlier run's close brings it back.
    await db.query(`update agent_kit_jobs set due_at = agent_kit_now() + interval '1 minute' where id = $1`, [blocked!.jobId]);
    expect(await settleJob(db, blocked!.jobId)).toBe('dropped');
  });

  it('counts a throwing segment as an error; its run keeps the lease, and the reaper requeues it', async () => {
    await emptyQueue();
    const { runId } = await newRun();
    const logged: Record<string, unknown>[] = [];
    const failing: RunSegment = async () => {
      throw new Error('boom');
    };
    const rt = testRuntime(db, { leaseTtlMs: 5_000 }, {}, (e) => logged.push(e));
    const report = await drainQueue(rt, { runSegment: failing });
    expect(report).toMatchObject({ taken: 1, errors: 1, claimed: 0 });
    expect(logged).toContainEqual(expect.objectContaining({ runId, fence: 1, attempt: 1, error: 'boom' }));
    // The batch claim took the job with the run: nothing is queued until the lease expires.
    expect(await runState(db, runId)).toEqual({ status: 'running', fence: 1, messages: 0, jobs: 0 });
    await advanceFakeNow(db, 6_000);
    try {
      expect(await reapExpiredRuns(rt)).toMatchObject({ requeued: 1 });
      expect((await runState(db, runId)).jobs).toBe(1);
      expect(await drainQueue(rt, { runSegment: nullTurn() })).toMatchObject({ claimed: 1, closed: 1 });
      expect(await runState(db, runId)).toEqual({ status: 'completed', fence: 2, messages: 1, jobs: 0 });
    } finally {
      await clearFakeNow(db);
    }
  });

  it('counts a segment that stopped mid-step; its run keeps the lease for the reaper', async () => {
    await emptyQueue();
    const { runId } = await newRun();
    const report = await drainQueue(testRuntime(db), { runSegment: nullTurn(stopMidStep) });
    expect(report).toMatchObject({ claimed: 1, stopped: 1 });
    expect(await runState(db, runId)).toMatchObject({ status: 'running', fence: 1, jobs: 0 });
  });

  it('stops taking jobs when less than the margin of its budget is left, and passes the rest on', async () => {
    await emptyQueue();
    await newRuns(8);
    const budgetMs = 1_500;
    const budgets: number[] = [];
    const slow = nullTurn(async (rt, lease, options) => {
      budgets.push(options.budgetMs!);
      return closeWith('slow', 300)(rt, lease, options);
    });
    const report = await drainQueue(testRuntime(db), { runSegment: slow, concurrency: 1, budgetMs });
    expect(takeMarginMs(budgetMs)).toBe(750);
    expect(report.taken).toBeGreaterThan(0);
    expect(report.taken).toBeLessThan(8);
    expect(report.closed).toBe(report.taken);
    expect(budgets.every((b) => b <= budgetMs && b > 0)).toBe(true);
    expect(await count(db, 'select count(*) as n from agent_kit_jobs')).toBe(8 - report.taken);
    expect(report.durationMs).toBeLessThan(budgetMs + 2_000);
  });

  it('takes work under a budget of a second or less (the margin is at most half of it)', async () => {
    await emptyQueue();
    await newRuns(1);
    const report = await drainQueue(testRuntime(db), { runSegment: nullTurn(), budgetMs: 900 });
    expect(takeMarginMs(900)).toBe(450);
    expect(report).toMatchObject({ taken: 1, closed: 1 });
  });

  it('stops taking work on the stop signal and hands the signal to running segments', async () => {
    await emptyQueue();
    const runs = await newRuns(3);
    const controller = new AbortController();
    const report = await drainQueue(testRuntime(db), {
      runSegment: nullTurn(parkOnStop(() => controller.abort())), concurrency: 1, stopSignal: controller.signal,
    });
    expect(report).toMatchObject({ taken: 1, claimed: 1, parked: 1 });
    expect((await runState(db, runs[0]!.runId)).status).toBe('waiting_input');
  });
});

describe('drainQueue and the crash budget', () => {
  it('leaves an expired run with no attempts left to the reaper instead of claiming it again', async () => {
    await emptyQueue();
    const { runId } = await newRun();
    const claim = await claimRun(db, { runId, owner: 'dead', leaseTtlMs: 5_000 });
    expect(claim.claimed).toBe(true);
    await advanceFakeNow(db, 6_000);
    try {
      expect(await enqueueRun(db, runId)).toBe(true); // a job from elsewhere, e.g. a rescheduled one
      const rt = testRuntime(db, { maxRunAttempts: 1 });
      const report = await drainQueue(rt, { runSegment: nullTurn() });
      expect(report).toMatchObject({ taken: 1, notClaimed: 1, dropped: 1, claimed: 0 });
      expect(await runState(db, runId)).toEqual({ status: 'running', fence: 1, messages: 0, jobs: 0 });
      expect(await reapExpiredRuns(rt)).toMatchObject({ salvaged: 1 });
      expect(await runState(db, runId)).toEqual({ status: 'aborted', fence: 2, messages: 1, jobs: 0 });
    } finally {
      await clearFakeNow(db);
    }
  });
});

describe('takeJobsForDrain', () => {
  it('takes the due jobs and, in the same statement, deletes the jobs of spent runs', async () => {
    await emptyQueue();
    const spentRun = (await newRun()).runId;
    expect((await claimRun(db, { runId: spentRun, owner: 'dead', leaseTtlMs: 5_000 })).claimed).toBe(true);
    await advanceFakeNow(db, 6_000);
    try {
      expect(await enqueueRun(db, spentRun)).toBe(true);
      const freshRun = (await newRun()).runId;
      const taken = await takeJobsForDrain(db, 10, 60_000, 1);
      expect(taken.spent).toBe(1);
      expect(taken.jobs.map((j) => j.runId)).toEqual([freshRun]);
      expect(taken.jobs[0]!.tries).toBe(1);
      expect(await count(db, 'select count(*) as n from agent_kit_jobs where run_id = $1', [spentRun])).toBe(0);
      // The taken job is pushed out by the lock, so it is not due again.
      expect((await takeJobsForDrain(db, 10, 60_000, 1)).jobs).toEqual([]);
      // With attempts left, the same expired run would be taken, not dropped.
      expect(await enqueueRun(db, spentRun)).toBe(true);
      expect((await takeJobsForDrain(db, 10, 60_000, 2)).jobs.map((j) => j.runId)).toEqual([spentRun]);
      await expect(takeJobsForDrain(db, 10, 60_000, 0)).rejects.toThrow(/max attempts must be at least 1/);
    } finally {
      await clearFakeNow(db);
    }
  });
});

describe.runIf(onPostgres)('settling a job while the turn before it closes (Postgres)', () => {
  it('never drops the job that the close re-enqueued (migration 0014)', async () => {
    await emptyQueue();
    const first = await startTurn(db, { ownerId: 'u', text: 'first' });
    const second = await startTurn(db, { ownerId: 'u', threadId: first.threadId, text: 'second' });
    const claim = await claimRun(db, { runId: first.runId, owner: 'closer', leaseTtlMs: 60_000 });
    if (!claim.claimed) throw new Error('expected the first turn to be claimed');
    await enqueueRun(db, second.runId); // the drain took a job for the blocked second turn
    await db.query(`update agent_kit_jobs set due_at = now() + interval '1 minute' where run_id = $1`, [second.runId]);
    const [job] = await db.query<{ id: number }>('select id from agent_kit_jobs where run_id = $1', [second.runId]);
    const settlerStarted = gate();
    const closed = gate();
    // The settler's transaction starts first (its now() is older), then the close re-enqueues the
    // second turn without committing, then the settle runs and must wait for it.
    const settling = db.transaction(async (tx) => {
      await tx.query('select now()');
      settlerStarted.open();
      await closed.wait();
      return (await tx.query<{ outcome: string }>('select agent_kit_settle_job($1) as outcome', [job!.id]))[0]!.outcome;
    });
    await settlerStarted.wait();
    await db.transaction(async (tx) => {
      await tx.query(`select agent_kit_close_run($1, 'completed', '{"text":"done"}', 'closer', $2)`, [first.runId, claim.lease.fence]);
      closed.open();
      await new Promise((resolve) => setTimeout(resolve, 200)); // let the settle reach the job's lock
    });
    expect(await settling).toBe('due');
    expect(await count(db, 'select count(*) as n from agent_kit_jobs where run_id = $1 and due_at <= agent_kit_now()', [second.runId])).toBe(1);
  });
});

describe.runIf(onPostgres)('drainQueue, two at once (Postgres)', () => {
  it('never claims a run twice: each run is claimed once (fence 1) and closed once', async () => {
    await emptyQueue();
    const runIds: string[] = [];
    for (let i = 0; i < 40; i++) runIds.push((await startTurn(db, { ownerId: 'u', text: `race ${i}` })).runId);
    const rt = testRuntime(db);
    const reports = await Promise.all([
      drainQueue(rt, { runSegment: nullTurn(closeWith('a', 5)), concurrency: 4, owner: 'drain-a' }),
      drainQueue(rt, { runSegment: nullTurn(closeWith('b', 5)), concurrency: 4, owner: 'drain-b' }),
    ]);
    expect(reports[0]!.closed + reports[1]!.closed).toBe(40);
    expect(reports[0]!.claimed + reports[1]!.claimed).toBe(40);
    for (const runId of runIds) expect(await runState(db, runId)).toEqual({ status: 'completed', fence: 1, messages: 1, jobs: 0 });
    expect(await count(db, `select count(*) as n from agent_kit_thread_events
      where run_id = any($1) and type = 'run-closed'`, [runIds])).toBe(40);
  });
});
