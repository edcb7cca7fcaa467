// `npm run load [-- --viewers N --runs M --tokens T --delay-ms D --flood-viewers V --deadline-s S]`:
// the load run on demand. One node:http server on 127.0.0.1 with the real engine; phases: M runs
// alone, M runs with N viewers, then 1k and 10k events to V viewers of one thread. Prints the
// table for docs/guides/load.md; exits 1 on any lost, repeated or reordered event, or when the
// server heap per viewer is over 200 KB or grows with the event count. Postgres with
// DATABASE_URL (a fresh database, dropped at the end), else the embedded store in memory.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import pg from 'pg';
import type { Db } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { openDb } from '../../src/store/open.js';
import { openLoadServer, runFloodPhase, runViewersPhase, type PhaseReport } from './load-kit.js';
import { formatLoadReport, loadFigures } from './load-report.js';

const { values } = parseArgs({
  options: {
    viewers: { type: 'string', default: '2000' },
    runs: { type: 'string', default: '200' },
    tokens: { type: 'string', default: '60' },
    'delay-ms': { type: 'string', default: '10' },
    'flood-viewers': { type: 'string', default: '50' },
    'spread-ms': { type: 'string', default: '1000' },
    'deadline-s': { type: 'string', default: '300' },
    json: { type: 'string' },
  },
});

function count(name: keyof typeof values, max: number): number {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 1 || n > max) {
    console.error(`error: --${name} takes an integer 1..${max}, got "${values[name]}"`);
    process.exit(2);
  }
  return n;
}

// Bounded in count and time: these caps keep a mistyped flag from flooding the machine.
const viewers = count('viewers', 5_000);
const runs = count('runs', 1_000);
const tokens = count('tokens', 2_000);
const delayMs = count('delay-ms', 1_000);
const floodViewers = count('flood-viewers', 1_000);
const spreadMs = count('spread-ms', 60_000);
const deadlineMs = count('deadline-s', 1_800) * 1000;
const perViewerLimitBytes = 200 * 1024;

async function openStore(): Promise<{ db: Db; label: string; drop: () => Promise<void> }> {
  const url = process.env.DATABASE_URL;
  if (!url) {
    const db = await openDb({ dataDir: 'memory' });
    await migrate(db);
    return { db, label: 'PGlite (in memory)', drop: async () => {} };
  }
  const name = `agent_kit_load_${crypto.randomBytes(5).toString('hex')}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`create database ${name}`);
  const own = new URL(url);
  own.pathname = `/${name}`;
  const db = await openDb({ databaseUrl: own.toString(), poolMax: 20 });
  await migrate(db);
  return { db, label: 'Postgres 15 (loopback)', drop: () => admin(`drop database if exists ${name} with (force)`) };
}

async function main(): Promise<number> {
  const store = await openStore();
  const server = await openLoadServer(store.db, { tokens, delayMs });
  const phases: PhaseReport[] = [];
  const started = Date.now();
  try {
    await runViewersPhase(server, { runs: 2, viewers: 4, spreadMs: 50, deadlineMs }); // warm-up
    phases.push(await runViewersPhase(server, { runs, viewers: 0, spreadMs, deadlineMs }));
    phases.push(await runViewersPhase(server, { runs, viewers, spreadMs, deadlineMs }));
    for (const events of [1_000, 10_000]) {
      phases.push(await runFloodPhase(server, { events, viewers: floodViewers, batch: 100, deadlineMs }));
    }
  } finally {
    await server.close();
    await store.db.close();
    await store.drop();
  }
  const figures = loadFigures(phases[0]!, phases[1]!, phases[2]!, phases[3]!);
  const machine = `${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`;
  console.log(`load: ${store.label}; ${machine}; tokens ${tokens} × ${delayMs} ms; ` +
    `${((Date.now() - started) / 1000).toFixed(0)} s in all`);
  console.log(formatLoadReport(phases, figures));
  if (values.json) {
    fs.writeFileSync(values.json, JSON.stringify({ store: store.label, machine, tokens, delayMs, phases, figures }, null, 1));
  }
  const failures = phases.flatMap((p) => p.failures.map((f) => `${p.name}: ${f}`));
  if (figures.perViewerBytes > perViewerLimitBytes) failures.push(`heap per viewer over ${perViewerLimitBytes} bytes`);
  if (!figures.floodBounded) failures.push(`10k-event peak growth is ${figures.floodGrowthRatio.toFixed(1)}× the 1k one`);
  for (const failure of failures) console.error(`load: ${failure}`);
  console.log(`load: ${failures.length} violations`);
  return failures.length ? 1 : 0;
}

main().then((code) => process.exit(code), (error) => {
  console.error(error);
  process.exit(1);
});
