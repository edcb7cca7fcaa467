// The embedded store's own autovacuum (ADR-0050), always on PGlite: a server has autovacuum. So
// it runs in the suite's PGlite pass only; the Postgres pass would run the same tests again.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { onPostgres } from '../../test/harness/test-db.js';
import type { Db } from './db.js';
import { openPgliteDb } from './pglite-driver.js';
import { maintainEmbeddedStore, scheduleMaintenance, type MaintenanceOutcome } from './pglite-maintenance.js';

const opened: Db[] = [];
const folders: string[] = [];
async function openStore(options: Parameters<typeof openPgliteDb>[1] = { maintenanceEveryMs: 0 }, dataDir?: string) {
  const db = await openPgliteDb(dataDir, options);
  opened.push(db);
  return db;
}
afterEach(async () => {
  await Promise.all(opened.splice(0).map((db) => db.close()));
  for (const folder of folders.splice(0)) fs.rmSync(folder, { recursive: true, force: true });
});

async function deadRows(db: Db, table: string): Promise<number> {
  await db.query('select pg_stat_force_next_flush()');
  const [row] = await db.query<{ n: number }>('select n_dead_tup as n from pg_stat_user_tables where relname = $1', [table]);
  return Number(row!.n);
}

async function tableBytes(db: Db, table: string): Promise<number> {
  const [row] = await db.query<{ n: number }>('select pg_total_relation_size($1::regclass) as n', [table]);
  return Number(row!.n);
}

/**
 * A table of `rows` rows, each then updated `rounds` times (one statement per round). The updated
 * column is indexed, as a run's status and lease are: no update is HOT, so pages keep old rows.
 */
async function churn(db: Db, table: string, rows: number, rounds: number, everyRound?: () => Promise<unknown>) {
  await db.exec(`create table if not exists ${table} (id int primary key, v int not null, note text not null);
    create index if not exists ${table}_v on ${table} (v);
    insert into ${table} select g, 0, repeat('x', 100) from generate_series(1, ${rows}) g on conflict do nothing`);
  for (let round = 0; round < rounds; round++) {
    await db.exec(`update ${table} set v = v + 1`);
    await everyRound?.();
  }
}

/** The tables of the test's own schema (a pass may also vacuum a catalog the test's DDL changed). */
const ours = (names: string[]) => names.filter((name) => name.startsWith('public.'));

