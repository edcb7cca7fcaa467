// The worker on both stores, with real short leases (the wake-up timers are what is tested, so
// time is not faked): NOTIFY wakes it for a new job with the poll set far away, a dead run is
// retaken right after its lease expires, the stop signal parks running segments and ends it,
// and a failing segment is retried, not lost. Bounds are generous; no tight timing is asserted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onPostgres, openTestDb } from '../../test/harness/test-db.js';
import {
  closeWith, count, eventually, nullTurn, parkOnStop, testRuntime,
} from '../../test/chaos/null-turn.js';
import { claimRun } from '../lease/lease.js';
import { StoreUnavailableError } from '../errors.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import type { RunSegment } from '../turn/types.js';
import { runWorker } from './run-worker.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb({ poolMax: 20 });
});
afterAll(async () => {
  await db.close();
});

const farPollMs = 60_000; // so that only NOTIFY or the expiry timer can wake the worker in time

async function status(runId: string) {
  const [row] = await db.query<{ status: string; fence: number }>('select status, fence from agent_kit_runs where id = $1', [runId]);
  return { status: row!.status, fence: Number(row!.fence) };
}

/** On Postgres the LISTEN connection comes up in the background: wait until it listens. */
async function listenerReady() {
  if (!onPostgres) return;
  await eventually(async () => (await count(db, `select count(*) as n from pg_stat_activity
    where datname = current_database() and application_name = 'agent-kit-listen' and query ilike 'listen%'`)) > 0,
  10_000, 'the LISTEN connection');
}

function startWorker(runSegment: RunSegment, config = {}, pollMs = farPollMs) {
  const controller = new AbortController();
  const logged: Record<string, unknown>[] = [];
  const done = runWorker(testRuntime(db, config, {}, (e) => logged.push(e)), {
    signal: controller.signal, pollMs, runSegment, concurrency: 2,
  });
  return { controller, done, logged, stop: async () => { controller.abort(); await done; } };
}

describe('runWorker', () => {
  it('picks up a newly enqueued job at once, woken by NOTIFY rather than its poll', async () => {
    const worker = startWorker(nullTurn(closeWith('hi')));
    try {
      await listenerReady();
      await new Promise((r) => setTimeout(r, 100)); // let the first drain pass go idle
      const { runId } = await startTurn(db, { ownerId: 'u', text: 'wake up' });
      const tookMs = await eventually(async () => (await status(runId)).status === 'completed', 10_000, 'the run to close');
      expect(tookMs).toBeLessThan(farPollMs);
      expect(await status(runId)).toEqual({ status: 'completed', fence: 1 });
    } finally {
      await worker.stop();
    }
  });

  it('retakes a dead run soon after its lease expires, not at the next poll', async () => {
    const { runId } = await startTurn(db, { ownerId: 'u', text: 'orphaned' });
    const dead = await claimRun(db, { runId, owner: 'dead-worker', leaseTtlMs: 300 });
    expect(dead.claimed).toBe(true);
    const worker = startWorker(nullTurn(closeWith('taken over')), { leaseTtlMs: 300, invocationBudgetMs: 5_000 });
    try {
      await eventually(async () => (await status(runId)).status === 'completed', 10_000, 'the takeover');
      expect(await status(runId)).toEqual({ status: 'completed', fence: 2 });
    } finally {
      await worker.stop();
    }
  });

  it('retakes a lease taken while the reaper sleeps, when leases are shorter than the poll', async () => {
    // The reaper sleeps for its poll when no lease is running; a 300 ms lease taken meanwhile
    // runs out long before a 60 s poll, so only a nap no longer than the lease TTL finds it.
    const worker = startWorker(nullTurn(closeWith('taken over')), { leaseTtlMs: 300, invocationBudgetMs: 5_000 });
    try {
      await new Promise((r) => setTimeout(r, 200)); // the reaper's first pass found no lease and sleeps
      const { runId } = await startTurn(db, { ownerId: 'u', text: 'claimed while the reaper sleeps', jobDelayMs: 600_000 });
      expect((await claimRun(db, { runId, owner: 'dead-worker', leaseTtlMs: 300 })).claimed).toBe(true);
      await eventually(async () => (await status(runId)).status === 'completed', 5_000, 'the takeover');
      expect(await status(runId)).toEqual({ status: 'completed', fence: 2 });
    } finally {
      await worker.stop();
    }
  });

  it('on the stop signal takes no new work, lets running segments park, and resolves', async () => {
    let started = 0;
    const worker = startWorker(nullTurn(parkOnStop(() => started++)), {}, 200);
    const first = await startTurn(db, { ownerId: 'u', text: 'long one' });
    await eventually(async () => started === 1, 10_000, 'the segment to start');
    // The drain looked for more work as the segment started; a claim still in flight at the
    // signal could take a run inserted just after it (and start it, to park). Stop while the drain
    // waits between looks (its poll is 200 ms), so that only a claim after the signal could.
    await new Promise((resolve) => setTimeout(resolve, 100));
    worker.controller.abort();
    // Said at the signal, before the segment under way has parked (nothing was said until it stopped).
    expect(worker.logged.map((e) => e.msg).filter((m) => String(m).startsWith('worker: stop')))
      .toEqual(['worker: stopping: no new work; running segments park after the step under way, a model step within stopGraceMs']);
    const later = await startTurn(db, { ownerId: 'u', text: 'too late' });
    await worker.done;
    expect(await status(first.runId)).toEqual({ status: 'waiting_input', fence: 1 });
    expect(await status(later.runId)).toEqual({ status: 'queued', fence: 0 });
    expect(started).toBe(1);
    await db.query('delete from agent_kit_jobs where run_id = $1', [later.runId]); // not for the next test
  });

  it('logs a failing segment with its run and retries the job until it runs', async () => {
    let calls = 0;
    const flaky = nullTurn(closeWith('second time lucky'));
    const runSegment: RunSegment = async (rt, options) => {
      calls++;
      if (calls === 1) throw new Error('transient');
      return flaky(rt, options);
    };
    const worker = startWorker(runSegment, { leaseTtlMs: 1_000 }, 200);
    try {
      const { runId } = await startTurn(db, { ownerId: 'u', text: 'flaky' });
      await eventually(async () => (await status(runId)).status === 'completed', 15_000, 'the retry');
      expect(worker.logged).toContainEqual(expect.objectContaining({ msg: 'drain: segment failed', runId, attempt: 1 }));
    } finally {
      await worker.stop();
    }
  });
});

describe.runIf(onPostgres)('runWorker, connections killed (Postgres)', () => {
  /**
   * The test's own statements share the worker's pool, so each may land once on a pooled
   * connection the cut terminated (StoreUnavailableError); the pool then drops it. Retry those.
   */
  async function despiteTheCut<T>(statement: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await statement();
      } catch (error) {
        if (!(error instanceof StoreUnavailableError) || attempt >= 25) throw error;
      }
    }
  }

  it('keeps working after its connections are terminated', async () => {
    const worker = startWorker(nullTurn(closeWith('still here')), {}, 200);
    try {
      await listenerReady();
      await db.query(`select pg_terminate_backend(pid) from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid()`);
      // A client message id makes a retried start return the same turn.
      const { runId } = await despiteTheCut(() => startTurn(db, {
        ownerId: 'u', text: 'after the cut', clientMessageId: 'after-the-cut',
      }));
      await eventually(
        async () => (await despiteTheCut(() => status(runId))).status === 'completed', 15_000, 'the run after reconnect',
      );
    } finally {
      await worker.stop();
    }
  });
});
