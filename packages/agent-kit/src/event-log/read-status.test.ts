// The store's status (`agent-kit status`), on both stores: runs in flight by status, expired
// leases and due jobs with the age of the oldest on the database's clock, effects in doubt, and
// the alerts for what has waited past `stale` or needs a verdict; the drains' and reapers' last
// passes, and what they make of an alert.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import { formatStatusCommand } from '../cli/commands/status.js';
import { beginSegment, claimRun, closeRun, parkRun } from '../lease/lease.js';
import { startTurn } from '../queue/start-turn.js';
import { takeOverRun } from '../queue/run-intents.js';
import { advanceFakeNow, setFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { readStoreStatus, statusAlerts } from './read-status.js';
import { nullTurn, testRuntime } from '../../test/chaos/null-turn.js';
import { drainQueue } from '../queue/drain-queue.js';
import { passTiming } from '../queue/passes.js';
import { reapExpiredRuns } from '../reaper/reap-expired-runs.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

async function claimed(text: string, leaseTtlMs: number) {
  const turn = await startTurn(db, { ownerId: 'status', text });
  const claim = await claimRun(db, { runId: turn.runId, owner: 'status-test', leaseTtlMs });
  if (!claim.claimed) throw new Error(`not claimed: ${claim.reason}`);
  await beginSegment(db, claim.lease, claim.run.partial);
  return { turn, lease: claim.lease };
}

describe('readStoreStatus and statusAlerts', () => {
  it('an empty store: nothing in flight, nothing needs attention', async () => {
    const status = await readStoreStatus(db);
    expect(status).toEqual({
      at: expect.any(Date),
      runs: { queued: 0, running: 0, waitingInput: 0, waitingTakeover: 0 },
      expiredLeases: { count: 0, oldestMs: null }, dueJobs: { count: 0, oldestMs: null },
      inDoubt: { effects: 0, runs: 0 }, lastHour: { failed: 0, salvaged: 0 }, lastPass: { drain: null, reap: null },
    });
    expect(statusAlerts(status)).toEqual([]);
    const { text, alerts } = await formatStatusCommand(db, {});
    expect(alerts).toEqual([]);
    expect(text).toBe([
      'runs      0 queued, 0 running, 0 waiting for input, 0 waiting for takeover',
      'leases    none expired', 'jobs      none due', 'in doubt  no effects',
      'failures  none in the runs started in the last hour', 'drain     no pass recorded', 'reaper    no pass recorded', 'nothing needs attention', '',
    ].join('\n'));
  });

  it('counts each status, the backlogs and the doubts, and alerts on what waited past stale', async () => {
    const t0 = new Date('2030-01-01T00:00:00Z');
    await setFakeNow(db, t0);
    // Queued, due at once (a drain's job); and queued with a caller's head start (its job due in 5 s).
    await startTurn(db, { ownerId: 'status', text: 'for a drain', jobDelayMs: 0 });
    await startTurn(db, { ownerId: 'status', text: 'for the request', jobDelayMs: 5_000 });
    const running = await claimed('running with a 60 s lease', 60_000);
    const asking = await claimed('asks a question', 60_000);
    expect(await parkRun(db, asking.lease, 'waiting_input', { id: 'q', kind: 'question', question: '?' })).toBe(true);
    const handedOver = await claimed('handed to an operator', 60_000);
    await takeOverRun(db, { runId: handedOver.turn.runId, by: 'olga' });
    expect(await parkRun(db, handedOver.lease, 'waiting_takeover')).toBe(true);
    for (const key of ['charge:1', 'charge:2']) {
      await db.query(`insert into agent_kit_effects (run_id, key, status, fence, tool) values ($1, $2, 'in_doubt', $3, 'charge_card')`,
        [running.turn.runId, key, running.lease.fence]);
    }

    const now = await readStoreStatus(db);
    expect(now.at.toISOString()).toBe(t0.toISOString());
    expect(now.runs).toEqual({ queued: 2, running: 1, waitingInput: 1, waitingTakeover: 1 });
    expect(now.expiredLeases).toEqual({ count: 0, oldestMs: null });
    expect(now.dueJobs).toEqual({ count: 1, oldestMs: 0 });
    expect(now.inDoubt).toEqual({ effects: 2, runs: 1 });
    expect(statusAlerts(now).map((a) => a.message)).toEqual([
      '2 effects are in doubt in 1 run: list them with agent-kit runs --in-doubt, give each a verdict with agent-kit resolve-effect',
    ]);

    // 181 s on: the lease expired 121 s ago, the drain's job has been due 181 s, the other 176 s.
    await advanceFakeNow(db, 181_000);
    const later = await readStoreStatus(db);
    expect(later.expiredLeases).toEqual({ count: 1, oldestMs: 121_000 });
    expect(later.dueJobs).toEqual({ count: 2, oldestMs: 181_000 });
    expect(statusAlerts(later).map((a) => a.kind)).toEqual(['reaper-behind', 'drain-behind', 'effects-in-doubt']);
    expect(statusAlerts(later)[0]!.message).toBe('a lease expired 121 s ago and its run was not taken over, '
      + 'and no reaper pass is recorded: is a reaper running (agent-kit worker, or the cron route /api/cron/reap)?');
    expect(statusAlerts(later, 150_000).map((a) => a.kind)).toEqual(['drain-behind', 'effects-in-doubt']);
    expect(statusAlerts(later, 181_000).map((a) => a.kind)).toEqual(['effects-in-doubt']);

    const { text } = await formatStatusCommand(db, { stale: 150 });
    expect(text).toBe([
      'runs      2 queued, 1 running, 1 waiting for input, 1 waiting for takeover',
      'leases    1 expired lease, the oldest 121 s ago',
      'jobs      2 jobs due, the oldest for 181 s',
      'in doubt  2 effects in 1 run',
      'failures  none in the runs started in the last hour',
      'drain     no pass recorded',
      'reaper    no pass recorded',
      'needs attention:',
      '  - a job has been due for 181 s, and no drain pass is recorded: is a drain running (agent-kit worker, or the cron route /api/cron/drain)?',
      '  - 2 effects are in doubt in 1 run: list them with agent-kit runs --in-doubt, give each a verdict with agent-kit resolve-effect',
      '',
    ].join('\n'));
    const json = JSON.parse((await formatStatusCommand(db, { json: true })).text) as Record<string, unknown>;
    expect(json).toMatchObject({
      runs: { queued: 2, running: 1, waitingInput: 1, waitingTakeover: 1 },
      expiredLeases: { count: 1, oldestMs: 121_000 }, dueJobs: { count: 2, oldestMs: 181_000 },
      inDoubt: { effects: 2, runs: 1 }, at: '2030-01-01T00:03:01.000Z',
    });
    expect((json.alerts as { kind: string }[]).map((a) => a.kind)).toEqual(['reaper-behind', 'drain-behind', 'effects-in-doubt']);

    // A reaper hands the run back: its job is the drain's backlog now, not the reaper's (the run
    // stays running on its expired lease until a drain claims it; it was still counted here, and
    // the reaper blamed, though it had done its part).
    expect((await reapExpiredRuns(testRuntime(db), { owner: 'status-reaper' })).requeued).toBe(1);
    await advanceFakeNow(db, 181_000);
    const handedBack = await readStoreStatus(db);
    expect(handedBack.expiredLeases).toEqual({ count: 0, oldestMs: null });
    expect(handedBack.dueJobs.count).toBe(3);
    expect(statusAlerts(handedBack).map((a) => a.kind)).toEqual(['drain-behind', 'effects-in-doubt']);
  });

  it('counts the runs of the last hour that failed or were salvaged, not the cancelled ones', async () => {
    // (An on-call trial: right after two turns were salvaged, status said "nothing needs attention".)
    await setFakeNow(db, new Date('2031-01-01T00:00:00Z')); // the runs above are years old
    const failed = await claimed('refused for good', 60_000);
    await closeRun(db, failed.lease, 'failed', { text: '', error: { name: 'APICallError', message: 'bad request' } });
    const cancelled = await claimed('cancelled', 60_000);
    await closeRun(db, cancelled.lease, 'aborted', { text: 'stopped' });
    await claimed('its process dies', 5_000);
    await advanceFakeNow(db, 6_000);
    // Two: this one, and the run the reaper handed back above (created on the real clock, as all here).
    expect(await reapExpiredRuns(testRuntime(db, { maxRunAttempts: 1 }), { owner: 'status-reaper' })).toMatchObject({ salvaged: 2 });
    const status = await readStoreStatus(db);
    expect(status.lastHour).toEqual({ failed: 1, salvaged: 2 });
    expect((await formatStatusCommand(db, {})).text.split('\n')[4]).toBe('failures  1 failed, 2 salvaged (given up after their '
      + 'crash budget), of the runs started in the last hour: agent-kit runs --status failed and agent-kit runs --status aborted, then show');
    // Runs started over an hour ago are not counted.
    await db.query(`update agent_kit_runs set created_at = created_at - interval '61 minutes' where id <> $1`, [failed.turn.runId]);
    expect((await readStoreStatus(db)).lastHour).toEqual({ failed: 1, salvaged: 0 });
  });
});

describe('the last drain and reaper passes', () => {
  let passDb: Db;
  beforeAll(async () => {
    passDb = await openTestDb();
  });
  afterAll(async () => {
    passTiming.recordEveryMs = 10_000;
    await passDb.close();
  });

  it('are recorded by drainQueue and reapExpiredRuns, at most every interval, and name what an alert waits for', async () => {
    const rt = testRuntime(passDb);
    const t0 = new Date('2030-02-01T00:00:00Z');
    await setFakeNow(passDb, t0);
    await drainQueue(rt, { owner: 'drain-a', runSegment: nullTurn() }); // an empty queue: one look
    await reapExpiredRuns(rt, { owner: 'reaper-a' });
    await advanceFakeNow(passDb, 30_000);
    expect((await readStoreStatus(passDb)).lastPass).toEqual({
      drain: { agoMs: 30_000, owner: 'drain-a' }, reap: { agoMs: 30_000, owner: 'reaper-a' },
    });
    // Within the interval, a runtime's next passes write nothing; another runtime's do.
    await reapExpiredRuns(rt, { owner: 'reaper-b' });
    expect((await readStoreStatus(passDb)).lastPass.reap).toEqual({ agoMs: 30_000, owner: 'reaper-a' });
    await reapExpiredRuns(testRuntime(passDb), { owner: 'reaper-b' });
    expect((await readStoreStatus(passDb)).lastPass.reap).toEqual({ agoMs: 0, owner: 'reaper-b' });
    passTiming.recordEveryMs = 0;
    await drainQueue(rt, { owner: 'drain-b', runSegment: nullTurn() });
    expect((await readStoreStatus(passDb)).lastPass.drain).toEqual({ agoMs: 0, owner: 'drain-b' });

    // A lease expired 121 s ago: the reaper looked 30 s ago (it runs, but did not hand the run
    // back), then 200 s ago (none is running now).
    const status = await readStoreStatus(passDb);
    const expired = { ...status, expiredLeases: { count: 1, oldestMs: 121_000 } };
    expect(statusAlerts({ ...expired, lastPass: { ...status.lastPass, reap: { agoMs: 30_000, owner: 'w-reap' } } })[0]!.message)
      .toBe('a lease expired 121 s ago and its run was not taken over, though a reaper looked 30 s ago (w-reap): '
        + 'see its log (its requeue failing, or a reconcile hook slow)');
    expect(statusAlerts({ ...expired, lastPass: { ...status.lastPass, reap: { agoMs: 200_000, owner: 'w-reap' } } })[0]!.message)
      .toBe('a lease expired 121 s ago and its run was not taken over; the last reaper pass was 200 s ago (w-reap): '
        + 'is a reaper still running (agent-kit worker, or the cron route /api/cron/reap)?');
    const due = { ...status, dueJobs: { count: 1, oldestMs: 181_000 } };
    expect(statusAlerts(due).map((a) => a.message)).toEqual(['a job has been due for 181 s, though a drain looked 0 s ago '
      + '(drain-b): see its log (every slot busy with long turns, or its claims failing)']);

    await advanceFakeNow(passDb, 2_500);
    const { text } = await formatStatusCommand(passDb, {});
    expect(text.split('\n').slice(5, 7)).toEqual(['drain     last looked 2.5 s ago (drain-b)', 'reaper    last looked 2.5 s ago (reaper-b)']);
  });
});
