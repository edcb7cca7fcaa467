// How far the drain claims ahead of its free slots (ADR-0024): a pure sizing rule and the moving
// averages of segment and claim times it is fed with.

/** Segments averaging this long or longer are not claimed ahead. */
const aheadSegmentMs = 200;

/**
 * How many runs to claim ahead of a free slot. Claiming only for free slots leaves each slot idle
 * for a claim's round trip, and claims then come one or two at a time; with short segments that
 * round trip is a large part of a segment. A run claimed ahead holds its lease while it waits for
 * a slot (another drain cannot run it), so the drain claims ahead only while its segments are
 * short (they average under 200 ms, and under a tenth of the lease TTL), and then only what the
 * slots use up during one claim: concurrency × claim time / segment time, rounded up (Little's
 * law), at most `concurrency`. A run then waits for its slot about one claim's time.
 */
export class ClaimPace {
  private segmentMs = Number.NaN;
  private claimMs = Number.NaN;
  private readonly shortMs: number;

  constructor(leaseTtlMs: number) {
    this.shortMs = Math.min(aheadSegmentMs, leaseTtlMs / 10);
  }

  segmentTook(ms: number) {
    this.segmentMs = movingAverage(this.segmentMs, ms);
  }

  claimTook(ms: number) {
    this.claimMs = movingAverage(this.claimMs, ms);
  }

  ahead(concurrency: number): number {
    return claimsAhead(concurrency, this.segmentMs, this.claimMs, this.shortMs);
  }
}

/**
 * Runs to keep claimed ahead: none unless segments average under `shortMs` (NaN: none finished
 * yet), else what `concurrency` slots use up in one claim's time, at most `concurrency`.
 */
export function claimsAhead(concurrency: number, segmentMs: number, claimMs: number, shortMs: number): number {
  if (!(segmentMs < shortMs) || !(claimMs >= 0)) return 0;
  return Math.min(concurrency, Math.ceil((concurrency * claimMs) / Math.max(1, segmentMs)));
}

/** Each new sample weighs a fifth; the first one is the average. */
function movingAverage(average: number, sample: number): number {
  return Number.isNaN(average) ? sample : average * 0.8 + sample * 0.2;
}

