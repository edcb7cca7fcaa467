// The benchmark's databases: a fresh, migrated database on the DATABASE_URL server (dropped at
// the end), or a fresh in-memory embedded store. Seeding goes through agent_kit_start_turn, the
// same SQL a user's message goes through, so the queue the bench drains is a real one.
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { migrate } from '../../src/store/migrate.js';
import { openPgDb } from '../../src/store/pg-driver.js';
import { wrapPglite } from '../../src/store/pglite-driver.js';
import type { Db } from '../../src/store/db.js';

export interface BenchDatabase {
  /** Connection string of the fresh database (Postgres), or undefined (embedded). */
  url?: string;
  /** A pooled Db for agent-kit's own statements. */
  db: Db;
  /** The server's version string. */
  serverVersion: string;
  /** Close every connection and drop the database. */
  drop(): Promise<void>;
}

/** Create `agent_kit_bench_<stamp>` on the server of `baseUrl`, migrate it, and open a pool. */
export async function createPostgresBench(baseUrl: string, poolMax: number): Promise<BenchDatabase> {
  const name = `agent_kit_bench_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  admin.on('error', () => {}); // a lost connection fails the next query, not the process
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  // Section 4 starts a thousand streaming runs at once on this pool: on a slow machine their
  // statements queue for longer than the library's default 10 s wait for a connection.
  const db = openPgDb({
    connectionString: url.toString(), max: poolMax, applicationName: 'agent-kit-bench', acquireTimeoutMs: 120_000,
  });
  await migrate(db);
  const version = await db.query<{ v: string }>('select version() as v');
  return {
    url: url.toString(),
    db,
    serverVersion: version[0]!.v,
    async drop() {
      await db.close();
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}

let migratedDataDir: Promise<Blob> | undefined;

/**
 * A migrated embedded data dir, made once per process: a new PGlite runs initdb (~5 s), while
 * loading this dump takes about a second, and section 6 opens four fresh stores.
 */
function migratedTemplate(): Promise<Blob> {
  return (migratedDataDir ??= (async () => {
    const pglite = await PGlite.create();
    try {
      await migrate(wrapPglite(pglite));
      return await pglite.dumpDataDir('none');
    } finally {
      await pglite.close();
    }
  })());
}

/** A fresh in-memory embedded store, migrated. */
export async function createEmbeddedBench(): Promise<BenchDatabase> {
  const db = wrapPglite(await PGlite.create({ loadDataDir: await migratedTemplate() }));
  const version = await db.query<{ v: string }>('select version() as v');
  return { db, serverVersion: version[0]!.v, drop: () => db.close() };
}

/**
 * Queue `count` turns, each on its own new thread (so no run waits behind another), with the
 * statements split across `parallel` callers. Returns the new runs' ids in creation order.
 */
export async function seedQueuedRuns(db: Db, count: number, parallel = 4, ownerId = 'bench'): Promise<string[]> {
  const chunk = 2_500; // one statement per 2,500 turns keeps each transaction short
  const sizes: number[] = [];
  for (let left = count; left > 0; left -= chunk) sizes.push(Math.min(chunk, left));
  const ids: string[][] = new Array(sizes.length);
  let next = 0;
  const worker = async () => {
    while (next < sizes.length) {
      const index = next++;
      const rows = await db.query<{ run_id: string }>(
        `select (agent_kit_start_turn(null, $1, 'benchmark turn ' || g)).run_id
         from generate_series(1, $2::int) g`,
        [ownerId, sizes[index]],
      );
      ids[index] = rows.map((r) => r.run_id);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, sizes.length) }, worker));
  return ids.flat();
}

/**
 * Claim `runIds` in one statement per chunk, as owner `owner`, with a long lease: held leases
 * for the renew, mirror and close measurements. Returns the fences by run id.
 */
export async function claimInBulk(db: Db, runIds: readonly string[], owner: string): Promise<Map<string, number>> {
  const fences = new Map<string, number>();
  for (let start = 0; start < runIds.length; start += 5_000) {
    const rows = await db.query<{ id: string; fence: number }>(
      `select c.id, c.fence from unnest($1::uuid[]) as u(id),
         lateral agent_kit_claim_run(u.id, $2, interval '1 hour') c`,
      [runIds.slice(start, start + 5_000), owner],
    );
    for (const row of rows) fences.set(row.id, Number(row.fence));
  }
  return fences;
}

/** Vacuum and analyze the agent-kit tables so every measurement starts from fresh statistics. */
export async function vacuumAnalyze(db: Db): Promise<void> {
  if (db.kind !== 'pg') {
    await db.exec('analyze');
    return;
  }
  for (const table of ['agent_kit_threads', 'agent_kit_runs', 'agent_kit_jobs', 'agent_kit_messages', 'agent_kit_thread_events']) {
    await db.exec(`vacuum (analyze) ${table}`);
  }
}

/** `db` as seen through a transaction-mode pooler: its LISTEN is accepted and hears nothing. */
export function withoutListen(db: Db): Db {
  return { ...db, listen: async () => async () => {} };
}
