// `npm run sim -- --schedules N [--seed S]`: run N seeded schedules (seeds S, S+1, …) of the
// deterministic simulation and print a summary: schedules, steps, faults by kind, violations.
// Each failing seed is printed with the command that replays it. With --mutation NAME, a planted
// protocol bug is applied first and the run reports how soon the simulator finds it.
import { parseArgs } from 'node:util';
import type { Db } from '../../src/store/db.js';
import { applyMutation, mutationNamed, mutations } from './mutations.js';
import { runSchedule, type ScheduleResult } from './simulation.js';

const usage = `usage: npm run sim -- [--schedules N] [--seed S] [--minutes M] [--verbose] [--fresh]
                      [--mutation NAME] [--json FILE] [--stop-on-failure]
  --schedules N      how many schedules (default 100)
  --seed S           first seed (default 1); seeds S..S+N-1 run in order
  --minutes M        stop starting new schedules after M minutes
  --verbose          print every step of every schedule
  --fresh            a new database per schedule (default: one, emptied between schedules)
  --mutation NAME    plant a protocol bug first (${mutations.map((m) => m.name).join(', ')})
  --json FILE        also write the summary as JSON
  --stop-on-failure  stop at the first failing seed`;

interface Summary {
  schedules: number;
  passed: number;
  failedSeeds: number[];
  firstSeed: number;
  steps: number;
  runs: Record<string, number>;
  faults: Record<string, number>;
  violations: Record<string, number>;
  /** Findings of known, reported issues, by kind, with the first seeds that showed them. */
  known: Record<string, number>;
  knownSeeds: number[];
  wallMs: number;
  virtualMs: number;
  mutation?: string;
}

function add(into: Record<string, number>, from: Record<string, number>) {
  for (const [key, value] of Object.entries(from)) into[key] = (into[key] ?? 0) + value;
}

function reportFailure(result: ScheduleResult, mutation: string | undefined) {
  const replay = mutation ? `npm run sim -- --seed ${result.seed} --schedules 1 --verbose --mutation ${mutation}`
    : `SEED=${result.seed} npm run test:sim`;
  console.log(`\nSEED=${result.seed} failed: ${result.violations.length} violation(s). Replay: ${replay}`);
  for (const v of result.violations.slice(0, 5)) console.log(`  ${v.kind}: ${v.detail.slice(0, 400)}`);
  console.log(`  last steps:\n    ${result.tail.slice(-25).join('\n    ')}`);
}

async function main() {
  const { values } = parseArgs({
    options: {
      schedules: { type: 'string', default: '100' }, seed: { type: 'string', default: '1' },
      minutes: { type: 'string' }, verbose: { type: 'boolean', default: false }, fresh: { type: 'boolean', default: false },
      mutation: { type: 'string' }, json: { type: 'string' }, 'stop-on-failure': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return console.log(usage);
  const count = Number(values.schedules);
  const firstSeed = Number(values.seed);
  if (!Number.isInteger(count) || count < 1 || !Number.isSafeInteger(firstSeed)) throw new Error(usage);
  const deadlineMs = values.minutes ? Date.now() + Number(values.minutes) * 60_000 : Infinity;
  const mutation = values.mutation ? mutationNamed(values.mutation) : undefined;
  const summary: Summary = {
    schedules: 0, passed: 0, failedSeeds: [], firstSeed, steps: 0, runs: {}, faults: {}, violations: {},
    known: {}, knownSeeds: [], wallMs: 0, virtualMs: 0, mutation: mutation?.name,
  };
  const startedMs = Date.now();
  // On Postgres (DATABASE_URL) test databases are cloned from a template that vitest's global
  // setup makes; outside vitest, make it here (and drop everything at the end).
  process.env.AGENT_KIT_TEST_RUN ??= `sim${process.pid}`;
  const { openTestDb } = await import('../harness/test-db.js');
  const teardown = process.env.DATABASE_URL ? await (await import('../harness/global-setup.js')).default() : undefined;
  const open = async () => {
    const db = await openTestDb();
    if (mutation) await applyMutation(db, mutation);
    return db;
  };
  let db: Db = await open();
  try {
    for (let seed = firstSeed; seed < firstSeed + count && Date.now() < deadlineMs; seed++) {
      if (values.fresh && seed !== firstSeed) {
        await db.close();
        db = await open();
      }
      const result = await runSchedule(seed, db, { echo: values.verbose ? (line) => console.log(line) : undefined });
      summary.schedules++;
      summary.steps += result.steps;
      summary.virtualMs += result.virtualMs;
      add(summary.runs, result.runs);
      add(summary.faults, result.faults);
      for (const v of result.violations) add(summary.violations, { [v.kind]: 1 });
      for (const v of result.known) add(summary.known, { [v.kind]: 1 });
      if (result.known.length) summary.knownSeeds.push(seed);
      if (result.ok) summary.passed++;
      else {
        summary.failedSeeds.push(seed);
        reportFailure(result, mutation?.name);
        if (values['stop-on-failure']) break;
      }
      if (summary.schedules % 25 === 0) {
        console.log(`… ${summary.schedules} schedules, ${summary.passed} passed, ${Math.round((Date.now() - startedMs) / 1000)} s`);
      }
    }
  } finally {
    await db.close();
    await teardown?.();
  }
  summary.wallMs = Date.now() - startedMs;
  printSummary(summary);
  if (values.json) (await import('node:fs')).writeFileSync(values.json, `${JSON.stringify(summary, null, 2)}\n`);
  process.exitCode = summary.failedSeeds.length > 0 && !mutation ? 1 : 0;
}

function printSummary(s: Summary) {
  const line = (table: Record<string, number>) =>
    Object.entries(table).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
  const faults = Object.values(s.faults).reduce((a, b) => a + b, 0);
  const violations = Object.values(s.violations).reduce((a, b) => a + b, 0);
  console.log(`\nsimulation${s.mutation ? ` with planted bug "${s.mutation}"` : ''}: seeds ${s.firstSeed}..${s.firstSeed + s.schedules - 1}`);
  console.log(`  schedules  ${s.schedules} (${s.passed} passed, ${s.failedSeeds.length} failed${s.failedSeeds.length ? `: ${s.failedSeeds.slice(0, 20).join(', ')}` : ''})`);
  console.log(`  steps      ${s.steps}`);
  console.log(`  runs       ${line(s.runs)}`);
  console.log(`  faults     ${faults}: ${line(s.faults)}`);
  console.log(`  violations ${violations}${violations ? `: ${line(s.violations)}` : ''}`);
  if (Object.keys(s.known).length) {
    console.log(`  known      ${line(s.known)} (reported issues; seeds ${s.knownSeeds.slice(0, 10).join(', ')})`);
  }
  console.log(`  time       ${(s.wallMs / 1000).toFixed(1)} s wall, ${(s.virtualMs / 3_600_000).toFixed(1)} h simulated`);
}

await main();
