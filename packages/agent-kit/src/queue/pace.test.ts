// The pacing sleep: it wakes at the signal's abort, and many sleeps on one long-lived signal (a
// worker's stop, shared by its segments in a store outage) put one listener on it, not one each
// (Node warned of a leak past ten), and no signal of their own (AbortSignal.any leaks on Node 20).
import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { sleep } from './pace.js';

describe('sleep', () => {
  const warnings: string[] = [];
  const onWarning = (warning: Error) => warnings.push(warning.name);
  afterEach(() => {
    process.off('warning', onWarning);
  });

  it('wakes fifty sleepers on one signal at its abort, with no listener warning', async () => {
    process.on('warning', onWarning);
    const stop = new AbortController();
    const startedAt = Date.now();
    const sleepers = Array.from({ length: 50 }, () => sleep(60_000, stop.signal));
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(1);
    setTimeout(() => stop.abort(), 20);
    await Promise.all(sleepers);
    expect(Date.now() - startedAt).toBeLessThan(30_000);
    await new Promise((resolve) => setImmediate(resolve)); // (a warning is emitted on the next tick)
    expect(warnings).toEqual([]);
  });

  it('wakes at the abort of any of several signals, and forgets a sleeper whose time ran out', async () => {
    const segment = new AbortController();
    const worker = new AbortController();
    const sleeping = sleep(60_000, [segment.signal, undefined, worker.signal]);
    setTimeout(() => worker.abort(), 10);
    await sleeping;
    await sleep(5, segment.signal); // times out; the signal's one listener stays, waking no one
    expect(getEventListeners(segment.signal, 'abort')).toHaveLength(1);
    segment.abort(); // (nothing left to wake)
  });

  it('resolves at once for an aborted signal or no time, and after the time without a signal', async () => {
    const stopped = new AbortController();
    stopped.abort();
    await sleep(60_000, stopped.signal);
    await sleep(0);
    const startedAt = Date.now();
    await sleep(20);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(15);
  });
});
