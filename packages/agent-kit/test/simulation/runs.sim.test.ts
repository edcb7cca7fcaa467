// The deterministic simulation in CI: a budget of seeded schedules of the whole protocol — claims,
// renewals, mirror writes, effects, parks, answers, slices, closes, reaps and drains by several
// workers, with kills, pauses past the lease, dropped connections, failing and hanging tools and
// providers, duplicated crons — on the real SQL, with the invariants checked after every step.
// A failing seed prints `SEED=<n> npm run test:sim`, which replays it exactly and prints its log.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { openTestDb } from '../harness/test-db.js';
import { applyMutation, mutationNamed, mutations } from './mutations.js';
import { runSchedule, type ScheduleResult } from './simulation.js';

const replaySeed = process.env.SEED === undefined ? undefined : Number(process.env.SEED);
const budget = Number(process.env.SIM_SCHEDULES ?? 30);
const firstSeed = Number(process.env.SIM_FIRST_SEED ?? 1);
const perScheduleMs = 8_000; // a schedule takes ~0.5–3 s on PGlite; this is the test's ceiling

function failureReport(result: ScheduleResult): string {
  return [
    `SEED=${result.seed} npm run test:sim   # replays this schedule exactly`,
    ...result.violations.slice(0, 5).map((v) => `  ${v.kind}: ${v.detail.slice(0, 500)}`),
    '  last steps:',
    ...result.tail.slice(-30).map((line) => `    ${line}`),
  ].join('\n');
}

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db?.close();
});

describe.runIf(replaySeed !== undefined)('replay', () => {
  it(`replays SEED=${replaySeed} step by step`, async () => {
    const result = await runSchedule(replaySeed!, db, { echo: (line) => console.log(line) });
    if (!result.ok) console.log(failureReport(result));
    for (const known of result.known) console.log(`known issue (reported): ${known.kind}: ${known.detail}`);
    expect(result.violations).toEqual([]);
  }, 120_000);
});

describe.runIf(replaySeed === undefined)('deterministic simulation', () => {
  it(`keeps every invariant over ${budget} seeded schedules (seeds ${firstSeed}..${firstSeed + budget - 1})`, async () => {
    const failures: ScheduleResult[] = [];
    const totals = { steps: 0, faults: 0, completed: 0, runs: 0, known: [] as string[] };
    for (let seed = firstSeed; seed < firstSeed + budget; seed++) {
      const result = await runSchedule(seed, db);
      totals.steps += result.steps;
      totals.faults += Object.values(result.faults).reduce((a, b) => a + b, 0);
      totals.runs += Object.values(result.runs).reduce((a, b) => a + b, 0);
      totals.completed += result.runs.completed ?? 0;
      if (!result.ok) failures.push(result);
      totals.known.push(...result.known.map((k) => `SEED=${seed} ${k.kind}: ${k.detail}`));
    }
    console.log(`simulation: ${budget} schedules, ${totals.steps} steps, ${totals.faults} faults, ` +
      `${totals.runs} runs (${totals.completed} completed), ${failures.length} failed`);
    for (const failure of failures) console.log(failureReport(failure));
    if (totals.known.length) console.log(`known issues seen (reported, not failures):\n  ${totals.known.join('\n  ')}`);
    expect(failures.map((f) => `SEED=${f.seed}: ${f.violations[0]?.kind}`)).toEqual([]);
    // The schedules must exercise the protocol, not idle: most turns reach an end with work done.
    expect(totals.steps).toBeGreaterThan(budget * 100);
    expect(totals.completed).toBeGreaterThan(0);
  }, budget * perScheduleMs);

  // The reused database has seen other schedules and is then vacuumed and analyzed, as autovacuum
  // or the embedded store's maintenance pass may do at any moment: a plan that changes with the
  // statistics must not change a schedule. Seed 6 (of the default seeds) retries a refused model
  // step, whose backoff is jittered (Math.random, seeded in a worker).
  it('replays a seed exactly: the same step log on a fresh database as on a used, analyzed one', async () => {
    for (const seed of [firstSeed + 3, firstSeed + 5]) {
      await db.exec('vacuum analyze');
      const reused = await runSchedule(seed, db);
      const fresh = await openTestDb();
      try {
        const again = await runSchedule(seed, fresh);
        expect(again.digest, `seed ${seed}`).toBe(reused.digest);
        expect(again.tail).toEqual(reused.tail);
        expect(reused.steps).toBeGreaterThan(50);
      } finally {
        await fresh.close();
      }
    }
  }, 90_000);

  // Each planted bug (one guard removed from one SQL function) must be exposed by some seed.
  it.each(mutations.map((m) => [m.seeds ?? 20, m.name, m.description] as const))(
    'finds a planted bug within %i seeds: %s (%s)',
    async (seeds, name) => {
      const mutated = await openTestDb();
      try {
        await applyMutation(mutated, mutationNamed(name));
        let found: ScheduleResult | undefined;
        for (let seed = 1; seed <= seeds && !found; seed++) {
          const result = await runSchedule(seed, mutated);
          if (!result.ok) found = result;
        }
        expect(found, `no seed in 1..${seeds} exposed ${name}`).toBeDefined();
        console.log(`planted bug ${name}: found by seed ${found!.seed}: ${found!.violations[0]!.kind}`);
      } finally {
        await mutated.close();
      }
    },
    60 * perScheduleMs,
  );
});
