// `npm run bench`: every measurement in one run on one fresh database, a table on stdout and
// JSON under bench/results/. `--smoke` runs the same code with tiny sizes (CI: it still runs).
// Not a test: targets are reported, never enforced by the exit code.
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Db } from '../src/store/db.js';
import { benchFirstToken } from './first-token.js';
import { benchOtherViewer } from './other-viewer.js';
import { benchLeaseStatements } from './lease-statements.js';
import { createEmbeddedBench, createPostgresBench, type BenchDatabase } from './lib/bench-db.js';
import { formatTable, judge, machineInfo, writeReport, type Report, type Row } from './lib/report.js';
import { benchReplay } from './replay.js';
import { benchScale } from './scale.js';
import { benchScriptedTurn, drainScriptedTurns } from './scripted-turn.js';
import { sizesFor, type Sizes } from './sizes.js';
import { benchStreamMirror } from './stream-mirror.js';
import { benchTakeover } from './takeover.js';
import { benchOrchestration } from './throughput.js';
import { drainWithWorker, nullTurn } from './orchestration.js';

const resultsDir = fileURLToPath(new URL('./results/', import.meta.url));
const sectionNames = ['lease', 'orchestration', 'turn', 'takeover', 'mirror', 'first-token', 'replay', 'scale'] as const;

interface Args {
  smoke: boolean;
  only?: Set<string>;
  stores: Set<'postgres' | 'embedded'>;
  write: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { smoke: false, write: true, stores: new Set(['postgres', 'embedded']) };
  for (const arg of argv) {
    if (arg === '--smoke') args.smoke = true;
    else if (arg === '--no-write') args.write = false;
    else if (arg.startsWith('--only=')) args.only = new Set(arg.slice(7).split(','));
    else if (arg.startsWith('--store=')) args.stores = new Set(arg.slice(8).split(',') as ('postgres' | 'embedded')[]);
    else throw new Error(`unknown argument ${arg}; use --smoke, --no-write, --store=postgres,embedded, --only=${sectionNames}`);
  }
  return args;
}

type Section = () => Promise<Row[]>;

/** Section 2a/2b on the embedded store: agent-kit alone (the peers do not run on PGlite). */
async function embeddedThroughput(db: Db, sizes: Sizes): Promise<Row[]> {
  const o = sizes.orchestration;
  const nullRuns = await drainWithWorker(db, nullTurn, { concurrency: o.concurrency, jobs: o.jobs, timeBoxMs: o.timeBoxMs });
  return [{
    section: `2a. Orchestration alone (null turn, concurrency ${o.concurrency})`, metric: 'null turns through the worker loop',
    unit: 'runs/s', agentKit: nullRuns.perSecond, note: `${nullRuns.roundTripsPerRun.total!.toFixed(2)} round trips/run`,
  }];
}

async function embeddedTurns(db: Db, sizes: Sizes): Promise<Row[]> {
  const turns = await drainScriptedTurns(db, sizes.scriptedTurn);
  return [{
    section: `2b. Scripted turn with one tool call (concurrency ${sizes.scriptedTurn.concurrency})`,
    metric: 'turns through the worker loop', unit: 'turns/s', agentKit: turns.perSecond,
  }];
}

function sectionsFor(
  store: 'postgres' | 'embedded', bench: BenchDatabase, sizes: Sizes, artifacts: Record<string, unknown>, baseUrl?: string,
) {
  const db = bench.db;
  const onPostgres = store === 'postgres';
  const sections: Record<(typeof sectionNames)[number], Section> = {
    lease: () => benchLeaseStatements(db, sizes.lease),
    orchestration: () => (onPostgres ? benchOrchestration(db, bench.url!, sizes.orchestration, artifacts) : embeddedThroughput(db, sizes)),
    turn: () => (onPostgres ? benchScriptedTurn(db, bench.url!, sizes.scriptedTurn) : embeddedTurns(db, sizes)),
    takeover: () => benchTakeover(db, sizes.takeover),
    mirror: () => benchStreamMirror(db, sizes.mirror),
    'first-token': async () => [
      ...(await benchFirstToken(db, sizes.firstToken)), ...(await benchOtherViewer(db, sizes.otherViewer)),
    ],
    replay: () => benchReplay(db, sizes.replay),
    // Its own fresh stores, one per queue depth.
    scale: () => benchScale(
      () => (onPostgres ? createPostgresBench(baseUrl!, sizes.poolMax) : createEmbeddedBench()), sizes.scale, artifacts,
    ),
  };
  return sections;
}

async function runStore(store: 'postgres' | 'embedded', args: Args, url?: string): Promise<Report> {
  const sizes = sizesFor(args.smoke, store);
  const startedAt = new Date().toISOString();
  const bench = store === 'postgres' ? await createPostgresBench(url!, sizes.poolMax) : await createEmbeddedBench();
  const artifacts: Record<string, unknown> = {};
  const rows: Row[] = [];
  const sectionSeconds: Record<string, number> = {};
  try {
    const sections = sectionsFor(store, bench, sizes, artifacts, url);
    for (const name of sectionNames) {
      if (args.only && !args.only.has(name)) continue;
      const startAt = performance.now();
      process.stderr.write(`[bench] ${store}: ${name}…\n`);
      rows.push(...(await sections[name]()));
      sectionSeconds[name] = Math.round((performance.now() - startAt) / 100) / 10;
      process.stderr.write(`[bench] ${store}: ${name} done in ${sectionSeconds[name]} s\n`);
    }
  } finally {
    await bench.drop();
  }
  return {
    store, startedAt, command: `npm run bench${args.smoke ? ':smoke' : ''}`,
    machine: { ...machineInfo(bench.serverVersion), loadAverageAtStart: os.loadavg() },
    sectionSeconds, rows: rows.map(judge), artifacts,
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const startAt = performance.now();
  const url = process.env.DATABASE_URL;
  const reports: Report[] = [];
  if (args.stores.has('postgres')) {
    if (url) reports.push(await runStore('postgres', args, url));
    else process.stderr.write('[bench] DATABASE_URL is not set: skipping the Postgres store.\n');
  }
  if (args.stores.has('embedded')) reports.push(await runStore('embedded', args));
  for (const report of reports) {
    const title = report.store === 'postgres' ? 'Postgres' : '7. Embedded store (PGlite, in-process)';
    process.stdout.write(`\n## ${title} — ${report.command}\n\n${formatTable(report.rows)}\n`);
    if (args.write && !args.smoke) {
      process.stdout.write(`\nwrote ${path.relative(process.cwd(), writeReport(resultsDir, report))}\n`);
    }
  }
  process.stdout.write(`\nmachine: ${JSON.stringify(reports[0]?.machine ?? machineInfo())}\n`);
  process.stdout.write(`total ${((performance.now() - startAt) / 1000).toFixed(1)} s\n`);
}

main().catch((raw) => {
  process.stderr.write(`[bench] failed: ${raw instanceof Error ? raw.stack : String(raw)}\n`);
  process.exit(1);
});
