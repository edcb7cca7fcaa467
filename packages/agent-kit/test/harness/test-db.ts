// Test databases: with DATABASE_URL, a fresh Postgres database cloned from a migrated template
// (made once by global-setup.ts); otherwise an in-memory PGlite loaded from a dump of a migrated
// data dir (also made once per run by global-setup.ts, read once per test file). Each call gives
// an isolated, fully migrated database; close it when done.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import type { Db } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { openPgDb } from '../../src/store/pg-driver.js';
import { wrapPglite } from '../../src/store/pglite-driver.js';

export const databaseUrl = process.env.DATABASE_URL;
export const onPostgres = Boolean(databaseUrl);
const testRun = process.env.AGENT_KIT_TEST_RUN ?? `r${process.ppid}`;
export const templateName = `agent_kit_tpl_${testRun}`;
/** Every database this run creates starts with this; global teardown drops them. */
export const databasePrefix = `agent_kit_t_${testRun}_`;

/** A URL for database `name` on the same server as DATABASE_URL. */
export function urlForDatabase(name: string): string {
  const url = new URL(databaseUrl!);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * The PGlite templates of this run: tarred data dirs, bare (initdb only) and fully migrated, in
 * the OS temp dir. global-setup.ts writes them before any test file starts and removes them at
 * the end. A new PGlite runs initdb (~5 s); loading a dump takes ~1 s.
 */
export const pgliteTemplatePaths = {
  bare: path.join(os.tmpdir(), `agent-kit-pglite-${testRun}-bare.tar`),
  migrated: path.join(os.tmpdir(), `agent-kit-pglite-${testRun}-migrated.tar`),
} as const;
export type PgliteTemplateKind = keyof typeof pgliteTemplatePaths;

/** Make both templates in memory: one initdb, dumped before and after migrating. */
export async function buildPgliteTemplates(): Promise<Record<PgliteTemplateKind, Blob>> {
  const instance = await PGlite.create();
  try {
    const bare = await instance.dumpDataDir('none');
    await migrate(wrapPglite(instance));
    const migrated = await instance.dumpDataDir('none');
    return { bare, migrated };
  } finally {
    await instance.close();
  }
}

const pgliteTemplates: Partial<Record<PgliteTemplateKind, Promise<Blob>>> = {};
let builtTemplates: Promise<Record<PgliteTemplateKind, Blob>> | undefined;

/**
 * A template's dump, read once per test file (process). Without global setup (a script run
 * under tsx) the file is missing: then both are built here, once per process.
 */
export function pgliteTemplate(kind: PgliteTemplateKind): Promise<Blob> {
  return (pgliteTemplates[kind] ??= fs.promises.readFile(pgliteTemplatePaths[kind]).then(
    (bytes) => new Blob([bytes]),
    async (error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
      builtTemplates ??= buildPgliteTemplates();
      return (await builtTemplates)[kind];
    },
  ));
}

/** A new PGlite holding a copy of the template: in memory, or in `dataDir` (a new folder). */
export async function pgliteFromTemplate(kind: PgliteTemplateKind, dataDir?: string): Promise<PGlite> {
  return PGlite.create({ dataDir, loadDataDir: await pgliteTemplate(kind) });
}

/** Run SQL on the server's maintenance connection (create/drop database). */
export async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * A fresh database migrated to the latest schema (or to `to`, unmigrated past it).
 * @param options.to stop at this migration (for migration tests)
 */
export async function openTestDb(options: { to?: number; poolMax?: number } = {}): Promise<Db> {
  if (onPostgres) {
    const name = `${databasePrefix}${crypto.randomBytes(6).toString('hex')}`;
    const template = options.to === undefined ? templateName : 'template0';
    for (let attempt = 0; ; attempt++) {
      try {
        await adminQuery(`create database ${name} template ${template}`);
        break;
      } catch (error) {
        // A concurrent CREATE DATABASE from the same template can collide; back off and retry.
        if (attempt >= 10) throw error;
        await new Promise((r) => setTimeout(r, 50 + Math.random() * 200));
      }
    }
    const db = openPgDb({ connectionString: urlForDatabase(name), max: options.poolMax ?? 10 });
    if (options.to !== undefined) await migrate(db, { to: options.to });
    const close = db.close.bind(db);
    return Object.assign(db, {
      async close() {
        await close();
        await adminQuery(`drop database if exists ${name} with (force)`).catch(() => {});
      },
    });
  }
  if (options.to === undefined) return wrapPglite(await pgliteFromTemplate('migrated'));
  const db = wrapPglite(await pgliteFromTemplate('bare'));
  try {
    await migrate(db, { to: options.to });
  } catch (error) {
    await db.close();
    throw error;
  }
  return db;
}

/** Run `fn` with a fresh test database, closing it afterwards. */
export async function withTestDb<T>(fn: (db: Db) => Promise<T>, options?: { to?: number }): Promise<T> {
  const db = await openTestDb(options);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}
