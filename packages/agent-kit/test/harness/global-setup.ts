// Vitest global setup: on Postgres, build the migrated template database once per run and drop
// the per-test databases at the end. On PGlite there is nothing to do.
import pg from 'pg';
import { openPgDb } from '../../src/store/pg-driver.js';
import { migrate } from '../../src/store/migrate.js';

export default async function setup() {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) return;
  const run = process.env.AGENT_KIT_TEST_RUN ?? `r${process.pid}`;
  const template = `agent_kit_tpl_${run}`;
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${template} with (force)`);
  await admin.query(`create database ${template}`);
  const url = new URL(databaseUrl);
  url.pathname = `/${template}`;
  const db = openPgDb({ connectionString: url.toString(), max: 1 });
  await migrate(db);
  await db.close();
  return async () => {
    const rows = await admin.query<{ datname: string }>(
      `select datname from pg_database where starts_with(datname, $1) or datname = $2`,
      [`agent_kit_t_${run}_`, template],
    );
    for (const row of rows.rows) {
      await admin.query(`drop database if exists ${row.datname} with (force)`).catch(() => {});
    }
    await admin.end();
  };
}
