// A CI-sized load run on both stores: 200 viewers over 20 runs of the real engine through one
// node:http server on loopback, then one thread of 1,000 and one of 10,000 events with 50
// viewers each. Every viewer gets every event of its thread exactly once, in order, up to its
// run-closed; server heap per viewer stays under 200 KB and does not grow with the event count.
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { onPostgres, openTestDb } from '../harness/test-db.js';
import {
  openLoadServer, runFloodPhase, runViewersPhase, type LoadServer, type PhaseReport,
} from './load-kit.js';
import { formatLoadReport, loadFigures } from './load-report.js';

let db: Db;
let server: LoadServer;
const phases: PhaseReport[] = [];
const deadlineMs = 60_000;

beforeAll(async () => {
  db = await openTestDb({ poolMax: 10 });
  server = await openLoadServer(db, { tokens: 60, delayMs: 10 });
  // Warm up: load the engine and the viewer process once, outside the measured phases.
  await runViewersPhase(server, { runs: 2, viewers: 4, spreadMs: 50, deadlineMs });
}, 120_000);
afterAll(async () => {
  if (phases.length === 4) {
    const [a, b, c, d] = phases as [PhaseReport, PhaseReport, PhaseReport, PhaseReport];
    console.log(`load (${onPostgres ? 'postgres' : 'pglite'}):\n${formatLoadReport(phases, loadFigures(a, b, c, d))}`);
  }
  await server?.close();
  await db?.close();
});

it('200 viewers over 20 runs each see every event of their thread exactly once, in order, to run-closed', async () => {
  const runsOnly = await runViewersPhase(server, { runs: 20, viewers: 0, spreadMs: 0, deadlineMs });
  const watched = await runViewersPhase(server, { runs: 20, viewers: 200, spreadMs: 400, deadlineMs });
  phases.push(runsOnly, watched);
  expect(watched.failures).toEqual([]);
  expect(watched.delivered).toBe(watched.logged * 10); // 10 viewers per thread, all of each log
  const figures = loadFigures(runsOnly, watched, runsOnly, runsOnly);
  // The viewers' share of the peak (the runs-only growth taken off) is what a viewer costs.
  expect(figures.perViewerBytes).toBeLessThan(200 * 1024);
}, 180_000);

it('50 viewers of a 10,000-event thread get all of it, and the server heap peak does not scale with events', async () => {
  const small = await runFloodPhase(server, { events: 1_000, viewers: 50, batch: 100, deadlineMs });
  const large = await runFloodPhase(server, { events: 10_000, viewers: 50, batch: 100, deadlineMs });
  phases.push(small, large);
  expect(small.failures).toEqual([]);
  expect(large.failures).toEqual([]);
  expect(large.delivered).toBe(50 * 10_000);
  // Ten times the events: the peak wobbles with GC timing, but must not grow tenfold; and what
  // the server keeps per connected viewer (after GC) stays far under the per-viewer bound.
  const figures = loadFigures(small, small, small, large);
  expect(figures.floodBounded).toBe(true);
  expect(figures.liveBytesPerViewer[1]).toBeLessThan(200 * 1024);
}, 180_000);

