// Pacing for the background loops (drain, reaper, worker): abortable sleeps and jittered backoff,
// so a fleet that failed together (a Postgres restart) does not retry in lock step.

/** Resolve after `ms`, or at once when one of `signals` aborts (never rejects). */
export function sleep(ms: number, signals?: AbortSignal | readonly (AbortSignal | undefined)[]): Promise<void> {
  const on = (Array.isArray(signals) ? signals : [signals]).filter((s): s is AbortSignal => s !== undefined);
  if (ms <= 0 || on.some((signal) => signal.aborted)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      for (const forget of forgets) forget();
      resolve();
    };
    const timer = setTimeout(done, ms);
    const forgets = on.map((signal) => wakeOnAbort(signal, done));
  });
}

// Each signal gets one listener for its whole life, which wakes the sleepers waiting on it then:
// a worker's stop signal is shared by all its segments, and a store outage puts each of them to
// sleep on it at once. A listener per sleeper made Node warn of a memory leak past ten; a signal
// of their own per sleep (AbortSignal.any) leaks on Node 20, about 55 bytes per call on a signal
// that lives on.
const sleepersOf = new WeakMap<AbortSignal, Set<() => void>>();

/** Call `wake` when `signal` aborts; the function returned forgets it. */
export function wakeOnAbort(signal: AbortSignal, wake: () => void): () => void {
  let sleepers = sleepersOf.get(signal);
  if (!sleepers) {
    const waiting = new Set<() => void>();
    sleepers = waiting;
    sleepersOf.set(signal, waiting);
    signal.addEventListener('abort', () => {
      for (const sleeper of [...waiting]) sleeper();
      waiting.clear();
    }, { once: true });
  }
  sleepers.add(wake);
  return () => sleepers.delete(wake);
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
