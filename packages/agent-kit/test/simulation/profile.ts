// A schedule's shape, drawn from its seed: timings (token pace, mirror batching, budgets, lease
// TTL with or without renewals), crash budget, how many turns and threads, and how hard the
// faults hit. Small budgets make runs slice; a TTL under the budget turns the renewal timer on.
import { Prng } from './prng.js';

export interface Profile {
  /** Words per scripted reply. */
  tokens: number;
  /** Virtual pause before each streamed token. */
  tokenDelayMs: number;
  mirrorIntervalMs: number;
  /** One segment's budget (config.invocationBudgetMs): small values force slices. */
  invocationBudgetMs: number;
  /** Equal to the budget (no renewal timer) or a third of it (renewed on a timer). */
  leaseTtlMs: number;
  maxRunAttempts: number;
  /** A drain invocation's platform limit. Above 1 s, or the drain takes nothing (its margin). */
  drainBudgetMs: number;
  stallTimeoutMs: number;
  /** The model supports prefill: a cut step continues from its mirrored text, else it is redone. */
  prefill: boolean;
  continueMidStep: boolean;
  turns: number;
  threads: number;
  /** Steps of the faulty phase before the schedule winds down to quiescence. */
  scriptSteps: number;
  /** Multiplier on every fault's weight: some schedules are calm, some are storms. */
  chaos: number;
  /**
   * Workers may be asked to stop (a deploy's SIGTERM). Drawn apart from the rest, so that a seed
   * without stops keeps the schedule it had before the fault existed.
   */
  stops: boolean;
}

export function profileFor(seed: number): Profile {
  const rng = new Prng(seed).fork('profile');
  const tokens = rng.between(3, 10);
  const tokenDelayMs = rng.pick([5, 10, 25, 60]);
  const stepMs = tokens * tokenDelayMs;
  // From "a step barely fits" (slices mid-step) to "a whole turn fits easily".
  const invocationBudgetMs = rng.pick([stepMs, stepMs * 2, stepMs * 4, 60_000]) + rng.between(50, 300);
  const renews = rng.chance(0.35);
  return {
    tokens,
    tokenDelayMs,
    mirrorIntervalMs: rng.pick([0, 10, 40, 150]),
    invocationBudgetMs,
    leaseTtlMs: renews ? Math.max(30, Math.floor(invocationBudgetMs / 3)) : invocationBudgetMs,
    // Zombies and kills each spend an attempt; 1 is legal but ends most runs in salvage.
    maxRunAttempts: rng.pick([1, 2, 3, 3, 4, 5]),
    drainBudgetMs: rng.pick([3_000, 8_000, 30_000, 120_000]),
    stallTimeoutMs: rng.pick([1_000, 5_000, 30_000]),
    prefill: rng.chance(0.8),
    continueMidStep: rng.chance(0.9),
    turns: rng.between(2, 6),
    threads: rng.between(1, 3),
    scriptSteps: rng.between(60, 400),
    chaos: rng.pick([0.3, 1, 1, 2]),
    stops: new Prng(seed).fork('stops').chance(0.5),
  };
}
