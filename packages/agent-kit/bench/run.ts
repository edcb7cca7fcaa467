// `npm run bench`: every measurement in one run on one fresh database, a table on stdout and
// JSON under bench/results/. `--smoke` runs the same code with tiny sizes (CI: it still runs).
// Not a test: targets are reported, never enforced by the exit code.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchLeaseStatements } from './lease-statements.js';
import { benchScale } from './scale.js';
import { benchOrchestration } from './throughput.js';
import { createPostgresBench } from './lib/bench-db.js';
import { formatTable, judge, machineInfo, writeReport, type Report, type Row } from './lib/report.js';
import { sizesFor, type Sizes } from './sizes.js';

const resultsDir = fileURLToPath(new URL('./results/', import.meta.url));

interface Args {
  smoke: boolean;
  only?: Set<string>;
  write: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { smoke: false, write: true };
  for (const arg of argv) {
    if (arg === '--smoke') args.smoke = true;
    else if (arg === '--no-write') args.write = false;
    else if (arg.startsWith('--only=')) args.only = new Set(arg.slice(7).split(','));
    else throw new Error(`unknown argument ${arg}; use --smoke, --no-write, --only=lease,scale,...`);
  }
  return args;
}

type Section = (ctx: { sizes: Sizes; artifacts: Record<string, unknown> }) => Promise<Row[]>;

async function runPostgres(url: string, args: Args): Promise<Report> {
  const sizes = sizesFor(args.smoke);
  const bench = await createPostgresBench(url, sizes.poolMax);
  const artifacts: Record<string, unknown> = {};
  const rows: Row[] = [];
  const sections: [string, Section][] = [
    ['lease', () => benchLeaseStatements(bench.db, sizes.lease)],
    ['scale', () => benchScale(bench.db, sizes.scale, artifacts, bench.url)],
    ['orchestration', () => benchOrchestration(bench.db, bench.url!, sizes.orchestration, artifacts)],
  ];
  try {
    for (const [name, section] of sections) {
      if (args.only && !args.only.has(name)) continue;
      const startAt = performance.now();
      process.stderr.write(`[bench] ${name}…\n`);
      rows.push(...(await section({ sizes, artifacts })));
      process.stderr.write(`[bench] ${name} done in ${((performance.now() - startAt) / 1000).toFixed(1)} s\n`);
    }
  } finally {
    await bench.drop();
  }
  return {
    store: 'postgres',
    startedAt: new Date().toISOString(),
    command: `npm run bench${args.smoke ? ':smoke' : ''}`,
    machine: machineInfo(bench.serverVersion),
    rows: rows.map(judge),
    artifacts,
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const startAt = performance.now();
  const url = process.env.DATABASE_URL;
  const reports: Report[] = [];
  if (url) reports.push(await runPostgres(url, args));
  else process.stderr.write('[bench] DATABASE_URL is not set: skipping the Postgres sections.\n');
  for (const report of reports) {
    process.stdout.write(`\n## ${report.store} (${report.command})\n\n${formatTable(report.rows)}\n`);
    if (args.write && !args.smoke) {
      const file = writeReport(resultsDir, report);
      process.stdout.write(`\nwrote ${path.relative(process.cwd(), file)}\n`);
    }
  }
  process.stdout.write(`\nmachine: ${JSON.stringify(reports[0]?.machine ?? machineInfo())}\n`);
  process.stdout.write(`total ${((performance.now() - startAt) / 1000).toFixed(1)} s\n`);
}

main().catch((raw) => {
  process.stderr.write(`[bench] failed: ${raw instanceof Error ? raw.stack : String(raw)}\n`);
  process.exit(1);
});
