// How big each measurement is, per store: the full run (under 10 minutes on a 2-core machine)
// and the smoke run (about 40 s for both stores, CI), in one place so the runs differ only in
// numbers, never in code paths.
import type { FirstTokenOptions } from './first-token.js';
import type { OtherViewerOptions } from './other-viewer.js';
import type { LeaseBenchOptions } from './lease-statements.js';
import type { ReplayOptions } from './replay.js';
import type { ScaleOptions } from './scale.js';
import type { ScriptedTurnOptions } from './scripted-turn.js';
import type { MirrorOptions } from './stream-mirror.js';
import type { TakeoverOptions } from './takeover.js';
import type { ThroughputOptions } from './throughput.js';

export interface Sizes {
  /** Connections in agent-kit's pool: the concurrency plus room for the bench's own reads. */
  poolMax: number;
  lease: LeaseBenchOptions;
  scale: ScaleOptions;
  orchestration: ThroughputOptions;
  scriptedTurn: ScriptedTurnOptions;
  takeover: TakeoverOptions;
  mirror: MirrorOptions;
  firstToken: FirstTokenOptions;
  otherViewer: OtherViewerOptions;
  replay: ReplayOptions;
}

const concurrency = 8; // the "8 concurrent clients", used for every comparison

const full: Sizes = {
  poolMax: 20,
  lease: { concurrency, sliceMs: 600, rounds: 5, warmupRounds: 1, seedRuns: 30_000, leasesPerCaller: 100 },
  scale: { concurrency, depths: [1_000, 10_000, 100_000], sliceMs: 1_000, rounds: 4, warmupMs: 300, staleBurst: 5_000,
    longThread: { turns: 10_000, threads: 6_000, sliceMs: 600, rounds: 4 } },
  orchestration: { concurrency, jobs: 20_000, timeBoxMs: 20_000, slowTimeBoxMs: 5_000, rounds: 2 },
  scriptedTurn: { concurrency, jobs: 2_000, timeBoxMs: 20_000, replyTokens: 12 },
  takeover: { kills: 60, leaseTtlMs: 1_000, spacingMs: 50, concurrency },
  mirror: { tokens: 10_000, tokensPerSecond: 2_000, many: [100, 1_000], manyTokens: 100, manyTokensPerSecond: 50 },
  firstToken: { requests: 25, warmups: 3, modelFirstTokenMs: 200, fastModelFirstTokenMs: 30, replyTokens: 2 },
  otherViewer: { durationMs: 6_000, intervalMs: 100, joinAfterMs: 1_000 },
  replay: { events: 10_000, repeats: 3 },
};

const smoke: Sizes = {
  poolMax: 20,
  lease: { concurrency, sliceMs: 100, rounds: 1, warmupRounds: 1, seedRuns: 800, leasesPerCaller: 4 },
  scale: { concurrency, depths: [100, 300], sliceMs: 100, rounds: 2, warmupMs: 50, staleBurst: 200,
    longThread: { turns: 300, threads: 400, sliceMs: 100, rounds: 1 } },
  orchestration: { concurrency, jobs: 200, timeBoxMs: 10_000, slowTimeBoxMs: 500, rounds: 1 },
  scriptedTurn: { concurrency, jobs: 50, timeBoxMs: 10_000, replyTokens: 12 },
  takeover: { kills: 5, leaseTtlMs: 300, spacingMs: 20, concurrency },
  mirror: { tokens: 400, tokensPerSecond: 2_000, many: [20], manyTokens: 20, manyTokensPerSecond: 100 },
  // The model's own waits are most of a smoke run's time: shorter here, the same code path.
  firstToken: { requests: 3, warmups: 1, modelFirstTokenMs: 40, fastModelFirstTokenMs: 10, replyTokens: 3 },
  otherViewer: { durationMs: 800, intervalMs: 100, joinAfterMs: 300 },
  replay: { events: 1_000, repeats: 1 },
};

/** The embedded store: one process, one connection; smaller where PGlite is slow to seed. */
const embeddedFull: Sizes = {
  ...full,
  lease: { ...full.lease, rounds: 3, seedRuns: 8_000, leasesPerCaller: 50 },
  scale: { ...full.scale, sliceMs: 700, rounds: 3 },
  orchestration: { ...full.orchestration, jobs: 5_000, rounds: 1 },
  scriptedTurn: { ...full.scriptedTurn, jobs: 1_000 },
  takeover: { ...full.takeover, kills: 50 },
  mirror: { ...full.mirror, many: [100, 1_000] },
};

export function sizesFor(smokeRun: boolean, store: 'postgres' | 'embedded' = 'postgres'): Sizes {
  if (smokeRun) return smoke;
  return store === 'embedded' ? embeddedFull : full;
}
