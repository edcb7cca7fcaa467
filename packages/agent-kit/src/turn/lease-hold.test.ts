// The lease's end on the process's own clock (ADR-0105): a renewal that lands moves it on, and
// once the segment has ended nothing moves it or fires it again (a renewal landing after the end
// kept the process up for a TTL, then called a run that closed cleanly lost); and a process
// frozen past its lease finds the signal aborted at its first read, before the timer that aborts
// it has run.
import { describe, expect, it } from 'vitest';
import { checkOnRead, holdUntil } from './lease-hold.js';

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

  it('says lost at the first read after a freeze past its end, before its own timer has run', async () => {
    // A freeze (SIGSTOP, a stalled VM) is the event loop not running: here, a busy wait. The
    // tool's timer, due before the lease's end, runs first once the loop turns again; it used to
    // find the signal not yet aborted and make its outside call with the lease already gone.
    const controller = new AbortController();
    const lapses: string[] = [];
    const held = holdUntil(0, 50, controller, () => lapses.push('lapsed'));
    const toolSignal = checkOnRead(AbortSignal.any([controller.signal, new AbortController().signal]), () => void controller.signal.aborted);
    const seen: boolean[] = [];
    const toolTimer = new Promise<void>((resolve) => setTimeout(() => {
      seen.push(toolSignal.aborted);
      try {
        toolSignal.throwIfAborted();
        seen.push(false);
      } catch {
        seen.push(true);
      }
      resolve();
    }, 20));
    const frozenUntil = performance.now() + 150;
    while (performance.now() < frozenUntil) { /* frozen */ }
    await toolTimer;
    expect(seen).toEqual([true, true]);
    expect(controller.signal.reason).toBe('lost');
    expect(lapses).toEqual(['lapsed']); // said once, though its timer also ran
    await sleep(20);
    expect(lapses).toEqual(['lapsed']);
    held.dispose();
  });

  it('reads as a plain signal while its lease is held, and after the segment ended', async () => {
    const controller = new AbortController();
    const held = holdUntil(0, 60_000, controller);
    expect(controller.signal.aborted).toBe(false);
    expect(() => controller.signal.throwIfAborted()).not.toThrow();
    held.dispose();
    controller.abort('done');
    expect(controller.signal.aborted).toBe(true);
    expect(() => controller.signal.throwIfAborted()).toThrow();
  });
});
