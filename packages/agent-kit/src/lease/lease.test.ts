// The fenced lease core on both stores: claims raise the fence by one, a stale fence writes
// nothing, expiry lets another owner take over, closed runs stay closed, renewal stops at the
// deadline, and bad input fails clearly without a partial write.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb, onPostgres } from '../../test/harness/test-db.js';
import { InvalidArgumentError } from '../errors.js';
import type { Db } from '../store/db.js';
import { advanceFakeNow } from '../store/clock.js';
import { settleJob } from '../queue/jobs.js';
import { startTurn } from '../queue/start-turn.js';
import {
  appendEvent, beginSegment, claimRun, closeRun, mirrorPartial, parkForRetry, parkRun, renewLease, retryStep, type Lease,
} from './lease.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

async function newRun(text = 'hello') {
  return startTurn(db, { ownerId: 'user-1', text });
}

async function claimed(runId: string, owner: string, leaseTtlMs = 30_000, budgetMs?: number): Promise<Lease> {
  const result = await claimRun(db, { runId, owner, leaseTtlMs, budgetMs });
  if (!result.claimed) throw new Error(`expected a claim, got ${result.reason}`);
  return result.lease;
}

/** Everything a zombie could have changed, to compare before and after its writes. */
async function snapshot(runId: string, threadId: string) {
  const [run] = await db.query('select * from agent_kit_runs where id = $1', [runId]);
  const events = await db.query('select seq, type from agent_kit_thread_events where thread_id = $1 order by seq', [threadId]);
  const messages = await db.query('select id from agent_kit_messages where thread_id = $1 order by id', [threadId]);
  const effects = await db.query('select * from agent_kit_effects where run_id = $1', [runId]);
  const steps = await db.query('select * from agent_kit_steps where run_id = $1', [runId]);
  return JSON.stringify({ run, events, messages, effects, steps });
}

