// The registry of background segments: a start asked while the run's segment is in flight runs
// once that segment ends (the close of the turn before hands a queued turn over while the segment
// its own chat request started is still being refused its claim), once however often it was
// asked, and not after stop().
import { describe, expect, it } from 'vitest';
import type { Runtime, RunSegment, SegmentOutcome } from '../turn/types.js';
import { createSegmentRegistry } from './segments.js';

/** A registry whose segments wait for `release()`, each answering the next of `outcomes`. */
function registry(outcomes: SegmentOutcome[]) {
  const calls: string[] = [];
  const waiting: Array<() => void> = [];
  const runSegment = (async (_rt: Runtime, { runId }: { runId: string }) => {
    calls.push(runId);
    await new Promise<void>((resolve) => waiting.push(resolve));
    return outcomes.shift() ?? { kind: 'not-claimed', reason: 'busy' };
  }) as unknown as RunSegment;
  const rt = { config: { invocationBudgetMs: 60_000 } } as unknown as Runtime;
  const segments = createSegmentRegistry({ rt, loadRunSegment: async () => runSegment });
  /** Let the oldest segment waiting end, once it has started. */
  const release = async () => {
    while (waiting.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    waiting.shift()!();
  };
  return { segments, calls, release };
}

describe('the segment registry', () => {
  it('runs a segment again for a start asked while one was in flight, once however often it was asked', async () => {
    const { segments, calls, release } = registry([{ kind: 'not-claimed', reason: 'busy' }]);
    segments.start('run-2');
    segments.start('run-2'); // the turn before closed meanwhile and hands this one over
    segments.start('run-2');
    expect(segments.active()).toEqual(['run-2']);
    await release();
    await release();
    await segments.settle();
    expect(calls).toEqual(['run-2', 'run-2']);
    expect(segments.active()).toEqual([]);
  });

  it('runs one segment for a start not asked again, and none after stop()', async () => {
    const { segments, calls, release } = registry([]);
    segments.start('run-1');
    await release();
    await segments.settle();
    expect(calls).toEqual(['run-1']);

    segments.start('run-3');
    segments.start('run-3');
    const stopped = segments.stop();
    await release();
    await stopped;
    segments.start('run-3');
    expect(calls).toEqual(['run-1', 'run-3']);
  });
});
