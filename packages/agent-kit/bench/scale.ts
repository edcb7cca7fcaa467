// Section 6: the drain's claim path (a batch claim of the earliest due runs, migration 0018) as
// the queue grows: runs/s and p99 claim latency at 1k, 10k and 100k queued runs. Each measured
// run is parked back to `queued` (a slice end), so the queue keeps its depth while it is
// measured; the plans of the batch claim and of the take (the path for jobs a batch cannot
// claim) are captured at each depth to show index scans, not sequential ones. Each depth is its
// own fresh store of the same kind, so the depths can be measured in alternation.
import { claimResult, msInterval, parkRun } from '../src/lease/lease.js';
import type { RunRow } from '../src/lease/run-row.js';
import { takeJobs } from '../src/queue/jobs.js';
import { claimDueSegments } from '../src/turn/segment-claim.js';
import type { Db } from '../src/store/db.js';
import { seedQueuedRuns, vacuumAnalyze, type BenchDatabase } from './lib/bench-db.js';
import { combine, measureThroughput, percentile, type Throughput } from './lib/measure.js';
import { capturePlans } from './lib/plans.js';
import type { Row } from './lib/report.js';
import { benchLongThread, type LongThreadOptions } from './long-thread.js';
import { enqueueTurnsAtOnce } from './orchestration.js';

export interface ScaleOptions {
  concurrency: number;
  depths: number[];
  /** One measured slice of one depth. */
  sliceMs: number;
  rounds: number;
  warmupMs: number;
  /** Jobs enqueued at once on a queue whose statistics say it is empty. */
  staleBurst: number;
  longThread: LongThreadOptions;
}

const leaseTtlMs = 60_000;
const jobLockMs = 30_000;

/** Make exactly `depth` runs queued with due jobs: queue more, or abort the surplus (bench only). */
export async function setQueueDepth(db: Db, depth: number): Promise<void> {
  const rows = await db.query<{ n: number }>('select count(*)::int as n from agent_kit_jobs');
  const current = Number(rows[0]!.n);
  if (current < depth) {
    await seedQueuedRuns(db, depth - current);
  } else if (current > depth) {
    await db.query(
      `with surplus as (
         delete from agent_kit_jobs where id in (
           select id from agent_kit_jobs order by due_at desc limit $1) returning run_id)
       update agent_kit_runs r set status = 'aborted' from surplus s where r.id = s.run_id`,
      [current - depth],
    );
  }
  await db.exec('update agent_kit_jobs set due_at = now() - interval \'1 second\' where due_at > now()');
}

let claimNo = 0;

/**
 * One slice of work: claim the earliest due run with the drain's batch claim (timed), park it
 * back to queued. The SQL function alone, without the engine's begin of a first segment: the
 * queue's first pass holds only fresh runs, so with it a deep queue would be measured on fresh
 * claims and a shallow one, soon cycled through, on cheaper re-claims.
 */
function claimCycle(db: Db, claimLatenciesMs: number[]) {
  return async (worker: number) => {
    const owner = `bench-scale-${worker}-${++claimNo}`;
    const startAt = performance.now();
    const [row] = await db.query<RunRow>(
      'select * from agent_kit_claim_due_runs($1::text[], $2::interval, $2::interval, 1000)', [[owner], msInterval(leaseTtlMs)]);
    claimLatenciesMs.push(performance.now() - startAt);
    if (!row) return;
    const claim = await claimResult(db, { runId: row.id, owner, leaseTtlMs }, row);
    if (!claim.claimed || !(await parkRun(db, claim.lease, 'queued'))) throw new Error('a fresh lease could not park its run');
  };
}

/** Plans of one batch claim and one take at the current depth (Postgres only). */
async function plansAtDepth(url: string) {
  return capturePlans(url, [
    [`select * from agent_kit_claim_due_runs(array['bench-plan'], $1::interval, $1::interval, 3)`, ['60 seconds']],
    ['select * from agent_kit_take_jobs(1, $1::interval)', ['30 seconds']],
  ]);
}

/**
 * The queue right after a quiet spell: its table analyzed while empty, then a burst enqueued in
 * one statement. Returns how many jobs ONE take of one job actually took (it must be 1).
 */
async function takeAfterStaleStatistics(
  open: OpenQueueDb, burst: number,
): Promise<{ taken: number; ms: number; claimed: number; claimMs: number }> {
  const bench = await open();
  try {
    // A busy spell leaves pages behind; the queue drains; autovacuum's analyze sees it empty.
    await enqueueTurnsAtOnce(bench.db, burst);
    await bench.db.exec(`delete from agent_kit_jobs; update agent_kit_runs set status = 'aborted';
      analyze agent_kit_jobs, agent_kit_runs;`);
    await enqueueTurnsAtOnce(bench.db, burst);
    const startAt = performance.now();
    const jobs = await takeJobs(bench.db, 1, jobLockMs);
    const ms = performance.now() - startAt;
    const claimAt = performance.now();
    const claims = await claimDueSegments(bench.db, { owners: ['bench-stale'], leaseTtlMs, budgetMs: leaseTtlMs, maxRunAttempts: 3 });
    return { taken: jobs.length, ms, claimed: claims.length, claimMs: performance.now() - claimAt };
  } finally {
    await bench.drop();
  }
}

