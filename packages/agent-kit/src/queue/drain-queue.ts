// The queue drain: one invocation's worth of work (a cron call) or, with `waitForWork`, a worker's
// endless one. It claims the runs of due jobs in batches (one statement, SKIP LOCKED), runs their
// segments several at once, takes the due jobs the batch could not claim and settles each, so no
// job is lost and two drains at once are safe: a claim (the next fence) decides who runs a run.
// No leader election. A run out of attempts is left to the reaper's salvage, never claimed again.
import { assert, coerceError, InvalidArgumentError } from '../errors.js';
import { claimDueSegments } from '../turn/segment-claim.js';
import type { RunSegment, Runtime, SegmentOptions, SegmentOutcome } from '../turn/types.js';
import { ClaimPace } from './claim-pace.js';
import { backoffMs, neverAborted, sleep } from './pace.js';
import { settleJob, takeJobsForDrain, type SettleOutcome } from './jobs.js';
import { recordPass } from './passes.js';

export interface DrainOptions {
  /**
   * The invocation's whole budget (its platform time limit); default config.invocationBudgetMs.
   * A worker passes Infinity. Each segment gets min(remaining budget, config.invocationBudgetMs).
   */
  budgetMs?: number;
  /** Segments in flight at once, and the most runs claimed or jobs taken per query. Default 4. */
  concurrency?: number;
  /** Lease owner prefix; each segment's owner is `<owner>-<n>`. Default `drain-<pid>-<random>`. */
  owner?: string;
  /** Stop taking jobs; running segments get it too and park at their next step boundary. */
  stopSignal?: AbortSignal;
  /**
   * The segment runner; default the turn engine's runSegment. Tests inject their own, which must
   * honour SegmentOptions.preClaimed: the drain claims most runs itself, in batches.
   */
  runSegment?: RunSegment;
  /**
   * Long-running mode: called when no job is due, resolves when there may be work (NOTIFY, a
   * timer). Without it the drain returns once nothing is due and nothing is in flight.
   */
  waitForWork?: (signal: AbortSignal) => Promise<void>;
  /** While segments run and nothing is due, look for new jobs this often. Default 1000 ms. */
  pollMs?: number;
}

export interface DrainReport {
  /** Jobs taken from the queue, the jobs of runs claimed in batches included. */
  taken: number;
  /** Segments that claimed their run (closed + parked + lost + stopped). */
  claimed: number;
  closed: number;
  parked: number;
  lost: number;
  stopped: number;
  /** Jobs whose run could not be claimed (busy, closed, missing, waiting, blocked, not due). */
  notClaimed: number;
  /** Of those: jobs deleted (closed, waiting, blocked run) and jobs moved to a lease expiry or a model retry's time. */
  dropped: number;
  rescheduled: number;
  /** Segments or takes that threw; each is logged with its run. */
  errors: number;
  durationMs: number;
}

export const defaultDrainConcurrency = 4;
const concurrencyMax = 100; // each segment holds a connection at times; pools are ~10
const defaultPollMs = 1_000;

/**
 * Stop taking jobs when less than this is left of the budget: 10 % of it, at least 1 s and at most
 * 15 s, but never more than half of it (a budget of 1 s or less would otherwise take nothing).
 * A segment started later would barely claim before it has to slice, burning a fence (and a
 * model call) for nothing; the time left goes to finishing or slicing the segments in flight.
 */
export function takeMarginMs(budgetMs: number): number {
  return Math.min(15_000, Math.max(1_000, budgetMs * 0.1), budgetMs / 2);
}

/**
 * The visibility timeout of a taken job: a drain claims right after taking, so this only matters
 * when it dies in between; then the job comes due again as soon as a dead lease would (the TTL),
 * within 1–60 s.
 */
export function jobLockMs(leaseTtlMs: number): number {
  return Math.min(60_000, Math.max(1_000, leaseTtlMs));
}

/**
 * Drain the queue: claim the runs of due jobs in batches, take and settle the due jobs a batch
 * could not claim, and run their segments (`concurrency` at a time) until the budget's margin,
 * the stop signal, or (without waitForWork) an empty queue.
 * @throws InvalidArgumentError for a non-positive budget or a concurrency outside 1..100.
 * @throws StoreUnavailableError (without waitForWork) when its first claim or take failed.
 */
