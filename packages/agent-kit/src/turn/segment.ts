// A segment as the engine drives it (see run-segment.ts): its lease, settings and stream mirror,
// and what it asks of them between steps: the text viewers have, whether to slice, how a step
// cut mid-stream goes on, and the wait before a model request refused for now is asked again.
import { failLease, parkForRetry, parkQueued, readInterrupt, retryStep, type Interrupt, type Lease, type ParkStatus } from '../lease/lease.js';
import { notifyThread } from '../store/notify-thread.js';
import type { Run } from '../lease/run-row.js';
import { supportsPrefill } from '../model/index.js';
import { sleep } from '../queue/pace.js';
import type { ContextWindow } from './context-window.js';
import type { Step, StepCommit } from './journal.js';
import { finishEffect } from '../effect-ledger/effect-ledger.js';
import { describeRefusal, isRetryableModelError, retryDelayMs } from './model-retry.js';
import type { TurnSettings } from './settings.js';
import type { StreamMirror } from './stream-mirror.js';
import type { Runtime, SegmentOptions, SegmentOutcome } from './types.js';

/** One segment of a run, as runSegment drives it. */
export interface Segment {
  rt: Runtime;
  lease: Lease;
  run: Run;
  settings: TurnSettings;
  mirror: StreamMirror;
  /** Aborted with a StepStop reason when the lease is lost or the mirror stops. */
  signal: AbortSignal;
  stopAtMs: number;
  /** The invocation budget this segment was given. */
  budgetMs: number;
  options: SegmentOptions;
  /** Stop renewing the lease (the renewal in flight settled): before the segment gives it up. */
  stopRenewing: () => Promise<void>;
  /** The run's visible text when this segment started (committed steps + continued prefix). */
  startText: string;
  /** The run's step journal as this segment loaded it and added to it (empty before the load). */
  journal: Step[];
  /** The run's pending cancel or takeover as the last guarded write saw it (claim, step). */
  interrupt: Interrupt;
  /** What the run's thread knows of its model's context window (ADR-0069), as read or learned. */
  contextWindow: ContextWindow | null;
  /** Whether the segment leaves the next one anything to go on from (set once its steps start). */
  progressed?: () => boolean;
  /** Set from the write that drops the step's streamed text (a redo) until the mirror is rebased: it is no progress. */
  textDropped?: boolean;
  /** An effect's final status whose write the store failed: recorded when it answers again. */
  unrecordedEffect?: NonNullable<StepCommit['effect']>;
}

/**
 * A model request its provider refused for now (ADR-0057): wait as it asks, or back off, then ask
 * again. The wait is a `model-retry` event in the thread's log, written with the run's partial set
 * to `from`, the text the retry goes on from (ADR-0061). It ends early for a lost lease or a stop
 * signal, and for a cancel or takeover, read from the run every second meanwhile. A wait that
 * leaves this segment no time for a step after it parks the run instead, due when the wait ends,
 * its attempt spent (ADR-0062).
 */
export async function waitToRetry(
  s: Segment, error: Error, retry: number, at: { stepNo: number; from: string; redo: boolean; refused: boolean },
): Promise<'retry' | 'parked' | 'no' | 'lost'> {
  if (retry > s.settings.modelRetries || !(isRetryableModelError(error) || at.refused)) return 'no';
  const delayMs = retryDelayMs(error, retry);
  const fits = Date.now() + delayMs < s.stopAtMs - s.settings.sliceMarginMs;
  const refusal = describeRefusal(error);
  const { stepNo, from, redo } = at;
  s.rt.log?.({ msg: 'model retry', runId: s.lease.runId, fence: s.lease.fence, stepNo, retry, delayMs, redo, fits, error: refusal.message });
  const data = { stepNo, retry, of: s.settings.modelRetries, delayMs, error: refusal, redo: fits && redo };
  if (redo) s.textDropped = true; // (a store error from here on leaves the next segment nothing of it)
  if (!fits) {
    // The next segment begins from the journal, redoing or continuing the step as a takeover does.
    return (await parkForRetry(s.rt.db, s.lease, delayMs, data)) === null ? 'lost' : 'parked';
  }
  if ((await retryStep(s.rt.db, s.lease, from, data)) === null) return 'lost';
  const until = Date.now() + delayMs;
  for (let left = delayMs; left > 0 && !stopping(s) && !s.interrupt; left = until - Date.now()) {
    await sleepUnlessStopped(s, Math.min(left, interruptPollMs));
    if (until - Date.now() > 0 && !stopping(s)) s.interrupt = await readInterrupt(s.rt.db, s.lease);
  }
  return 'retry';
}

/** How often a segment waiting to retry looks for a cancel or a takeover. */
const interruptPollMs = 1_000;

export function stopping(s: Segment): boolean {
  return s.signal.aborted || Boolean(s.options.stopSignal?.aborted);
}

function sleepUnlessStopped(s: Segment, ms: number): Promise<void> {
  return sleep(ms, [s.signal, s.options.stopSignal]);
}

/** A step cut mid-stream goes on from its text: the setting allows it and the model continues a prefill. */
export function continuesMidStep(s: Segment, model: unknown): boolean {
  return s.settings.continueMidStep && supportsPrefill(model as { provider: string });
}


/** Too little time left to start a model step or a tool call, or asked to stop: slice. */
export function sliceDue(s: Segment): boolean {
  return Boolean(s.options.stopSignal?.aborted) || Date.now() >= s.stopAtMs - s.settings.sliceMarginMs;
}

/** The run's text as viewers see it now: what this segment started from plus what it mirrored. */
export function visibleText(s: Segment): string {
  return s.startText + s.mirror.writtenText;
}