/** A fresh store of the bench's kind (Postgres database or embedded instance). */
export type OpenQueueDb = () => Promise<BenchDatabase>;

/**
 * Run section 6. Each depth gets its own fresh store (same server, same pool), and the depths
 * are measured in alternating slices (1k, 10k, 100k, 10k, 100k, 1k, …), so a change in the machine's speed
 * falls on every depth alike instead of looking like a cost of depth. Plans go into `artifacts`.
 */
export async function benchScale(open: OpenQueueDb, o: ScaleOptions, artifacts: Record<string, unknown>): Promise<Row[]> {
  const section = `6. Scale: the drain's claim as the queue grows (${o.concurrency} clients)`;
  const rows: Row[] = [];
  const queues: { depth: number; bench: BenchDatabase; sliceP99s: number[]; slices: Throughput[] }[] = [];
  try {
    for (const depth of o.depths) {
      const bench = await open();
      queues.push({ depth, bench, sliceP99s: [], slices: [] });
      await setQueueDepth(bench.db, depth);
      await vacuumAnalyze(bench.db);
      if (bench.url) {
        const captured = await plansAtDepth(bench.url);
        artifacts[`plans-queue-${depth}`] = captured.plans;
        if (captured.scans.length > 0) artifacts[`scans-queue-${depth}`] = captured.scans;
      }
    }
    for (const q of queues) {
      await measureThroughput({ concurrency: o.concurrency, durationMs: o.warmupMs, warmupMs: 0, op: claimCycle(q.bench.db, []) });
    }
    // Each round starts one depth later (1k, 10k, 100k; then 10k, 100k, 1k; …), so no depth is
    // always the one measured right after another: on PGlite the queue measured second kept the
    // highest p99 whichever depth it was (garbage from the slice before lands in it).
    for (let round = 0; round < o.rounds; round++) {
      for (let k = 0; k < queues.length; k++) {
        const q = queues[(k + round) % queues.length]!;
        const latencies: number[] = [];
        q.slices.push(await measureThroughput({
          concurrency: o.concurrency, durationMs: o.sliceMs, warmupMs: 0, op: claimCycle(q.bench.db, latencies),
        }));
        q.sliceP99s.push(percentile(latencies, 0.99));
      }
    }
  } finally {
    for (const q of queues) await q.bench.drop();
  }
  const results = queues.map((q) => {
    const t = combine(q.slices);
    // The median of the slices' p99s: identical queues on PGlite differed by up to 1.3× in a
    // p99 over all their slices, set by the one slice a long GC pause fell in.
    return { depth: q.depth, perSecond: t.perSecond, p99Ms: percentile(q.sliceP99s, 0.5) };
  });
  const stale = await takeAfterStaleStatistics(open, o.staleBurst);
  rows.push({
    section, metric: `jobs taken by take_jobs(1) after a ${o.staleBurst.toLocaleString('en-US')}-job burst on an analyzed-empty queue`,
    unit: 'jobs', agentKit: stale.taken, target: { kind: 'at-most', value: 1 },
    note: `${stale.ms.toFixed(0)} ms; fixed by migration 0011 (a MATERIALIZED CTE)`,
  });
  rows.push({
    section, metric: `runs claimed by claim_due_runs with one owner after the same burst`,
    unit: 'runs', agentKit: stale.claimed, target: { kind: 'at-most', value: 1 },
    note: `${stale.claimMs.toFixed(0)} ms`,
  });
  const long = await open();
  try {
    rows.push(...await benchLongThread(long, o.longThread, section, artifacts));
  } finally {
    await long.drop();
  }
  const first = results[0]!;
  const label = (depth: number) => (depth >= 1000 ? `${depth / 1000}k` : String(depth));
  for (const r of results) {
    rows.push({
      section, metric: `runs/s, ${label(r.depth)} queued`, unit: 'runs/s', agentKit: r.perSecond,
      baseline: first.perSecond, baselineName: `${label(first.depth)} queued`,
      target: { kind: 'ratio-at-least', value: 0.8 },
      note: 'agent_kit_claim_due_runs of one run + park (slice end) per run; flat = within 20 % of the smallest queue',
    });
    rows.push({
      section, metric: `p99 claim latency, ${label(r.depth)} queued`, unit: 'ms', agentKit: r.p99Ms,
      baseline: first.p99Ms, baselineName: `${label(first.depth)} queued`,
      target: { kind: 'at-most', value: Math.max(first.p99Ms * 1.5, first.p99Ms + 2) },
      note: 'the batch claim\'s round trip, p99 of each slice, median over slices; flat = at most 1.5× (or +2 ms) the smallest queue',
    });
  }
  return rows;
}