export async function drainQueue(rt: Runtime, options: DrainOptions = {}): Promise<DrainReport> {
  const startedMs = Date.now();
  const budgetMs = options.budgetMs ?? rt.config.invocationBudgetMs;
  const concurrency = options.concurrency ?? defaultDrainConcurrency;
  if (!(budgetMs > 0)) throw new InvalidArgumentError(`drain budget must be positive, got ${budgetMs} ms`);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > concurrencyMax) {
    throw new InvalidArgumentError(`drain concurrency must be an integer 1..${concurrencyMax}, got ${concurrency}`);
  }
  const runSegment = options.runSegment ?? (await loadRunSegment());
  const signal = options.stopSignal ?? neverAborted;
  const ownerPrefix = options.owner ?? `drain-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const report = emptyReport();
  const remainingMs = () => startedMs + budgetMs - Date.now();
  const margin = takeMarginMs(budgetMs);
  const inFlight = new Set<Promise<void>>();
  let segmentNo = 0;
  let segmentsEnded = 0;
  let takeFailures = 0;

  // What a segment started now gets, and what one started first would (a worker's: the whole budget).
  const segmentBudgetMs = () => Math.max(1, Math.min(remainingMs(), rt.config.invocationBudgetMs));
  const invocationBudgetMs = Math.min(budgetMs, rt.config.invocationBudgetMs);
  // Runs claimed ahead of a free slot, oldest first; a finishing segment starts the next at once.
  const ready: ReadySegment[] = [];
  const pace = new ClaimPace(rt.config.leaseTtlMs);
  const start = (job: JobToRun, budgetMs: number, preClaimed?: SegmentOptions['preClaimed']) => {
    const owner = preClaimed?.claim.lease.owner ?? `${ownerPrefix}-${++segmentNo}`;
    const segmentStartedMs = performance.now();
    const running = runJob(rt, runSegment, job, { owner, budgetMs, invocationBudgetMs, stopSignal: signal, preClaimed }, report)
      .then((outcome) => {
        // A job whose run was not claimed (held by another process, closed, blocked) ends in
        // milliseconds: it says nothing about how long this drain's segments hold their slots.
        if (outcome?.kind !== 'not-claimed') pace.segmentTook(performance.now() - segmentStartedMs);
      })
      .finally(() => {
        inFlight.delete(running);
        segmentsEnded++;
        startReady();
      });
    inFlight.add(running);
  };
  const startReady = () => {
    while (inFlight.size < concurrency && ready.length > 0) {
      const next = ready.shift()!;
      start(next.job, next.budgetMs, next.preClaimed);
    }
  };

  // Claim the runs of up to `wanted` due jobs in one statement; they start as slots free.
  const claimDue = async (wanted: number) => {
    const owners = Array.from({ length: wanted }, (_, i) => `${ownerPrefix}-${segmentNo + i + 1}`);
    const budgetMs = segmentBudgetMs();
    const sentAtMs = Date.now();
    const claimStartedMs = performance.now();
    const claims = await claimDueSegments(rt.db, {
      owners, leaseTtlMs: rt.config.leaseTtlMs, budgetMs, maxRunAttempts: rt.config.maxRunAttempts,
      historyTurns: rt.historyTurns,
    });
    pace.claimTook(performance.now() - claimStartedMs);
    segmentNo += claims.length; // the SQL hands out the owners in order
    report.taken += claims.length;
    for (const claim of claims) {
      ready.push({ job: { runId: claim.lease.runId, tries: claim.lease.attempts }, budgetMs, preClaimed: { claim, sentAtMs } });
    }
    startReady();
    return claims.length;
  };

  // Take up to `free` due jobs the batch claim left (their runs could not be claimed at once:
  // closed, waiting, blocked, leased, spent, or held a moment by another transaction); a segment
  // per job tries its own claim and settles the job if it fails. Returns the jobs taken.
  const takeRest = async (free: number) => {
    const { jobs, spent } = await takeJobsForDrain(rt.db, free, jobLockMs(rt.config.leaseTtlMs), rt.config.maxRunAttempts);
    report.taken += jobs.length + spent;
    report.dropped += spent;
    report.notClaimed += spent;
    for (const job of jobs) start(job, segmentBudgetMs());
    return jobs.length + spent;
  };

  while (!signal.aborted && remainingMs() >= margin) {
    // Free slots (none while runs are ready: a finishing segment starts the next) and the runs
    // to keep claimed ahead, less those already ready.
    const wanted = concurrency - inFlight.size + pace.ahead(concurrency) - ready.length;
    if (wanted <= 0) {
      // Runs wait only for busy slots: a segment that ends starts the next (startReady).
      assert(inFlight.size > 0, 'a drain with runs claimed ahead has segments in flight');
      await Promise.race(inFlight);
      continue;
    }
    const endedBeforeClaim = segmentsEnded;
    let found: number;
    try {
      found = await claimDue(wanted);
      const idle = concurrency - inFlight.size;
      if (found < wanted && idle > 0) found += await takeRest(idle);
      takeFailures = 0;
      await recordPass(rt, 'drain', ownerPrefix);
    } catch (raw) {
      report.errors++;
      takeFailures++;
      rt.log?.({ msg: 'drain: claiming or taking jobs failed', error: coerceError(raw).message, failures: takeFailures });
      // One invocation: the jobs are still queued. Having done nothing, it fails (a cron route
      // answers 503, not an empty report); having done some work, it reports it.
      if (!options.waitForWork && report.taken === 0 && inFlight.size === 0) throw coerceError(raw);
      if (!options.waitForWork) break;
      await sleep(backoffMs(takeFailures), signal);
      continue;
    }
    if (found >= wanted) continue; // a full batch: more may be due
    // Nothing more is due now.
    if (options.waitForWork) {
      await options.waitForWork(signal);
    } else if (inFlight.size === 0) {
      // A segment that ended while we claimed may have enqueued its thread's next run after the
      // claim's snapshot was taken: look once more before giving up.
      if (segmentsEnded === endedBeforeClaim) break;
    } else {
      // A finishing segment may enqueue its thread's next run; look again when one ends or soon.
      await firstOf(inFlight, options.pollMs ?? defaultPollMs);
    }
  }
  // Runs claimed ahead still start (they hold our leases); a stopped drain's segments park at
  // their first step boundary.
  while (inFlight.size > 0) await Promise.race(inFlight);
  report.durationMs = Date.now() - startedMs;
  return report;
}

interface ReadySegment {
  job: JobToRun;
  budgetMs: number;
  preClaimed: NonNullable<SegmentOptions['preClaimed']>;
}

/** A run to start a segment for: a taken job (settled if the run is not claimed), or a claimed run. */
interface JobToRun {
  runId: string;
  /** The taken job; none when the drain claimed the run itself (the claim deleted its job). */
  jobId?: number;
  /** Takes of the job, or the run's attempts when claimed: for the log. */
  tries: number;
}

/**
 * Run one segment and account for it; a taken job whose run was not claimed is settled. Returns
 * the segment's outcome (undefined when it threw).
 */
async function runJob(
  rt: Runtime, runSegment: RunSegment, job: JobToRun,
  segment: Omit<SegmentOptions, 'runId'>, report: DrainReport,
): Promise<SegmentOutcome | undefined> {
  let outcome: SegmentOutcome | undefined;
  try {
    outcome = await runSegment(rt, { runId: job.runId, ...segment });
    countOutcome(report, outcome);
    if (outcome.kind === 'not-claimed' && job.jobId !== undefined) countSettle(report, await settleJob(rt.db, job.jobId));
    return outcome;
  } catch (raw) {
    // The job is still queued (its due time was pushed by the take) or the run holds our lease
    // and the reaper hands it back after expiry: either way nothing is lost.
    report.errors++;
    const error = coerceError(raw);
    const fence = outcome && 'fence' in outcome ? outcome.fence : segment.preClaimed?.claim.lease.fence;
    rt.log?.({
      msg: 'drain: segment failed', runId: job.runId, fence, attempt: job.tries, owner: segment.owner,
      error: error.message, code: (error as { code?: unknown }).code,
    });
    return outcome;
  }
}

/** Resolve when one of `running` settles or after `ms`, clearing the timer either way. */
async function firstOf(running: Set<Promise<void>>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([...running, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

function countOutcome(report: DrainReport, outcome: SegmentOutcome) {
  if (outcome.kind === 'not-claimed') {
    report.notClaimed++;
    return;
  }
  report.claimed++;
  report[outcome.kind]++;
}

function countSettle(report: DrainReport, settled: SettleOutcome) {
  if (settled === 'dropped') report.dropped++;
  if (settled === 'rescheduled') report.rescheduled++;
}

function emptyReport(): DrainReport {
  return {
    taken: 0, claimed: 0, closed: 0, parked: 0, lost: 0, stopped: 0, notClaimed: 0,
    dropped: 0, rescheduled: 0, errors: 0, durationMs: 0,
  };
}

/** The turn engine's runSegment, imported only when no runner is injected. */
async function loadRunSegment(): Promise<RunSegment> {
  const { runSegment } = await import('../turn/index.js');
  return runSegment;
}
