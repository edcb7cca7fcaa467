// A segment's hold on its lease while it runs: renewals on a timer, and the lease's end as this
// process can vouch for it on its own clock (ADR-0105). Either one that fails aborts the segment
// as lost.
import { renewLease, type Lease } from '../lease/lease.js';
import { sleep } from '../queue/pace.js';
import type { StepStop } from './model-step.js';
import type { Runtime } from './types.js';

export interface LocalHold {
  /** A renewal sent at `sentAtMs` (performance.now()) landed: the lease is held until then plus the TTL. */
  renewed(sentAtMs: number): void;
  dispose(): void;
}

/**
 * The lease as this process can vouch for it, on its own monotonic clock: held until the claim
 * was sent plus the TTL, and from each renewal that lands, until it was sent plus the TTL (the
 * database set the expiry later than that), never past the claim plus `budgetMs` (the deadline
 * the database caps it at). Past it another segment may hold the run, so the
 * segment's signal aborts as lost: a process frozen past its lease, or whose renewals do not come
 * back, stops its tool before the tool's next outside call, not when a refusal finally arrives.
 */
export function holdUntil(
  sinceClaimSentMs: number, leaseTtlMs: number, controller: AbortController, onLapse: () => void = () => {},
  budgetMs = Number.POSITIVE_INFINITY,
): LocalHold {
  // (A wall clock stepped back since the claim was sent must not move the end later.)
  const claimSentMs = performance.now() - Math.max(0, sinceClaimSentMs);
  // No renewal moves the lease past the invocation's deadline (the SQL caps it there too).
  const lastMs = claimSentMs + budgetMs;
  let untilMs = Math.min(claimSentMs + leaseTtlMs, lastMs);
  let timer: NodeJS.Timeout | undefined;
  let disposed = false;
  const lapse = () => {
    if (disposed) return;
    if (!nativeAborted.call(controller.signal)) onLapse();
    controller.abort('lost' satisfies StepStop);
  };
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(lapse, Math.max(0, untilMs - performance.now()));
    timer.unref(); // the segment's own work keeps the process alive, not its lease's end
  };
  arm();
  // The timer alone is late after a freeze: a process resumed past its lease runs its due timers
  // in the order they were due, and a tool's own (a 3 s wait before its outside call) came first
  // and found the signal not yet aborted. Read, the signal looks at the clock itself.
  checkOnRead(controller.signal, () => {
    if (performance.now() >= untilMs) lapse();
  });
  return {
    renewed(sentAtMs) {
      // (A renewal that lands after the segment ended starts no timer: it would keep the process
      // up for a TTL, then call a run that closed cleanly lost.)
      // (The native read: a renewal sent in time that lands just past the old end still extends
      // it, as the database did.)
      const endMs = Math.min(sentAtMs + leaseTtlMs, lastMs);
      if (disposed || nativeAborted.call(controller.signal) || endMs <= untilMs) return;
      untilMs = endMs;
      arm();
    },
    dispose: () => {
      disposed = true;
      clearTimeout(timer);
    },
  };
}

const nativeAborted = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted')!.get! as (this: AbortSignal) => boolean;

/**
 * Have `signal.aborted` (and `throwIfAborted()`) run `check` before answering, while the signal
 * has not aborted: a check that aborts it makes the same read say so. For a signal whose abort
 * is a point in time (a lease's end, a deadline), so that a read after that time never says "go
 * on" because the timer that aborts it has not run yet. Returns the signal.
 */
export function checkOnRead(signal: AbortSignal, check: () => void): AbortSignal {
  const read = () => {
    if (!nativeAborted.call(signal)) check();
    return nativeAborted.call(signal);
  };
  Object.defineProperty(signal, 'aborted', { configurable: true, get: read });
  const throwIfAborted = AbortSignal.prototype.throwIfAborted.bind(signal);
  Object.defineProperty(signal, 'throwIfAborted', {
    configurable: true,
    value: () => {
      read();
      throwIfAborted();
    },
  });
  return signal;
}

/** Renew every third of the TTL, capped at the deadline by SQL. A rejection loses the segment. */
export function renewOnTimer(rt: Runtime, lease: Lease, leaseTtlMs: number, controller: AbortController, held: LocalHold) {
  let renewing: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    const sentAtMs = performance.now();
    renewing = renewLease(rt.db, lease, leaseTtlMs).then(
      (ok) => {
        if (ok) {
          held.renewed(sentAtMs);
        } else {
          if (!controller.signal.aborted) rt.log?.({ msg: 'lease renewal refused', runId: lease.runId, fence: lease.fence });
          controller.abort('lost' satisfies StepStop);
        }
      },
      () => {}, // a transient failure: the next tick tries again; expiry is the real limit
    );
  }, Math.max(10, Math.floor(leaseTtlMs / 3)));
  // Stopped, with the renewal in flight settled (or a TTL waited for it, on a store that hangs):
  // a lease given up is not renewed after it.
  return async () => {
    clearInterval(timer);
    held.dispose(); // renewals stopped to give the lease up: its end is no longer this segment's to keep
    const settled = new AbortController(); // (and the wait's timer gone with it)
    await Promise.race([renewing.finally(() => settled.abort()), sleep(leaseTtlMs, settled.signal)]);
  };
}
