// The load figures: bytes of server heap per run and per viewer (from the phase peaks over the
// phase baselines), how the peak moves from 1k to 10k events, and a table for docs/guides/load.md.
import type { PhaseReport } from './load-kit.js';

export interface LoadFigures {
  /** Heap peak over baseline in the runs-only phase, per run. */
  perRunBytes: number;
  /** Heap peak over baseline with viewers, less the runs-only growth, per viewer. */
  perViewerBytes: number;
  /** Upper bound: all of the viewers phase's growth charged to its viewers. */
  perViewerUpperBytes: number;
  /** Heap peak growth of the 10k-event flood over the 1k-event flood (1 = flat). */
  floodGrowthRatio: number;
  /**
   * Ten times the events, under five times the peak growth (of at least 8 MB, GC noise): a
   * server that held every event per viewer would grow tenfold.
   */
  floodBounded: boolean;
  /** Heap kept (after GC) per connected flood viewer, at 1k and at 10k events. */
  liveBytesPerViewer: [number, number];
}

const growth = (p: PhaseReport) => Math.max(0, p.memory.peakHeap - p.memory.baseHeap);

export function loadFigures(
  runsOnly: PhaseReport, withViewers: PhaseReport, flood1k: PhaseReport, flood10k: PhaseReport,
): LoadFigures {
  return {
    perRunBytes: Math.round(growth(runsOnly) / runsOnly.runs),
    perViewerBytes: Math.round(Math.max(0, growth(withViewers) - growth(runsOnly)) / withViewers.viewers),
    perViewerUpperBytes: Math.round(growth(withViewers) / withViewers.viewers),
    floodGrowthRatio: growth(flood10k) / Math.max(growth(flood1k), 1),
    floodBounded: growth(flood10k) < 5 * Math.max(growth(flood1k), 8 * 1024 * 1024),
    liveBytesPerViewer: [flood1k, flood10k].map((p) =>
      Math.round(Math.max(0, (p.memory.liveHeap ?? p.memory.baseHeap) - p.memory.baseHeap) / p.viewers)) as [number, number],
  };
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;

/** A Markdown table of the phases and the derived figures. */
export function formatLoadReport(phases: PhaseReport[], figures: LoadFigures): string {
  const header = '| phase | runs | viewers | events delivered | events logged | time | heap base → peak → after (GC) | rss peak | failures |';
  const rule = '|---|---:|---:|---:|---:|---:|---|---:|---:|';
  const rows = phases.map((p) => `| ${p.name} | ${p.runs} | ${p.viewers} | ${p.delivered} | ${p.logged} | ` +
    `${(p.durationMs / 1000).toFixed(1)} s | ${mb(p.memory.baseHeap)} → ${mb(p.memory.peakHeap)} → ` +
    `${mb(p.memory.afterHeap)} | ${mb(p.memory.peakRss)} | ${p.failures.length} |`);
  return [header, rule, ...rows, '',
    `per run: ${kb(figures.perRunBytes)} heap · per viewer: ${kb(figures.perViewerBytes)} heap ` +
    `(upper bound ${kb(figures.perViewerUpperBytes)}) · 10k-event peak / 1k-event peak: ` +
    `${figures.floodGrowthRatio.toFixed(2)}× · kept per connected viewer (after GC) at 1k / 10k events: ` +
    `${kb(figures.liveBytesPerViewer[0])} / ${kb(figures.liveBytesPerViewer[1])} · 'close' listeners on ` +
    `one response at 1k / 10k events: ${phases.filter((p) => p.closeListeners !== undefined)
      .map((p) => p.closeListeners).join(' / ')}`].join('\n');
}