describe('claim', () => {
  it('raises the fence and attempts by exactly one and sets owner, status and expiry', async () => {
    const { runId } = await newRun();
    const lease = await claimed(runId, 'w1', 10_000);
    expect(lease.fence).toBe(1);
    expect(lease.attempts).toBe(1);
    const [run] = await db.query<{ status: string; owner: string; ttl: number }>(
      `select status, owner, extract(epoch from lease_expires_at - agent_kit_now()) as ttl from agent_kit_runs where id = $1`,
      [runId],
    );
    expect(run!.status).toBe('running');
    expect(run!.owner).toBe('w1');
    expect(Number(run!.ttl)).toBeGreaterThan(9);
    expect(Number(run!.ttl)).toBeLessThanOrEqual(10);
  });

  it('refuses a run whose lease is live, and reports why', async () => {
    const { runId } = await newRun();
    await claimed(runId, 'w1');
    expect(await claimRun(db, { runId, owner: 'w2', leaseTtlMs: 1000 })).toEqual({ claimed: false, reason: 'busy' });
  });

  it('lets another owner take over after expiry, with the next fence', async () => {
    const { runId } = await newRun();
    const first = await claimed(runId, 'w1', 5_000);
    await advanceFakeNow(db, 6_000);
    const second = await claimed(runId, 'w2', 5_000);
    expect(second.fence).toBe(first.fence + 1);
    expect(second.attempts).toBe(2);
  });

  it('never claims a closed run again', async () => {
    const { runId } = await newRun();
    const lease = await claimed(runId, 'w1');
    expect(await closeRun(db, lease, 'completed', { text: 'done' })).toMatch(/^[0-9a-f-]{36}$/);
    await advanceFakeNow(db, 3_600_000);
    expect(await claimRun(db, { runId, owner: 'w2', leaseTtlMs: 1000 })).toEqual({ claimed: false, reason: 'closed' });
    const [run] = await db.query<{ fence: number }>('select fence from agent_kit_runs where id = $1', [runId]);
    expect(Number(run!.fence)).toBe(1);
  });

  it('queues a later turn of a thread behind the earlier one until it closes', async () => {
    const first = await newRun('one');
    const second = await startTurn(db, { threadId: first.threadId, ownerId: 'user-1', text: 'two' });
    expect(await claimRun(db, { runId: second.runId, owner: 'w1', leaseTtlMs: 1000 })).toEqual({
      claimed: false,
      reason: 'blocked',
    });
    const lease = await claimed(first.runId, 'w1');
    await closeRun(db, lease, 'completed', { text: 'ok' });
    const jobs = await db.query('select run_id from agent_kit_jobs where run_id = $1', [second.runId]);
    expect(jobs).toHaveLength(1);
    expect((await claimRun(db, { runId: second.runId, owner: 'w1', leaseTtlMs: 1000 })).claimed).toBe(true);
  });

  it('reports a missing run as missing and a malformed id as an invalid argument', async () => {
    const missing = await claimRun(db, { runId: '00000000-0000-0000-0000-000000000000', owner: 'w', leaseTtlMs: 1000 });
    expect(missing).toEqual({ claimed: false, reason: 'missing' });
    await expect(claimRun(db, { runId: 'not-a-uuid', owner: 'w', leaseTtlMs: 1000 })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    await expect(db.query(`select * from agent_kit_claim_run(gen_random_uuid(), 'w', interval '-1 second')`)).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    await expect(db.query(`select * from agent_kit_claim_run(gen_random_uuid(), '', interval '1 second')`)).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
  });
});

describe('a retried model step', () => {
  it('sets the run\'s partial to the text it goes on from, and says that text in its model-retry event', async () => {
    const { runId } = await newRun();
    const lease = await claimed(runId, 'w1', 5_000);
    await mirrorPartial(db, lease, 'Done. Half');
    const seq = await retryStep(db, lease, 'Done. ', { stepNo: 1, retry: 1, redo: true });
    const [run] = await db.query<{ partial: string }>('select partial from agent_kit_runs where id = $1', [runId]);
    expect(run!.partial).toBe('Done. ');
    const [event] = await db.query<{ type: string; data: unknown }>(
      'select type, data from agent_kit_thread_events where run_id = $1 and seq = $2', [runId, seq]);
    expect(event).toEqual({ type: 'model-retry', data: { stepNo: 1, retry: 1, redo: true, text: 'Done. ' } });
    await expect(db.query(`select agent_kit_retry_step($1, $2, $3, null, '{}')`, [runId, lease.owner, lease.fence]))
      .rejects.toThrow(/goes on from a text/);
  });
});

describe('a model retry parked for a wait too long for its segment', () => {
  const runState = async (runId: string) => (await db.query<{ status: string; owner: string | null; attempts: number; due_in_s: number | null }>(
    `select r.status, r.owner, r.attempts, extract(epoch from j.due_at - agent_kit_now())::float8 as due_in_s
     from agent_kit_runs r left join agent_kit_jobs j on j.run_id = r.id where r.id = $1`, [runId]))[0]!;

  it('queues the run due after the wait, the attempt kept, with the retry then the park in the log', async () => {
    const { runId } = await newRun();
    const lease = await claimed(runId, 'w1');
    await mirrorPartial(db, lease, 'Half');
    const seq = await parkForRetry(db, lease, 30_000, { retry: 1 });
    expect(await runState(runId)).toMatchObject({ status: 'queued', owner: null, attempts: 1 });
    expect((await runState(runId)).due_in_s).toBeCloseTo(30, 0);
    const events = await db.query<{ seq: number; type: string; data: Record<string, unknown> }>(
      'select seq, type, data from agent_kit_thread_events where run_id = $1 and seq >= $2 order by seq', [runId, seq]);
    expect(events.map((e) => e.type)).toEqual(['model-retry', 'run-parked']);
    expect(events[0]!.data).toMatchObject({ retry: 1, text: 'Half', dueAt: expect.any(String) });
    expect(events[1]!.data).toMatchObject({ status: 'queued', requested: 'queued', dueAt: events[0]!.data.dueAt });
    expect(await parkForRetry(db, lease, 30_000, { retry: 2 })).toBeNull(); // the lease is gone
  });

  it('lets a stored cancel queue the run now and a stored takeover park it for the operator', async () => {
    const cancelled = await newRun();
    const a = await claimed(cancelled.runId, 'w1');
    await db.query('select agent_kit_request_cancel($1)', [cancelled.runId]);
    await parkForRetry(db, a, 30_000, { retry: 1 });
    expect(await runState(cancelled.runId)).toMatchObject({ status: 'queued' });
    expect((await runState(cancelled.runId)).due_in_s).toBeLessThanOrEqual(0);
    const taken = await newRun();
    const b = await claimed(taken.runId, 'w1');
    await db.query(`select agent_kit_takeover_run($1, 'op')`, [taken.runId]);
    await parkForRetry(db, b, 30_000, { retry: 1 });
    expect(await runState(taken.runId)).toMatchObject({ status: 'waiting_takeover', due_in_s: null });
    await expect(db.query(`select agent_kit_park_for_retry($1, 'w', 1, interval '-1 second', '{}')`, [taken.runId]))
      .rejects.toBeInstanceOf(InvalidArgumentError);
  });

  it('is not claimed by id before it is due: a retried request does not ask the provider early', async () => {
    const { runId } = await newRun();
    await parkForRetry(db, await claimed(runId, 'w1'), 30_000, { retry: 1 });
    expect(await claimRun(db, { runId, owner: 'w2', leaseTtlMs: 30_000 })).toEqual({ claimed: false, reason: 'not-due' });
    expect(await runState(runId)).toMatchObject({ status: 'queued', owner: null, attempts: 1 }); // the job is still there
    expect((await runState(runId)).due_in_s).toBeGreaterThan(25);
    await advanceFakeNow(db, 30_000);
    const again = await claimed(runId, 'w2');
    expect(again).toMatchObject({ fence: 2, attempts: 2 });
    expect(await runState(runId)).toMatchObject({ status: 'running', due_in_s: null });
  });

  it('is claimed at once to close it after a cancel', async () => {
    const { runId } = await newRun();
    await parkForRetry(db, await claimed(runId, 'w1'), 30_000, { retry: 1 });
    await db.query('select agent_kit_request_cancel($1)', [runId]);
    expect(await claimed(runId, 'w2')).toMatchObject({ fence: 2 }); // its segment closes it, asking no model
  });

  it("still waits after an operator took it over and released it: a job due before its run is settled to the run's time", async () => {
    const { runId } = await newRun();
    await parkForRetry(db, await claimed(runId, 'w1'), 30_000, { retry: 1 });
    expect((await db.query<{ s: string }>(`select agent_kit_takeover_run($1, 'op') as s`, [runId]))[0]!.s).toBe('waiting_takeover');
    expect((await db.query<{ s: string }>('select agent_kit_release_run($1) as s', [runId]))[0]!.s).toBe('queued');
    expect((await runState(runId)).due_in_s).toBeLessThanOrEqual(0); // the release made its job due now
    expect(await claimRun(db, { runId, owner: 'w2', leaseTtlMs: 30_000 })).toEqual({ claimed: false, reason: 'not-due' });
    const [job] = await db.query<{ id: number }>('select id from agent_kit_jobs where run_id = $1', [runId]);
    expect(await settleJob(db, Number(job!.id))).toBe('rescheduled');
    expect((await runState(runId)).due_in_s).toBeGreaterThan(25); // due with the run: no drain takes it again meanwhile
    await advanceFakeNow(db, 30_000);
    expect(await claimed(runId, 'w2')).toMatchObject({ fence: 2 });
    expect((await db.query<{ retry_due_at: Date | null }>('select retry_due_at from agent_kit_runs where id = $1', [runId]))[0])
      .toEqual({ retry_due_at: null });
  });

  it('keeps the wait, and starts the count of attempts again, when it honours a takeover asked while the segment ran', async () => {
    const { runId } = await newRun();
    const lease = await claimed(runId, 'w1');
    await db.query(`select agent_kit_takeover_run($1, 'op')`, [runId]);
    await parkForRetry(db, lease, 30_000, { retry: 1 });
    // Handed to the operator as a park for one is (the attempts start again), and the release
    // leaves the provider's wait in place: before migration 0040 it was dropped, and the attempt
    // kept, so the release had the provider asked at once (or, at the last attempt, gave up).
    expect(await runState(runId)).toMatchObject({ status: 'waiting_takeover', owner: null, attempts: 0 });
    expect((await db.query<{ s: string }>('select agent_kit_release_run($1) as s', [runId]))[0]!.s).toBe('queued');
    expect(await claimRun(db, { runId, owner: 'w2', leaseTtlMs: 30_000 })).toEqual({ claimed: false, reason: 'not-due' });
    await advanceFakeNow(db, 30_000);
    expect(await claimed(runId, 'w2')).toMatchObject({ fence: 2, attempts: 1 });
  });

  it("leaves a fresh turn's claim alone: its job waits only so that the request that made it claims first", async () => {
    const { runId } = await startTurn(db, { ownerId: 'user-1', text: 'hello', jobDelayMs: 60_000 });
    expect(await runState(runId)).toMatchObject({ status: 'queued', attempts: 0 });
    expect((await runState(runId)).due_in_s).toBeGreaterThan(50);
    expect(await claimed(runId, 'w1')).toMatchObject({ fence: 1, attempts: 1 });
  });
});

describe('a stale fence writes nothing', () => {
  it('rejects every guarded write of the old owner after a takeover, leaving every row as it was', async () => {
    const { runId, threadId } = await newRun();
    const zombie = await claimed(runId, 'w1', 5_000);
    await mirrorPartial(db, zombie, 'zombie text ');
    await advanceFakeNow(db, 6_000);
    const live = await claimed(runId, 'w2', 5_000);
    await beginSegment(db, live, '');
    const before = await snapshot(runId, threadId);

    expect(await renewLease(db, zombie, 5_000)).toBe(false);
    expect(await mirrorPartial(db, zombie, 'more')).toEqual({ ok: false });
    expect(await beginSegment(db, zombie, 'x')).toBeNull();
    expect(await retryStep(db, zombie, '', { retry: 1, redo: true })).toBeNull();
    expect(await parkForRetry(db, zombie, 1_000, { retry: 1 })).toBeNull();
    expect(await appendEvent(db, zombie, 'text-delta', { text: 'x' })).toBeNull();
    expect(await parkRun(db, zombie, 'waiting_input', { id: 'q1' })).toBe(false);
    expect(await closeRun(db, zombie, 'completed', { text: 'zombie answer' })).toBeNull();
    const effect = await db.query(`select * from agent_kit_record_effect($1, $2, $3, 'k1', 'started', 'tool')`, [
      runId, zombie.owner, zombie.fence,
    ]);
    expect(effect).toEqual([]);
    const step = await db.query<{ seq: number | null }>(
      `select agent_kit_record_step($1, $2, $3, 0, 'model', '{}'::jsonb) as seq`,
      [runId, zombie.owner, zombie.fence],
    );
    expect(step[0]!.seq).toBeNull();

    expect(await snapshot(runId, threadId)).toBe(before);
  });

  it('rejects the right owner with an old fence and a wrong owner with the right fence', async () => {
    const { runId, threadId } = await newRun();
    const lease = await claimed(runId, 'w1');
    const before = await snapshot(runId, threadId);
    expect(await mirrorPartial(db, { ...lease, fence: lease.fence - 1 }, 'x')).toEqual({ ok: false });
    expect(await mirrorPartial(db, { ...lease, owner: 'w9' }, 'x')).toEqual({ ok: false });
    expect(await closeRun(db, { ...lease, fence: lease.fence + 1 }, 'completed', { text: 'x' })).toBeNull();
    expect(await snapshot(runId, threadId)).toBe(before);
  });
});

describe('renewal', () => {
  it('extends the lease but never past the deadline', async () => {
    const { runId } = await newRun();
    const lease = await claimed(runId, 'w1', 3_000, 10_000);
    for (let i = 0; i < 5; i++) {
      await advanceFakeNow(db, 2_000);
      expect(await renewLease(db, lease, 3_000)).toBe(i < 4); // at +10 s the lease has hit the deadline
    }
    const [row] = await db.query<{ capped: boolean }>(
      'select lease_expires_at <= deadline_at as capped from agent_kit_runs where id = $1',
      [runId],
    );
    expect(row!.capped).toBe(true);
  });

  it('never revives an expired lease', async () => {
    const { runId } = await newRun();
    const lease = await claimed(runId, 'w1', 1_000, 60_000);
    await advanceFakeNow(db, 1_500);
    expect(await renewLease(db, lease, 10_000)).toBe(false);
    await expect(renewLease(db, lease, 0)).rejects.toBeInstanceOf(InvalidArgumentError);
  });
});

describe('mirror, park and close', () => {
  it('mirrors partial output with one event per write and reports a stored cancel', async () => {
    const { runId, threadId } = await newRun();
    const lease = await claimed(runId, 'w1');
    const a = await mirrorPartial(db, lease, 'Hello ');
    const b = await mirrorPartial(db, lease, 'world');
    expect(a.ok && b.ok && b.seq! - a.seq!).toBe(1);
    await db.query('select agent_kit_request_cancel($1)', [runId]);
    expect(await mirrorPartial(db, lease, '!')).toMatchObject({ ok: true, interrupt: 'cancel' });
    const [run] = await db.query<{ partial: string }>('select partial from agent_kit_runs where id = $1', [runId]);
    expect(run!.partial).toBe('Hello world!');
    const events = await db.query<{ type: string }>(
      `select type from agent_kit_thread_events where thread_id = $1 and type = 'text-delta'`,
      [threadId],
    );
    expect(events).toHaveLength(3);
  });

  it('parks to waiting_input, releasing the lease and resetting the crash budget', async () => {
    const { runId } = await newRun();
    const lease = await claimed(runId, 'w1');
    expect(await parkRun(db, lease, 'waiting_input', { id: 'q1', question: 'why?' })).toBe(true);
    const [run] = await db.query<{ status: string; owner: string | null; attempts: number; waiting_for: unknown }>(
      'select status, owner, attempts, waiting_for from agent_kit_runs where id = $1',
      [runId],
    );
    expect(run).toMatchObject({ status: 'waiting_input', owner: null, attempts: 0, waiting_for: { id: 'q1', question: 'why?' } });
    expect(await claimRun(db, { runId, owner: 'w2', leaseTtlMs: 1000 })).toEqual({ claimed: false, reason: 'waiting' });
  });

  it('parks to queued when the answer arrived while the segment was finishing', async () => {
    const { runId } = await newRun();
    const lease = await claimed(runId, 'w1');
    expect(await db.query(`select agent_kit_submit_input($1, 'q1', '{"text":"yes"}') as s`, [runId])).toEqual([{ s: 'running' }]);
    expect(await parkRun(db, lease, 'waiting_input', { id: 'q1' })).toBe(true);
    const [run] = await db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [runId]);
    expect(run!.status).toBe('queued');
    expect((await claimRun(db, { runId, owner: 'w2', leaseTtlMs: 1000 })).claimed).toBe(true);
  });

  it('closes once: one assistant message, lease cleared, a closing event; a second close writes nothing', async () => {
    const { runId, threadId } = await newRun();
    const lease = await claimed(runId, 'w1');
    const messageId = await closeRun(db, lease, 'completed', { text: 'the answer' });
    expect(messageId).not.toBeNull();
    expect(await closeRun(db, lease, 'completed', { text: 'again' })).toBeNull();
    const messages = await db.query<{ id: string; partial: boolean; text: string }>(
      `select id, partial, content->>'text' as text from agent_kit_messages where run_id = $1 and role = 'assistant'`,
      [runId],
    );
    expect(messages).toEqual([{ id: messageId, partial: false, text: 'the answer' }]);
    const [run] = await db.query<{ status: string; owner: null; lease_expires_at: null; message_id: string }>(
      'select status, owner, lease_expires_at, message_id from agent_kit_runs where id = $1',
      [runId],
    );
    expect(run).toEqual({ status: 'completed', owner: null, lease_expires_at: null, message_id: messageId });
    const [last] = await db.query<{ type: string }>(
      'select type from agent_kit_thread_events where thread_id = $1 order by seq desc limit 1',
      [threadId],
    );
    expect(last!.type).toBe('run-closed');
  });

  it('marks an aborted run message partial and refuses malformed statuses and messages', async () => {
    const { runId, threadId } = await newRun();
    const lease = await claimed(runId, 'w1');
    const before = await snapshot(runId, threadId);
    await expect(closeRun(db, lease, 'done' as never, { text: 'x' })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(
      db.query(`select agent_kit_close_run($1, 'completed', '{"text": 3}'::jsonb, $2, $3)`, [runId, lease.owner, lease.fence]),
    ).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(parkRun(db, lease, 'running' as never)).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(await snapshot(runId, threadId)).toBe(before);
    await closeRun(db, lease, 'aborted', { text: 'half' });
    const [message] = await db.query<{ partial: boolean }>(
      `select partial from agent_kit_messages where run_id = $1 and role = 'assistant'`,
      [runId],
    );
    expect(message!.partial).toBe(true);
  });
});

describe.runIf(onPostgres)('concurrency on Postgres', () => {
  it('lets exactly one of many concurrent claimers win', async () => {
    for (let round = 0; round < 5; round++) {
      const { runId } = await newRun();
      const results = await Promise.all(
        Array.from({ length: 16 }, (_, i) => claimRun(db, { runId, owner: `w${i}`, leaseTtlMs: 10_000 })),
      );
      expect(results.filter((r) => r.claimed)).toHaveLength(1);
      const [run] = await db.query<{ fence: number }>('select fence from agent_kit_runs where id = $1', [runId]);
      expect(Number(run!.fence)).toBe(1);
    }
  });

  it('lets exactly one of many concurrent claimers take over an expired lease', async () => {
    const { runId } = await newRun();
    await claimed(runId, 'dead', 1_000);
    await advanceFakeNow(db, 2_000);
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) => claimRun(db, { runId, owner: `w${i}`, leaseTtlMs: 10_000 })),
    );
    expect(results.filter((r) => r.claimed)).toHaveLength(1);
  });
});
