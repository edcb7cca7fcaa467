// Pacing for the background loops (drain, reaper, worker): abortable sleeps and jittered backoff,
// so a fleet that failed together (a Postgres restart) does not retry in lock step.

/** Resolve after `ms`, or at once when `signal` aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted || ms <= 0) return Promise.resolve();
  // The listener goes on a signal of its own: a worker's stop signal is shared by all its
  // segments, and a store outage puts each of them to sleep on it at once; more than ten
  // listeners on one signal make Node warn of a memory leak that is not there.
  const own = signal && AbortSignal.any([signal]);
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      own?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    own?.addEventListener('abort', done, { once: true });
  });
}

const backoffBaseMs = 100; // a dropped connection usually comes back within a few hundred ms
const backoffMaxMs = 5_000; // a Postgres restart takes seconds; polling faster only adds load

/**
 * Delay before retry number `failures` (1, 2, …): doubling from `baseMs` (100 ms) up to `maxMs`
 * (5 s), times 0.5–1.
 */
export function backoffMs(
  failures: number, baseMs = backoffBaseMs, maxMs = backoffMaxMs, random: () => number = Math.random,
): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, failures - 1));
  return Math.round(ceiling * (0.5 + random() / 2));
}

/** A signal that never aborts, for callers that pass none. */
export const neverAborted: AbortSignal = new AbortController().signal;
