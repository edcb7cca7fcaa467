// A person's intents on a run, on both stores, as the HTTP routes and the CLI make them: cancel,
// take over and release say what the run is now, write their event once, refuse a closed run or
// a bad argument without writing, and wake the thread's viewers after the commit. The command
// line's words for each, and a restore as the operator (the thread's owner looked up).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeRunSegment } from '../../test/harness/fake-segment.js';
import { configFromEnv } from '../config.js';
import { claimRun, parkRun } from '../lease/index.js';
import { ConflictError, InvalidArgumentError, NotFoundError } from '../errors.js';
import type { Db } from '../store/db.js';
import { flushNotifications, onLocalNotify } from '../store/notify-thread.js';
import {
  formatCancelCommand, formatReleaseCommand, formatRestoreCommand, formatTakeoverCommand,
} from '../cli/commands/run-intents.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { regenerateTurn } from './regenerate-turn.js';
import { cancelRun, releaseRun, takeOverRun } from './run-intents.js';
import { startTurn } from './start-turn.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

const rt = () => ({ db, model: 'test-model', tools: {}, config: configFromEnv({}) });

async function eventsOf(runId: string): Promise<string[]> {
  const rows = await db.query<{ type: string }>(
    'select type from agent_kit_thread_events where run_id = $1 order by seq', [runId]);
  return rows.map((row) => row.type);
}

async function statusOf(runId: string): Promise<{ status: string; cancel: boolean; by: string | null; jobs: number }> {
  const [row] = await db.query<{ status: string; cancel: boolean; by: string | null; jobs: number | string }>(
    `select status, cancel_requested_at is not null as cancel, taken_over_by as by,
       (select count(*) from agent_kit_jobs j where j.run_id = r.id) as jobs
     from agent_kit_runs r where id = $1`, [runId]);
  return { ...row!, jobs: Number(row!.jobs) };
}

/** The threads this process wakes while `fn` runs, its notifications sent. */
async function wokenBy(fn: () => Promise<unknown>): Promise<string[]> {
  const woken: string[] = [];
  const stop = onLocalNotify((threadId) => woken.push(threadId));
  try {
    await fn();
    await flushNotifications(db);
  } finally {
    stop();
  }
  return woken;
}

describe('cancelRun', () => {
  it('stores the intent once, gives a queued run a job, and wakes its thread', async () => {
    const turn = await startTurn(db, { ownerId: 'ivy', text: 'cancel me' });
    await db.query('delete from agent_kit_jobs where run_id = $1', [turn.runId]);
    expect(await wokenBy(async () => expect(await cancelRun(db, { runId: turn.runId })).toEqual({ runId: turn.runId, status: 'queued' })))
      .toEqual([turn.threadId]);
    expect(await statusOf(turn.runId)).toMatchObject({ status: 'queued', cancel: true, jobs: 1 });
    await cancelRun(db, { runId: turn.runId, shownSeq: 0 }); // again: nothing more stored
    expect(await eventsOf(turn.runId)).toEqual(['message', 'run-queued', 'cancel-requested']);
    // The segment that takes it closes it aborted.
    await fakeRunSegment({ deltas: ['never said'] })(rt(), { runId: turn.runId, owner: 'w' });
    expect((await statusOf(turn.runId)).status).toBe('aborted');
    await expect(cancelRun(db, { runId: turn.runId })).rejects.toThrow(
      new ConflictError(`run ${turn.runId} is already aborted: nothing to cancel`));
  });

  it('refuses a bad id, an unknown run and a negative seq, writing nothing', async () => {
    const turn = await startTurn(db, { ownerId: 'ivy', text: 'keep me' });
    await expect(cancelRun(db, { runId: 'x' })).rejects.toThrow(InvalidArgumentError);
    await expect(cancelRun(db, { runId: crypto.randomUUID() })).rejects.toThrow(NotFoundError);
    for (const shownSeq of [-1, 1.5, Number.NaN]) {
      await expect(cancelRun(db, { runId: turn.runId, shownSeq })).rejects.toThrow(InvalidArgumentError);
    }
    expect(await statusOf(turn.runId)).toMatchObject({ status: 'queued', cancel: false });
  });
});

