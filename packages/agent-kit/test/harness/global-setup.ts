// Vitest global setup: on Postgres, build the migrated template database once per run and drop
// the per-test databases at the end. On PGlite there is nothing to do.
import pg from 'pg';
import { openPgDb } from '../../src/store/pg-driver.js';
import { migrate } from '../../src/store/migrate.js';

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

export default async function setup() {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) return;
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
