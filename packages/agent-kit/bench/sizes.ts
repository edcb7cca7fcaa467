// How big each measurement is: the full run (under 10 minutes on a 2-core machine) and the smoke
// run (about 30 s, CI), in one place so the two differ only in numbers, never in code paths.
import type { LeaseBenchOptions } from './lease-statements.js';
import type { ScaleOptions } from './scale.js';
import type { ThroughputOptions } from './throughput.js';

export interface Sizes {
  /** Connections in agent-kit's pool: the concurrency plus room for the bench's own reads. */
  poolMax: number;
  lease: LeaseBenchOptions;
  scale: ScaleOptions;
  orchestration: ThroughputOptions;
}

const concurrency = 8; // the "8 concurrent clients", used for every comparison

export function sizesFor(smoke: boolean): Sizes {
  if (smoke) {
    return {
      poolMax: concurrency + 2,
      lease: { concurrency, sliceMs: 150, rounds: 2, warmupRounds: 1, seedRuns: 3_000, leasesPerCaller: 10 },
      scale: { concurrency, depths: [100, 300], durationMs: 300, warmupMs: 100 },
      orchestration: { concurrency, jobs: 300, timeBoxMs: 10_000, slowTimeBoxMs: 500, rounds: 1 },
    };
  }
  return {
    poolMax: concurrency + 2,
    lease: { concurrency, sliceMs: 800, rounds: 5, warmupRounds: 1, seedRuns: 45_000, leasesPerCaller: 100 },
    scale: { concurrency, depths: [1_000, 10_000, 100_000], durationMs: 3_000, warmupMs: 500 },
    orchestration: { concurrency, jobs: 20_000, timeBoxMs: 60_000, slowTimeBoxMs: 5_000, rounds: 2 },
  };
}
