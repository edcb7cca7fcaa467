// A reader of a thread carries its parked turn on (ADR-0120). A turn longer than one invocation
// parks at each slice's end, queued with its job due at once, and waits for whoever claims it
// next. Where no worker polls (serverless) that was the next cron call, 10 s to a minute of
// silence per slice. But a turn someone watches has a live invocation at hand: the reader's own
// events request. So that request runs the thread's next turn when it finds one due, when it
// connects and whenever its stream passes a park or a close; a turn that comes due later (a model
// retry's wait, the lease of a segment whose process died) is looked for again then, while the
// stream lasts. A park that comes too late in the reader's own invocation is handed off: one of
// its readers, the first to ask the store, ends its stream and comes back at once to an
// invocation with time (ADR-0122); the others read on. Nothing new is decided here: the claim
// decides who runs the turn, as it does between a drain and a retried chat request.
import { coerceError } from '../errors.js';
import type { ThreadEvent } from '../event-log/read-events.js';
import { findNextTurnToRun } from '../event-log/read-threads.js';
import { takeMarginMs } from '../queue/drain-queue.js';
import type { Queryable } from '../store/db.js';
import type { HandlerContext } from './context.js';

/**
 * A lease that ran out is taken over this long after: a live segment whose clock ran late may
 * still park in that time (an outside trial saw one park 41 ms after its expiry).
 */
const takeoverGraceMs = 1_000;
/**
 * Whether this reader hands the park at `fence` off: true for the first to ask while the run is
 * still queued at that fence (each park once), false when another reader did or a claim took the
 * run on. A hint for readers, not a lease: it decides nothing of the turn (migration 0047).
 */
export async function takeHandOff(db: Queryable, runId: string, fence: number): Promise<boolean> {
  const [row] = await db.query<{ taken: boolean }>('select agent_kit_take_hand_off($1, $2) as taken', [runId, fence]);
  return row?.taken === true;
}

/** What made the reader look: its request, an event its stream passed, or the turn's due time. */
type Cause = 'connect' | 'event' | 'due';

export interface CarryOn {
  /** Look for the thread's next turn: run it here if due, or look again when it comes due. */
  check(cause: Cause): void;
  /** Look again if this event of the stream may have left a turn to run (a park, a close). */
  saw(event: ThreadEvent): void;
  /** Aborted when the stream should end for its reader to come back to an invocation with time. */
  readonly handOff: AbortSignal;
  /** The stream ended: no more looks (one under way still starts what it found). */
  close(): void;
}

/** Events past `liveAfterSeq` are live: a replayed park was carried on long ago. */
export function carryOn(ctx: HandlerContext, threadId: string, deadlineMs: number, liveAfterSeq: number): CarryOn {
  let closed = !ctx.followersCarryOn;
  let looking = false;
  /** Asked to look while a look was under way: look once more after it, for this cause. */
  let again: Cause | undefined;
  let timer: NodeJS.Timeout | undefined;
  const handOff = new AbortController();
  // Less of the invocation than a drain would take a run with is too little to start one.
  const marginMs = takeMarginMs(ctx.rt.config.invocationBudgetMs);
  const log = ctx.rt.log;

  async function look(cause: Cause) {
    const next = await findNextTurnToRun(ctx.rt.db, threadId);
    if (!next) return;
    const dueInMs = next.dueInMs + (next.status === 'running' ? takeoverGraceMs : 0);
    if (deadlineMs - Math.max(0, dueInMs) - Date.now() < marginMs) return; // a drain runs it
    if (dueInMs <= 0) {
      // (A running run's lease ran out: its process died or froze, and the claim takes it over.)
      log?.({ msg: 'http reader carries turn on', runId: next.runId, threadId, on: cause, takeover: next.status === 'running' });
      ctx.segments.start(next.runId, deadlineMs);
    } else if (!closed) {
      clearTimeout(timer);
      timer = setTimeout(() => check('due'), Math.ceil(dueInMs) + 1);
    }
  }

  function check(cause: Cause) {
    if (closed) return;
    if (looking) {
      again = cause;
      return;
    }
    looking = true;
    const looked = look(cause)
      .catch((raw: unknown) => {
        // Nothing is lost: the turn waits for a drain, as it did before.
        log?.({ msg: 'http turn not carried on', threadId, error: coerceError(raw).message });
      })
      .finally(() => {
        looking = false;
        const cause = again;
        again = undefined;
        if (cause) check(cause);
      });
    ctx.waitUntil?.(looked);
  }

  /** End the stream if this reader is the one to hand the park off (ADR-0122). */
  function handOffIfFirst(runId: string, fence: number) {
    if (handOff.signal.aborted) return;
    const taken = takeHandOff(ctx.rt.db, runId, fence)
      .then((first) => {
        if (first && !closed) handOff.abort();
      })
      .catch(() => handOff.abort()); // the store did not answer: the next request will see
    ctx.waitUntil?.(taken);
  }

  return {
    check,
    saw(event) {
      if (closed || event.seq <= liveAfterSeq || (event.type !== 'run-parked' && event.type !== 'run-closed')) return;
      const dueNow = event.type === 'run-parked' && event.data.status === 'queued' &&
        (typeof event.data.dueAt !== 'string' || Date.parse(event.data.dueAt) <= Date.now());
      if (dueNow && event.runId && deadlineMs - Date.now() < marginMs) handOffIfFirst(event.runId, event.fence);
      else check('event');
    },
    handOff: handOff.signal,
    close() {
      closed = true;
      clearTimeout(timer);
    },
  };
}
