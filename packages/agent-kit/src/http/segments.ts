// Segments that HTTP requests start in the background. A segment is deliberately not tied to
// the request that started it: a client that disconnects must not stop its turn. The registry
// lets a server wait for (or slice) the segments still running when it shuts down. A segment
// that closes its run starts the thread's next queued turn (a message sent meanwhile) while the
// invocation has time left, so on serverless a follow-up does not wait for the next cron drain.
// A start asked while the run's segment is in flight runs once that one ends: the segment a chat
// request starts for a turn queued behind another is refused its claim, and the close that hands
// the turn over may come before that segment has ended; the turn then waited for a drain.
import crypto from 'node:crypto';
import { coerceError } from '../errors.js';
import { findNextQueuedRun } from '../event-log/read-runs.js';
import { takeMarginMs } from '../queue/drain-queue.js';
import type { Runtime, RunSegment, SegmentOutcome } from '../turn/types.js';

/** The background segments of one set of handlers. */
export interface SegmentRegistry {
  /**
   * Run a segment of `runId`, or another once the one this process runs ends. Never throws.
   * `deadlineMs`: when the invocation asking must end (default: a whole budget from now).
   */
  start(runId: string, deadlineMs?: number): void;
  /** Run ids with a segment in flight here. */
  active(): string[];
  /** Resolve when every segment in flight (and any started meanwhile) has ended. */
  settle(): Promise<void>;
  /** Ask the segments to park at their next step boundary (SIGTERM), then settle. */
  stop(): Promise<void>;
}

export interface SegmentRegistryOptions {
  rt: Runtime;
  /** Resolves the turn engine (injected, or imported lazily on first use). */
  loadRunSegment: () => Promise<RunSegment>;
  /** A platform hook that keeps the invocation alive for a promise (e.g. Vercel's waitUntil). */
  waitUntil?: (promise: Promise<unknown>) => void;
}

/** Lease owners name the process and a counter, so logs tell segments apart. */
const ownerPrefix = `http-${process.pid}-${crypto.randomBytes(3).toString('hex')}`;
let ownerCounter = 0;

export function createSegmentRegistry(options: SegmentRegistryOptions): SegmentRegistry {
  const inFlight = new Map<string, Promise<SegmentOutcome | undefined>>();
  /** Runs asked to start while their segment was in flight, and the deadline each was asked with. */
  const askedAgain = new Map<string, number>();
  const stopController = new AbortController();
  const log = options.rt.log;

  /** `deadlineMs`: when the invocation that started the first segment of this chain must end. */
  async function runOne(runId: string, deadlineMs: number): Promise<SegmentOutcome | undefined> {
    const owner = `${ownerPrefix}-${++ownerCounter}`;
    try {
      const runSegment = await options.loadRunSegment();
      const outcome = await runSegment(options.rt, {
        runId, owner, stopSignal: stopController.signal, budgetMs: Math.max(1, deadlineMs - Date.now()),
      });
      log?.({ msg: 'http segment ended', runId, owner, outcome: outcome.kind });
      if (outcome.kind === 'closed') {
        await startNext(runId, deadlineMs).catch((raw: unknown) => {
          // The next turn's job is due: a drain runs it instead.
          log?.({ msg: 'http next turn not started', runId, error: coerceError(raw).message });
        });
      }
      return outcome;
    } catch (raw) {
      // The run is not lost: its lease expires and the reaper hands it to the drain.
      const error = coerceError(raw);
      log?.({ msg: 'http segment failed', runId, owner, error: error.message, stack: error.stack });
      return undefined;
    }
  }

  /** Too little of the invocation is left to start a segment (a drain will run the turn). */
  const tooLate = (deadlineMs: number) =>
    deadlineMs - Date.now() < takeMarginMs(options.rt.config.invocationBudgetMs) || stopController.signal.aborted;

  /** Run the thread's next turn here, unless too little of the invocation is left (a drain will). */
  async function startNext(closedRunId: string, deadlineMs: number) {
    if (tooLate(deadlineMs)) return;
    const next = await findNextQueuedRun(options.rt.db, closedRunId);
    if (next) start(next, deadlineMs);
  }

  function start(runId: string, deadlineMs: number) {
    if (stopController.signal.aborted) return;
    if (inFlight.has(runId)) {
      askedAgain.set(runId, Math.max(deadlineMs, askedAgain.get(runId) ?? 0));
      return;
    }
    const promise = runOne(runId, deadlineMs).finally(() => {
      inFlight.delete(runId);
      const again = askedAgain.get(runId);
      askedAgain.delete(runId);
      // (A run that ended meanwhile, or parked to wait out a model retry, is refused its claim: one query.)
      if (again !== undefined && !tooLate(again)) start(runId, again);
    });
    inFlight.set(runId, promise);
    options.waitUntil?.(promise);
  }

  return {
    start: (runId, deadlineMs) => start(runId, deadlineMs ?? Date.now() + options.rt.config.invocationBudgetMs),
    active: () => [...inFlight.keys()],
    async settle() {
      while (inFlight.size > 0) await Promise.allSettled([...inFlight.values()]);
    },
    async stop() {
      stopController.abort();
      await this.settle();
    },
  };
}
