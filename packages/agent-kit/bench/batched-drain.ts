// PROPOSAL: the drain's batched fast path, over bench/sql/batched-drain.sql. Runs are claimed N
// per statement into a local queue (like graphile-worker's local queue, the leases are held while
// they wait), run `concurrency` at a time, and their closes are gathered and written N per
// statement. Guards are unchanged: every close still carries its own (owner, fence).
import fs from 'node:fs';
import { toRun, type Run, type RunRow } from '../src/lease/run-row.js';
import type { CloseStatus } from '../src/lease/lease.js';
import type { Db } from '../src/store/db.js';
import { Waker } from '../src/worker/waker.js';
import { measureDrain, type DrainResult } from './lib/drain-measure.js';
import { clearQueue, enqueueTurnsAtOnce, isQueueDrained } from './orchestration.js';

const proposalSql = fs.readFileSync(new URL('./sql/batched-drain.sql', import.meta.url), 'utf8');

/** Install the proposed functions into a bench database (never into a user's). */
export async function installBatchedDrain(db: Db): Promise<void> {
  await db.exec(proposalSql);
}

export interface CloseRequest {
  status: CloseStatus;
  message: { text: string } & Record<string, unknown>;
}

/** A turn on the fast path: given its claimed run, what to close it with. */
export type BatchedTurn = (run: Run) => Promise<CloseRequest>;

export interface BatchedDrainOptions {
  owner: string;
  /** Turns running at once. */
  concurrency: number;
  /** Runs claimed per statement, and the most held in the local queue. */
  claimBatch: number;
  /** Most closes written per statement. */
  closeBatch: number;
  leaseTtlMs: number;
  signal: AbortSignal;
}

interface PendingClose extends CloseRequest {
  run: Run;
  done: (messageId: string | null) => void;
}

/** Gathers closes and writes them in batches, one statement in flight at a time. */
class CloseBatcher {
  private pending: PendingClose[] = [];
  private flushing: Promise<void> | undefined;
  batches = 0;

  constructor(private readonly db: Db, private readonly max: number) {}

  /** Closes not yet written (the caller bounds this: backpressure). */
  get backlog(): number {
    return this.pending.length;
  }

  close(run: Run, request: CloseRequest): Promise<string | null> {
    return new Promise((done) => {
      this.pending.push({ ...request, run, done });
      this.flushing ??= this.flush();
    });
  }

  /** Resolves when everything handed in so far is written. */
  async idle(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async flush(): Promise<void> {
    // Let the closes of turns finishing in the same tick join this batch.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, this.max);
      this.batches++;
      const rows = await this.db.query<{ run_id: string; message_id: string }>(
        'select * from agent_kit_proposed_close_runs($1::jsonb)',
        [JSON.stringify(batch.map((c) => ({
          runId: c.run.id, owner: c.run.owner, fence: c.run.fence, status: c.status, message: c.message,
        })))],
      );
      const closed = new Map(rows.map((r) => [r.run_id, r.message_id]));
      for (const c of batch) c.done(closed.get(c.run.id) ?? null);
    }
    this.flushing = undefined;
  }
}

/**
 * Drain with the fast path until `signal` aborts. Three loops overlap: claims (one statement per
 * batch, refilled when the local queue is half empty), turns (`concurrency` at a time; a turn's
 * slot frees when it returns, as graphile-worker frees a job's slot before its batched
 * completion), and closes (one statement per batch, gathered while the previous one runs).
 */
export async function drainBatched(
  db: Db, turn: BatchedTurn, o: BatchedDrainOptions,
): Promise<{ closed: number; claims: number; closeBatches: number }> {
  const waker = new Waker();
  const progress = new Waker(); // a turn ended or runs arrived: the loops look again
  const unlisten = await db.listen('agent_kit_jobs', () => waker.poke());
  const closer = new CloseBatcher(db, o.closeBatch);
  const local: Run[] = [];
  let running = 0;
  let closed = 0;
  let claims = 0;
  const ttl = `${o.leaseTtlMs} milliseconds`;
  const closes = new Set<Promise<void>>();

  const claimLoop = async () => {
    while (!o.signal.aborted) {
      const room = o.claimBatch - local.length;
      if (room < o.claimBatch / 2) {
        await progress.wait(50, o.signal);
        continue;
      }
      claims++;
      const rows = await db.query<RunRow>('select * from agent_kit_proposed_claim_due_runs($1, $2, $3::interval, $3::interval)', [o.owner, room, ttl]);
      local.push(...rows.map(toRun));
      progress.poke();
      if (rows.length === 0) await waker.wait(250, o.signal);
    }
  };
  const turnLoop = async () => {
    while (!o.signal.aborted || local.length > 0) {
      if (running >= o.concurrency || local.length === 0 || closer.backlog >= 2 * o.closeBatch) {
        await progress.wait(50, o.signal);
        continue;
      }
      const run = local.shift()!;
      running++;
      void turn(run).then((request) => {
        running--;
        progress.poke();
        const p: Promise<void> = closer.close(run, request).then((id) => {
          if (id !== null) closed++;
        }).finally(() => closes.delete(p));
        closes.add(p);
      });
    }
  };
  try {
    await Promise.all([claimLoop(), turnLoop()]);
    while (running > 0) await progress.wait(50, new AbortController().signal);
    await Promise.all(closes);
  } finally {
    await unlisten();
  }
  return { closed, claims, closeBatches: closer.batches };
}

/** Drain `jobs` null turns on the fast path at `concurrency`, timed like the peers. */
export async function measureBatchedNullTurns(
  db: Db, o: { concurrency: number; jobs: number; timeBoxMs: number; claimBatch: number },
): Promise<DrainResult & { claimsPerRun: number; closeBatchesPerRun: number }> {
  await clearQueue(db);
  const stop = new AbortController();
  const drain = drainBatched(db, async () => ({ status: 'completed', message: { text: 'done' } }), {
    owner: `bench-batched-${process.pid}`, concurrency: o.concurrency, claimBatch: o.claimBatch,
    closeBatch: o.claimBatch, leaseTtlMs: 300_000, signal: stop.signal,
  });
  try {
    const result = await measureDrain({
      total: o.jobs, timeBoxMs: o.timeBoxMs,
      enqueue: () => enqueueTurnsAtOnce(db, o.jobs),
      isDrained: () => isQueueDrained(db),
      countDone: async () => Number((await db.query<{ n: number }>(
        `select count(*)::int as n from agent_kit_runs where status = 'completed' and updated_at > now() - interval '10 minutes'`,
      ))[0]!.n),
    });
    stop.abort();
    const counts = await drain;
    return { ...result, claimsPerRun: counts.claims / result.done, closeBatchesPerRun: counts.closeBatches / result.done };
  } finally {
    stop.abort();
    await drain.catch(() => {});
  }
}
