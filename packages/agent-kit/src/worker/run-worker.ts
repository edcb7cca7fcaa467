// The long-running worker: a drain that never runs out of budget and a reaper pass on a loop, in
// one process, until its signal aborts. It wakes on NOTIFY agent_kit_jobs, on a timer set to the
// next job due time and the next lease expiry (so a dead run is retaken right after its lease
// runs out), and on a slow poll, since a NOTIFY sent while the listener reconnects is gone; the
// reaper's poll is no longer than the lease TTL, so a lease taken while it sleeps is seen in time.
// Database outages (a Postgres restart) are waited out with jittered backoff; nothing is lost,
// because the queue and the leases live in the database.
import os from 'node:os';
import { coerceError } from '../errors.js';
import { drainQueue, defaultDrainConcurrency } from '../queue/drain-queue.js';
import { backoffMs, sleep } from '../queue/pace.js';
import { reapExpiredRuns } from '../reaper/reap-expired-runs.js';
import type { RunSegment, Runtime } from '../turn/types.js';
import { Waker } from './waker.js';

export interface WorkerOptions {
  /** Abort to stop: no new work; running segments park at their next step boundary (a model step is cut after stopGraceMs). */
  signal: AbortSignal;
  /** Segments in flight at once. Default 4. */
  concurrency?: number;
  /** The slowest the worker looks for work and expired leases. Default 1000 ms. */
  pollMs?: number;
  /** Lease owner prefix. Default `worker-<host>-<pid>-<random>`. */
  owner?: string;
  /** The segment runner; default the turn engine's. */
  runSegment?: RunSegment;
}

export const defaultWorkerPollMs = 1_000;
const timerSlackMs = 5; // wake just after the expiry, not a hair before it (DB time is in µs)

/**
 * Drain and reap until `options.signal` aborts, then wait for running segments to finish or park.
 * Resolves when everything has stopped; per-item errors are logged, never thrown.
 */
export async function runWorker(rt: Runtime, options: WorkerOptions): Promise<void> {
  const { signal } = options;
  const pollMs = options.pollMs ?? defaultWorkerPollMs;
  const owner = options.owner ?? `worker-${os.hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const waker = new Waker();
  const unlisten = await listenForJobs(rt, waker);
  rt.log?.({ msg: 'worker: started', owner, concurrency: options.concurrency ?? defaultDrainConcurrency, pollMs });
  // Said at once: a model step under way can take a while to reach its boundary, and the
  // worker's silence until then looked like a hang.
  const stopping = () => rt.log?.({ msg: 'worker: stopping: no new work; running segments park after the step under way, a model step within stopGraceMs', owner });
  signal.addEventListener('abort', stopping, { once: true });
  try {
    await Promise.all([
      drainLoop(rt, options, owner, async (stop) => {
        await waker.wait(Math.min(pollMs, await msUntil(rt, nextJobDueSql, pollMs)), stop);
      }),
      reapLoop(rt, signal, owner, reaperNapMs(pollMs, rt.config.leaseTtlMs)),
    ]);
  } finally {
    signal.removeEventListener('abort', stopping);
    await unlisten?.().catch(() => {});
    rt.log?.({ msg: 'worker: stopped', owner });
  }
}

/** Subscribe to new jobs; without a listener (it failed) the poll still finds them. */
async function listenForJobs(rt: Runtime, waker: Waker): Promise<(() => Promise<void>) | undefined> {
  try {
    return await rt.db.listen('agent_kit_jobs', () => waker.poke());
  } catch (raw) {
    rt.log?.({ msg: 'worker: LISTEN failed; polling only', error: coerceError(raw).message });
    return undefined;
  }
}

async function drainLoop(
  rt: Runtime, options: WorkerOptions, owner: string, waitForWork: (stop: AbortSignal) => Promise<void>,
): Promise<void> {
  let failures = 0;
  while (!options.signal.aborted) {
    try {
      // Returns only when stopped: takes and their failures are handled inside.
      const report = await drainQueue(rt, {
        budgetMs: Number.POSITIVE_INFINITY, concurrency: options.concurrency, owner, stopSignal: options.signal,
        runSegment: options.runSegment, waitForWork,
      });
      rt.log?.({ msg: 'worker: drain ended', ...report });
      failures = 0;
    } catch (raw) {
      failures++;
      rt.log?.({ msg: 'worker: drain failed', error: coerceError(raw).message, failures });
      await sleep(backoffMs(failures), options.signal);
    }
  }
}

/**
 * The longest the reaper sleeps when it knows of no lease to wake for. A lease taken while it
 * sleeps (by another process, or this one's drain) is not in the expiry it slept for; if the
 * deployment's leases are shorter than the poll, such a lease would run out before the next look
 * and its run be retaken up to `pollMs - leaseTtlMs` late. So it looks at least once per lease
 * TTL (never more often than every 100 ms).
 */
function reaperNapMs(pollMs: number, leaseTtlMs: number): number {
  return Math.min(pollMs, Math.max(100, leaseTtlMs));
}

async function reapLoop(rt: Runtime, signal: AbortSignal, owner: string, pollMs: number): Promise<void> {
  const limit = 100;
  let failures = 0;
  while (!signal.aborted) {
    try {
      // The signal abandons a reconcile hook in flight, so a hanging one cannot delay shutdown.
      const report = await reapExpiredRuns(rt, { owner: `${owner}-reap`, limit, signal });
      failures = 0;
      if (report.requeued + report.salvaged > 0) rt.log?.({ msg: 'worker: reaped', ...report });
      if (report.scanned === limit) continue; // more expired runs are waiting
      await sleep(Math.min(pollMs, await msUntil(rt, nextLeaseExpirySql, pollMs)), signal);
    } catch (raw) {
      failures++;
      rt.log?.({ msg: 'worker: reap failed', error: coerceError(raw).message, failures });
      await sleep(backoffMs(failures), signal);
    }
  }
}

// Both in database time (leases and due times are never compared with this process's clock);
// both are index scans (agent_kit_jobs__due_at_idx, agent_kit_runs__lease_expires_at_idx).
const nextJobDueSql = `select extract(epoch from min(due_at) - agent_kit_now()) * 1000 as ms
  from agent_kit_jobs where due_at > agent_kit_now()`;
const nextLeaseExpirySql = `select extract(epoch from min(lease_expires_at) - agent_kit_now()) * 1000 as ms
  from agent_kit_runs where status = 'running' and lease_expires_at > agent_kit_now()`;

/** Milliseconds until the time `sql` selects, plus slack; `fallbackMs` when none or on error. */
async function msUntil(rt: Runtime, sql: string, fallbackMs: number): Promise<number> {
  try {
    const rows = await rt.db.query<{ ms: number | string | null }>(sql);
    const ms = rows[0]?.ms;
    return ms === null || ms === undefined ? fallbackMs : Math.max(0, Math.ceil(Number(ms))) + timerSlackMs;
  } catch {
    return fallbackMs; // the next real query reports the outage
  }
}
