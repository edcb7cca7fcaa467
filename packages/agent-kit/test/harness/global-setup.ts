// Vitest global setup: on Postgres, build the migrated template database once per run and drop
// the per-test databases at the end. On PGlite, dump a bare and a migrated data dir to the OS
// temp dir once per run (test-db.ts loads its databases from them) and remove them at the end.
import crypto from 'node:crypto';
import fs from 'node:fs';
import pg from 'pg';
import { openPgDb } from '../../src/store/pg-driver.js';
import { migrate } from '../../src/store/migrate.js';
import { buildPgliteTemplates, pgliteTemplatePaths } from './test-db.js';

/**
 * Run `fn` on a short-lived maintenance connection. Not held across the run: a Postgres restart
 * or a killed backend during the tests would make an idle client emit 'error', and without a
 * listener that crashes the whole vitest process.
 */
async function withAdmin<T>(databaseUrl: string, fn: (admin: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: databaseUrl });
  admin.on('error', () => {}); // a failure mid-query still rejects that query
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.end().catch(() => {});
  }
}

/** Write the PGlite templates (each file renamed into place whole); returns their removal. */
async function setupPglite(): Promise<() => void> {
  const templates = await buildPgliteTemplates();
  const paths = Object.values(pgliteTemplatePaths);
  for (const [kind, blob] of Object.entries(templates)) {
    const file = pgliteTemplatePaths[kind as keyof typeof pgliteTemplatePaths];
    const tmp = `${file}.${crypto.randomBytes(4).toString('hex')}.tmp`;
    fs.writeFileSync(tmp, Buffer.from(await blob.arrayBuffer()));
    fs.renameSync(tmp, file);
  }
  return () => {
    for (const file of paths) fs.rmSync(file, { force: true });
  };
}

export default async function setup() {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) return setupPglite();
  const run = process.env.AGENT_KIT_TEST_RUN ?? `r${process.pid}`;
  const template = `agent_kit_tpl_${run}`;
  await withAdmin(databaseUrl, async (admin) => {
    await admin.query(`drop database if exists ${template} with (force)`);
    await admin.query(`create database ${template}`);
  });
  const url = new URL(databaseUrl);
  url.pathname = `/${template}`;
  const db = openPgDb({ connectionString: url.toString(), max: 1 });
  await migrate(db);
  await db.close();
  return async () => {
    await withAdmin(databaseUrl, async (admin) => {
      const rows = await admin.query<{ datname: string }>(
        `select datname from pg_database where starts_with(datname, $1) or datname = $2`,
        [`agent_kit_t_${run}_`, template],
      );
      for (const row of rows.rows) {
        await admin.query(`drop database if exists ${row.datname} with (force)`).catch(() => {});
      }
    });
  };
}