describe.skipIf(onPostgres)('the embedded store vacuums itself', () => {
  it('vacuums a table past autovacuum\'s dead-row threshold and leaves a quiet one alone', async () => {
    const db = await openStore();
    await churn(db, 'busy', 100, 0);
    await churn(db, 'quiet', 10, 0);
    await maintainEmbeddedStore(db); // both were just filled: analyzed, then quiet
    await churn(db, 'busy', 100, 10); // 1,000 dead rows against a threshold of 50 + 20 % of 100
    await db.exec('update quiet set v = 1 where id = 1'); // 1 dead row: below 50
    expect(await deadRows(db, 'busy')).toBeGreaterThanOrEqual(1000);

    const report = await maintainEmbeddedStore(db);
    expect(ours(report.vacuumed)).toEqual(['public.busy']);
    expect(ours(report.analyzed)).toEqual(['public.busy']);
    expect(report.frozen).toEqual([]);
    expect(await deadRows(db, 'busy')).toBe(0);
    expect(await deadRows(db, 'quiet')).toBe(1);
    const again = await maintainEmbeddedStore(db);
    expect([...ours(again.vacuumed), ...ours(again.analyzed)]).toEqual([]);
  });

  it('analyzes a table that changed enough without vacuuming it', async () => {
    const db = await openStore();
    await churn(db, 'grown', 40, 0); // 40 inserts: under both thresholds
    const first = await maintainEmbeddedStore(db);
    expect([...ours(first.vacuumed), ...ours(first.analyzed)]).toEqual([]);
    await db.exec("insert into grown select g, 0, 'y' from generate_series(41, 100) g"); // 100 since analyze
    const second = await maintainEmbeddedStore(db);
    expect(ours(second.vacuumed)).toEqual([]);
    expect(ours(second.analyzed)).toEqual(['public.grown']);
    const [stats] = await db.query<{ n: number }>("select reltuples as n from pg_class where relname = 'grown'");
    expect(Number(stats!.n)).toBe(100);
  });

  it('leaves a table with autovacuum_enabled = false alone, as autovacuum does, but still freezes it', async () => {
    const db = await openStore();
    await churn(db, 'busy', 100, 0);
    await churn(db, 'pinned', 100, 0);
    await db.exec('alter table pinned set (autovacuum_enabled = false)');
    await churn(db, 'busy', 100, 10);
    await churn(db, 'pinned', 100, 10);

    const report = await maintainEmbeddedStore(db);
    expect(ours(report.vacuumed)).toEqual(['public.busy']);
    expect(ours(report.analyzed)).toEqual(['public.busy']);
    expect(await deadRows(db, 'pinned')).toBeGreaterThanOrEqual(1000);
    const [stats] = await db.query<{ n: number }>("select reltuples as n from pg_class where relname = 'pinned'");
    expect(Number(stats!.n)).toBe(-1); // never analyzed

    const wrapping = await maintainEmbeddedStore(db, { freezeMaxAge: 5 });
    expect(ours(wrapping.frozen)).toEqual(expect.arrayContaining(['public.pinned']));
  });

  it('keeps a churned table its size, where without it the table grows with every update', async () => {
    const kept = await openStore();
    const grown = await openStore();
    let round = 0;
    const maintainEvery5 = async () => ++round % 5 === 0 && maintainEmbeddedStore(kept);
    await churn(kept, 'runs_like', 200, 20, maintainEvery5);
    await churn(grown, 'runs_like', 200, 20);
    const [kept20, grown20] = [await tableBytes(kept, 'runs_like'), await tableBytes(grown, 'runs_like')];
    await churn(kept, 'runs_like', 200, 80, maintainEvery5);
    await churn(grown, 'runs_like', 200, 80);
    const [kept100, grown100] = [await tableBytes(kept, 'runs_like'), await tableBytes(grown, 'runs_like')];
    // Measured: 224 KB then 224 KB kept; 488 KB then 1,032 KB without a vacuum.
    expect(kept100).toBeLessThanOrEqual(kept20 * 1.1);
    expect(grown100).toBeGreaterThan(grown20 * 1.8);
    expect(grown100).toBeGreaterThan(kept100 * 4);
  });

  it('freezes every table, the catalogs too, once its oldest transaction id is past the freeze age', async () => {
    const db = await openStore();
    await db.exec('create table ledger (id int primary key)');
    for (let id = 0; id < 300; id++) await db.query('insert into ledger values ($1)', [id]); // 300 transactions
    const age = async () => Number((await db.query<{ n: number }>(
      'select age(datfrozenxid) as n from pg_database where datname = current_database()'))[0]!.n);
    expect(await age()).toBeGreaterThan(300);

    const report = await maintainEmbeddedStore(db, { freezeMaxAge: 200 });
    expect(report.frozen).toEqual(expect.arrayContaining(['public.ledger', 'pg_catalog.pg_class', 'pg_catalog.pg_database']));
    expect(await age()).toBeLessThan(200);
    expect((await maintainEmbeddedStore(db, { freezeMaxAge: 200 })).frozen).toEqual([]);
  });

  it('runs on its own every interval in a store in a folder, and stops when it closes', async () => {
    const outcomes: MaintenanceOutcome[] = [];
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-kit-maintenance-'));
    folders.push(folder);
    const db = await openStore(
      { maintenanceEveryMs: 20, onMaintenance: (outcome) => outcomes.push(outcome) }, path.join(folder, 'pgdata'),
    );
    await churn(db, 'busy', 100, 5);
    const deadline = Date.now() + 10_000;
    while (!outcomes.some((o) => 'vacuumed' in o && o.vacuumed.includes('public.busy')) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(outcomes.filter((o) => 'vacuumed' in o && o.vacuumed.includes('public.busy'))).toHaveLength(1);
    expect(outcomes.filter((o) => 'error' in o)).toEqual([]);
    await db.close();
    const passes = outcomes.length;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(outcomes).toHaveLength(passes);
  });
});

describe.skipIf(onPostgres)('scheduleMaintenance', () => {
  it('refuses an interval that is not 0 or a number of milliseconds, before it opens anything', async () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-kit-maintenance-'));
    folders.push(folder);
    const dataDir = path.join(folder, 'pgdata');
    for (const maintenanceEveryMs of [-1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31]) {
      await expect(openPgliteDb(dataDir, { maintenanceEveryMs })).rejects.toThrow(/maintenanceEveryMs must be 0/);
    }
    expect(fs.existsSync(`${dataDir}.lock`)).toBe(false); // nothing opened, nothing locked
    await openStore({ maintenanceEveryMs: 0 }, dataDir);
  });

  it('waits for a pass under way when stopped, and starts none after', async () => {
    let passes = 0;
    let finish: () => void = () => {};
    const schedule = scheduleMaintenance(async () => {
      passes++;
      await new Promise<void>((resolve) => (finish = resolve));
      return { frozen: [], vacuumed: [], analyzed: [], ms: 0 };
    }, 5);
    while (passes === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    let stopped = false;
    const stopping = schedule.stop().then(() => (stopped = true));
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(stopped).toBe(false);
    finish();
    await stopping;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(passes).toBe(1);
  });

  it('reports a failed pass and keeps going', async () => {
    const outcomes: MaintenanceOutcome[] = [];
    let calls = 0;
    const schedule = scheduleMaintenance(async () => {
      if (++calls === 1) throw new Error('disk on fire');
      return { frozen: [], vacuumed: [], analyzed: [], ms: 1 };
    }, 5, (outcome) => outcomes.push(outcome));
    while (outcomes.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    await schedule.stop();
    expect(outcomes[0]).toEqual({ error: new Error('disk on fire') });
    expect(outcomes[1]).toEqual({ frozen: [], vacuumed: [], analyzed: [], ms: 1 });
  });
});
