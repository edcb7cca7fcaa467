// Timing primitives for the benchmark: closed-loop throughput at a fixed concurrency for a fixed
// time (after a warm-up that is not counted), and percentiles. Every number the bench prints comes
// from these, so agent-kit and its baselines are measured by the same loop.

export interface ThroughputOptions {
  /** Concurrent callers: each awaits its operation before starting the next (a closed loop). */
  concurrency: number;
  /** Measured window. */
  durationMs: number;
  /** Run before the window and not counted: fills caches, opens connections, plans statements. */
  warmupMs: number;
  /**
   * One operation by caller `worker`. Returns false when its input is used up (e.g. no queued run
   * left to claim): that caller stops, and the rate is taken over the time actually measured.
   */
  op: (worker: number) => Promise<boolean | void>;
}

export interface Throughput {
  ops: number;
  elapsedMs: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Each counted operation's latency (kept to combine slices). */
  latenciesMs: number[];
}

/** Run `op` in a closed loop from `concurrency` callers; count what completes in the window. */
export async function measureThroughput(options: ThroughputOptions): Promise<Throughput> {
  const { concurrency, durationMs, warmupMs, op } = options;
  const startAt = performance.now();
  const windowStartAt = startAt + warmupMs;
  const windowEndAt = windowStartAt + durationMs;
  const latenciesMs: number[] = [];
  let lastEndAt = windowStartAt;
  const loop = async (worker: number) => {
    while (true) {
      const before = performance.now();
      if (before >= windowEndAt) return;
      const more = await op(worker);
      const after = performance.now();
      if (before >= windowStartAt && after <= windowEndAt) {
        latenciesMs.push(after - before);
        lastEndAt = Math.max(lastEndAt, after);
      }
      if (more === false) return;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, worker) => loop(worker)));
  // Callers that ran out of input end the window early; measure up to the last counted op.
  const elapsedMs = Math.max(1, Math.min(windowEndAt, lastEndAt) - windowStartAt);
  return {
    ops: latenciesMs.length,
    elapsedMs,
    perSecond: (latenciesMs.length * 1000) / elapsedMs,
    p50Ms: percentile(latenciesMs, 0.5),
    p99Ms: percentile(latenciesMs, 0.99),
    latenciesMs,
  };
}

export interface InterleavedOptions {
  concurrency: number;
  /** One slice of one operation. */
  sliceMs: number;
  /** Counted rounds; each runs every operation for one slice, in order. */
  rounds: number;
  /** Rounds run first and not counted. */
  warmupRounds: number;
}

/**
 * Measure several operations in alternating slices (A B C A B C …) and add up each one's slices.
 * Other load on the machine then falls on all of them alike, so their ratios stay meaningful
 * on a shared or noisy machine where back-to-back runs drift by tens of percent.
 */
export async function measureInterleaved<K extends string>(
  ops: Record<K, (worker: number) => Promise<boolean | void>>, o: InterleavedOptions,
): Promise<Record<K, Throughput>> {
  const names = Object.keys(ops) as K[];
  const slices = new Map<K, Throughput[]>(names.map((name) => [name, []]));
  for (let round = 0; round < o.warmupRounds + o.rounds; round++) {
    for (const name of names) {
      const t = await measureThroughput({ concurrency: o.concurrency, durationMs: o.sliceMs, warmupMs: 0, op: ops[name] });
      if (round >= o.warmupRounds) slices.get(name)!.push(t);
    }
  }
  const result = {} as Record<K, Throughput>;
  for (const name of names) result[name] = combine(slices.get(name)!);
  return result;
}

/** Add up slices of one operation. */
export function combine(slices: readonly Throughput[]): Throughput {
  const ops = slices.reduce((sum, t) => sum + t.ops, 0);
  const elapsedMs = Math.max(1, slices.reduce((sum, t) => sum + t.elapsedMs, 0));
  const latenciesMs = slices.flatMap((t) => t.latenciesMs);
  return {
    ops, elapsedMs, perSecond: (ops * 1000) / elapsedMs,
    p50Ms: percentile(latenciesMs, 0.5), p99Ms: percentile(latenciesMs, 0.99), latenciesMs,
  };
}

/** The q-quantile (0..1) of `values` by nearest rank; NaN for an empty list. */
export function percentile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank]!;
}

/** Wall time of `fn` in milliseconds, with its result. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const startAt = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - startAt };
}

/** Resolve after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Poll `check` every `everyMs` until it returns true or `timeoutMs` passes; false on timeout. */
export async function waitFor(check: () => Promise<boolean>, timeoutMs: number, everyMs = 20): Promise<boolean> {
  const endAt = performance.now() + timeoutMs;
  while (performance.now() < endAt) {
    if (await check()) return true;
    await sleep(everyMs);
  }
  return check();
}
