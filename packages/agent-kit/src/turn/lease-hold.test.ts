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
  it('is held while renewals land, and ends a TTL after the last one was sent, as lost, saying so once', async () => {
    const controller = new AbortController();
    const lapses: string[] = [];
    const held = holdUntil(0, 2_000, controller, () => lapses.push('lapsed'));
    // Renewed every 100 ms for 3 s: past the first TTL, held all along (only a stall of the
    // event loop near 2 s could lose it here, as it would lose a real lease).
    const untilMs = performance.now() + 3_000;
    while (performance.now() < untilMs) {
      held.renewed(performance.now());
      await sleep(100);
    }
    expect(controller.signal.aborted).toBe(false);
    held.renewed(performance.now() - 10_000); // an older renewal moves nothing back
    expect(await abortedWithin(controller.signal, 10_000)).toBe(true);
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
