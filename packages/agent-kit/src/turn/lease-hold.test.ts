// The lease's end on the process's own clock (ADR-0105): a renewal that lands moves it on, and
// once the segment has ended nothing moves it or fires it again (a renewal landing after the end
// kept the process up for a TTL, then called a run that closed cleanly lost).
import { describe, expect, it } from 'vitest';
import { holdUntil } from './lease-hold.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function abortedWithin(signal: AbortSignal, ms: number): Promise<boolean> {
  const startedMs = performance.now();
  while (!signal.aborted && performance.now() - startedMs < ms) await sleep(10);
  return signal.aborted;
}

describe('a lease held on the local clock', () => {
  it('ends a TTL after the last renewal that landed was sent, as lost, saying so once', async () => {
    const controller = new AbortController();
    const lapses: string[] = [];
    const held = holdUntil(0, 300, controller, () => lapses.push('lapsed'));
    await sleep(200);
    held.renewed(performance.now()); // now ends 300 ms from here, not 100
    await sleep(150);
    expect(controller.signal.aborted).toBe(false); // a timer never fires early
    held.renewed(performance.now() - 1_000); // an older renewal moves nothing back
    expect(await abortedWithin(controller.signal, 5_000)).toBe(true);
    expect(controller.signal.reason).toBe('lost');
    expect(lapses).toEqual(['lapsed']);
    held.dispose();
  });

  it('starts no timer for a renewal that lands after the segment ended', async () => {
    const controller = new AbortController();
    const lapses: string[] = [];
    const held = holdUntil(0, 50, controller, () => lapses.push('lapsed'));
    held.dispose();
    held.renewed(performance.now());
    await sleep(300);
    expect(controller.signal.aborted).toBe(false);
    expect(lapses).toEqual([]);
  });

  it('counts the time since the claim was sent, and never a clock stepped back as time to spare', async () => {
    const spent = new AbortController();
    holdUntil(10_000, 300, spent); // the claim was sent longer ago than the TTL: already over
    expect(await abortedWithin(spent.signal, 5_000)).toBe(true);
    const stepped = new AbortController();
    const held = holdUntil(-60_000, 300, stepped); // a wall clock stepped back a minute
    expect(await abortedWithin(stepped.signal, 5_000)).toBe(true);
    held.dispose();
  });
});