describe('takeOverRun and releaseRun', () => {
  it('hold a queued run for a person and give it back, due now', async () => {
    const turn = await startTurn(db, { ownerId: 'ivy', text: 'hold me' });
    expect(await wokenBy(async () => expect(await takeOverRun(db, { runId: turn.runId, by: 'olga' }))
      .toEqual({ runId: turn.runId, status: 'waiting_takeover' }))).toEqual([turn.threadId]);
    expect(await statusOf(turn.runId)).toEqual({ status: 'waiting_takeover', cancel: false, by: 'olga', jobs: 0 });
    expect(await releaseRun(db, { runId: turn.runId })).toEqual({ runId: turn.runId, status: 'queued' });
    expect(await statusOf(turn.runId)).toMatchObject({ status: 'queued', jobs: 1 });
    expect(await eventsOf(turn.runId)).toEqual(['message', 'run-queued', 'run-parked', 'run-released']);
    await expect(releaseRun(db, { runId: turn.runId })).rejects.toThrow(ConflictError); // not taken over
  });

  it('refuse a second operator while one holds the run or is taking it over; the same one gets the same answer', async () => {
    const turn = await startTurn(db, { ownerId: 'ivy', text: 'mine' });
    await takeOverRun(db, { runId: turn.runId, by: 'olga' });
    await expect(takeOverRun(db, { runId: turn.runId, by: 'bob' }))
      .rejects.toThrow(new ConflictError(`run ${turn.runId} is already held, by olga`));
    expect(await takeOverRun(db, { runId: turn.runId, by: 'olga' })).toEqual({ runId: turn.runId, status: 'waiting_takeover' });
    expect(await statusOf(turn.runId)).toMatchObject({ status: 'waiting_takeover', by: 'olga' });

    const running = await startTurn(db, { ownerId: 'ivy', text: 'running' });
    expect(await claimRun(db, { runId: running.runId, owner: 'w', leaseTtlMs: 60_000 })).toMatchObject({ claimed: true });
    await takeOverRun(db, { runId: running.runId, by: 'olga' });
    await expect(takeOverRun(db, { runId: running.runId, by: 'bob' }))
      .rejects.toThrow(new ConflictError(`run ${running.runId} is already being taken over, by olga`));
    expect(await takeOverRun(db, { runId: running.runId, by: 'olga' })).toEqual({ runId: running.runId, status: 'running' });
    expect((await eventsOf(running.runId)).filter((type) => type === 'takeover-requested')).toHaveLength(1);
    await releaseRun(db, { runId: running.runId }); // withdrawn: another may take it now
    expect(await takeOverRun(db, { runId: running.runId, by: 'bob' })).toEqual({ runId: running.runId, status: 'running' });
    expect(await statusOf(running.runId)).toMatchObject({ by: 'bob' });
  });

  it('park a run whose takeover was released after its segment saw it queued, not held by nobody', async () => {
    const turn = await startTurn(db, { ownerId: 'ivy', text: 'seen, then let go' });
    const claim = await claimRun(db, { runId: turn.runId, owner: 'w', leaseTtlMs: 60_000 });
    if (!claim.claimed) throw new Error('not claimed');
    await takeOverRun(db, { runId: turn.runId, by: 'olga' }); // the segment sees it at its next write…
    await releaseRun(db, { runId: turn.runId }); // …and the operator lets go before it parks
    expect(await parkRun(db, claim.lease, 'waiting_takeover')).toBe(true);
    expect(await statusOf(turn.runId)).toEqual({ status: 'queued', cancel: false, by: null, jobs: 1 });
    expect(await takeOverRun(db, { runId: turn.runId, by: 'bob' })).toEqual({ runId: turn.runId, status: 'waiting_takeover' });
  });

  it('refuse a takeover without an operator, and one of a run being cancelled', async () => {
    const turn = await startTurn(db, { ownerId: 'ivy', text: 'no' });
    await expect(takeOverRun(db, { runId: turn.runId, by: ' ' })).rejects.toThrow(InvalidArgumentError);
    await cancelRun(db, { runId: turn.runId });
    await expect(takeOverRun(db, { runId: turn.runId, by: 'olga' })).rejects.toThrow(/being cancelled/);
    await expect(releaseRun(db, { runId: 'nope' })).rejects.toThrow(InvalidArgumentError);
    expect(await eventsOf(turn.runId)).toEqual(['message', 'run-queued', 'cancel-requested']);
  });
});

describe('the command line', () => {
  it('says what each intent did and what comes next, and prints JSON for scripts', async () => {
    const turn = await startTurn(db, { ownerId: 'ivy', text: 'operate on me' });
    expect(await formatTakeoverCommand(db, turn.runId, { by: 'olga' }))
      .toBe(`run ${turn.runId} is waiting_takeover, held by olga: \`agent-kit reply ${turn.runId} TEXT\` answers in its place, ` +
        `\`agent-kit release ${turn.runId}\` lets it go on\n`);
    expect(await formatReleaseCommand(db, turn.runId, {}))
      .toBe(`released: run ${turn.runId} is queued, due now; a worker or \`agent-kit drain\` continues it where it stopped\n`);
    expect(JSON.parse(await formatCancelCommand(db, turn.runId, { json: true })))
      .toEqual({ runId: turn.runId, status: 'queued', cancelRequested: true });

    // A running run is told at its next write.
    const running = await startTurn(db, { ownerId: 'ivy', text: 'running' });
    expect(await claimRun(db, { runId: running.runId, owner: 'w', leaseTtlMs: 60_000 })).toMatchObject({ claimed: true });
    expect(await formatTakeoverCommand(db, running.runId, { by: 'olga' }))
      .toBe(`takeover requested: run ${running.runId} is running and parks waiting_takeover at its next write (within a moment ` +
        'while it streams, after a tool call under way), or, if its holder is dead, once its lease runs out and a worker ' +
        'or drain claims it\n');
    expect(await formatReleaseCommand(db, running.runId, {})).toBe(`takeover withdrawn: run ${running.runId} is running and goes on\n`);
    expect(await formatCancelCommand(db, running.runId, {}))
      .toBe(`cancel requested: run ${running.runId} is running; its segment closes it aborted at its next write\n`);
  });

  it('restores an earlier answer as the thread\'s owner, and says when there is nothing to restore', async () => {
    const first = await startTurn(db, { ownerId: 'ivy', text: 'answer me' });
    await fakeRunSegment({ deltas: ['first answer'] })(rt(), { runId: first.runId, owner: 'w1' });
    const again = await regenerateTurn(db, { threadId: first.threadId, ownerId: 'ivy', message: first.messageId });
    await fakeRunSegment({ deltas: ['second answer'] })(rt(), { runId: again.runId, owner: 'w2' });
    expect(await formatRestoreCommand(db, first.runId, {}))
      .toBe(`restored: run ${first.runId}'s answer is back in thread ${first.threadId}; superseded ${again.runId}\n`);
    expect(await formatRestoreCommand(db, first.runId, {})).toBe(`run ${first.runId} is in the conversation already: nothing to restore\n`);
    await expect(formatRestoreCommand(db, crypto.randomUUID(), {})).rejects.toThrow(NotFoundError);
  });
});
