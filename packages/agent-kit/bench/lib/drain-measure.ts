// Drain-to-completion timing shared by agent-kit and its peers: the workers are already running
// and idle, all jobs appear at once in one committed transaction, and the clock stops when the
// database shows none left. A time box bounds the slow configurations (pg-boss with batch 1):
// then the rate is the jobs completed within it.
import { sleep } from './measure.js';

export interface DrainMeasureOptions {
  /** Insert all jobs in one transaction; resolves after the commit. */
  enqueue: () => Promise<void>;
  /** True when no job is left unfinished (committed). */
  isDrained: () => Promise<boolean>;
  /** Jobs finished so far (committed); used when the time box ends first. */
  countDone: () => Promise<number>;
  total: number;
  timeBoxMs: number;
  /** How often to look; small against the drain time, cheap queries only. */
  pollMs?: number;
}

export interface DrainResult {
  done: number;
  elapsedMs: number;
  perSecond: number;
  /** False when the time box ended before the queue was empty. */
  drained: boolean;
}

/** Time a drain from the commit of the jobs to the moment the database shows them all done. */
export async function measureDrain(o: DrainMeasureOptions): Promise<DrainResult> {
  await o.enqueue();
  const startAt = performance.now();
  const endAt = startAt + o.timeBoxMs;
  const pollMs = o.pollMs ?? 10;
  while (performance.now() < endAt) {
    if (await o.isDrained()) {
      const elapsedMs = performance.now() - startAt;
      return { done: o.total, elapsedMs, perSecond: (o.total * 1000) / elapsedMs, drained: true };
    }
    await sleep(pollMs);
  }
  const done = await o.countDone();
  const elapsedMs = performance.now() - startAt;
  return { done, elapsedMs, perSecond: (done * 1000) / elapsedMs, drained: false };
}