/**
 * The model stopped at its output limit in the middle of a reply, with text and no tool call, and
 * it continues a prefill, so it can be asked to go on (ADR-0068). Not a step with reasoning:
 * Anthropic refuses a prefill with extended thinking on.
 */
export function continuesAtLimit(
  s: Segment, model: unknown, result: { finishReason: string; text: string; toolCalls: unknown[]; reasoning: unknown[] },
): boolean {
  return result.finishReason === 'length' && result.toolCalls.length === 0 && result.reasoning.length === 0
    && result.text.trim() !== '' && continuesMidStep(s, model);
}

/**
 * After the store failed one of its writes, a segment stops (what that write did is unknown),
 * but its lease would hold the run until it expires (the whole budget by default). So, as soon as
 * the store answers again, it hands the run on (ADR-0081), tried within `storeErrorHandBackMs` and
 * the segment's deadline (`stopHandBackMs` once asked to stop):
 * - a segment that left the next one something to go on from (steps journalled, or text a model
 *   continues) parks the run queued, as a slice does: progress resets the attempts (ADR-0115), so
 *   that blips spread over a long turn do not add up to its end;
 * - one that left nothing gives its lease up (failLease: the attempt stays spent, a
 *   `segment-failed` event says why), and the next reaper pass hands the run on, so that a store
 *   that fails every segment still ends the run after MAX_RUN_ATTEMPTS.
 * A claim past the crash budget, which may only salvage (ADR-0007), leaves its lease to run out.
 * The outcome, or null when the lease was gone (lost).
 */
export async function afterStoreError(s: Segment, error: Error): Promise<SegmentOutcome | null> {
  const { runId, threadId, fence } = s.lease;
  const progressed = s.progressed?.() ?? false;
  const given = s.lease.attempts > s.rt.config.maxRunAttempts ? null : await handRunOn(s, error, progressed);
  if (given === false) return null;
  if (given && !progressed) notifyThread(s.rt.db, threadId); // (parkRun wakes the thread itself)
  s.rt.log?.({
    msg: given === null ? 'segment stopped by a store error: its lease runs out'
      : progressed ? 'segment handed its run back after a store error: queued, its progress kept, no attempt spent'
        : 'segment gave its lease up after a store error: the next reaper pass hands the run on',
    runId, fence,
  });
  if (given && progressed) return parked(s, 'queued'); // (waiting_takeover when an operator asked meanwhile)
  return { kind: 'stopped', fence, reason: error.message };
}

/** A segment that parked its run: the status the row has (a park asked `queued` may be `waiting_takeover`). */
export async function parked(s: Segment, status: ParkStatus): Promise<SegmentOutcome> {
  const [row] = await s.rt.db.query<{ status: ParkStatus }>('select status from agent_kit_runs where id = $1', [s.lease.runId]);
  return { kind: 'parked', status: row?.status ?? status, fence: s.lease.fence };
}

/** True: handed on; false: the lease was gone already; null: the store did not answer in time. */
async function handRunOn(s: Segment, error: Error, progressed: boolean): Promise<boolean | null> {
  const stop = s.options.stopSignal;
  let givesUpAt = Math.min(Date.now() + s.settings.storeErrorHandBackMs, s.stopAtMs);
  // Asked to stop (a deploy's SIGTERM), it goes on trying for a while, a second apart: a stop
  // during an outage left its runs to their leases (an outsider's trial).
  let stopping = false;
  const deadline = () => {
    if (stop?.aborted && !stopping) {
      stopping = true;
      givesUpAt = Math.min(givesUpAt, Date.now() + s.settings.stopHandBackMs);
    }
    return givesUpAt;
  };
  // (A renewal under way waits on the store too: the tries do not wait for it past the deadline.)
  await settledBefore(s.stopRenewing(), deadline).catch(() => undefined);
  for (let waitMs = 250; ; waitMs = Math.min(waitMs * 2, 5_000)) {
    const until = deadline();
    await sleep(Math.min(stopping ? 1_000 : waitMs, until - Date.now()), stopping ? undefined : stop);
    const attempt = handBackOnce(s, error, progressed);
    try {
      // A try that waits on the store (a pool waits 10 s for a connection) ends the tries at the
      // deadline, a stop's too, checked every 100 ms: a deploy's SIGKILL would not wait for it.
      // The try left behind is guarded by the lease like any other write.
      const handed = await settledBefore(attempt, deadline);
      return handed ?? null;
    } catch {
      if (Date.now() >= deadline()) return null;
    }
  }
}

/** What `promise` settles to, or undefined once `deadline()` (which may move) has passed first. */
async function settledBefore<T>(promise: Promise<T>, deadline: () => number): Promise<T | undefined> {
  const settled = promise.then((value) => ({ value }));
  settled.catch(() => {}); // (a promise left behind at the deadline may fail later, unawaited)
  for (;;) {
    const left = deadline() - Date.now();
    if (left <= 0) return undefined;
    const done = await Promise.race([settled, sleep(Math.min(left, 100)).then(() => undefined)]);
    if (done) return done.value;
  }
}

/** One try of handRunOn: the effect's record first, then the park or the give-back. */
async function handBackOnce(s: Segment, error: Error, progressed: boolean): Promise<boolean> {
  const effect = s.unrecordedEffect;
  // (Null when the write had gone through after all, or the lease is gone: nothing to add.)
  if (effect) await finishEffect(s.rt.db, s.lease, effect.key, effect.status, effect.result ?? null);
  s.unrecordedEffect = undefined;
  return progressed ? await parkQueued(s.rt.db, s.lease, 'store-error') : await failLease(s.rt.db, s.lease, error);
}
