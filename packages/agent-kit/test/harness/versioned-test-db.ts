// Test databases at a given schema version, for migration tests. On PGlite a copy of the run's
// bare template (initdb only, dumped once by global-setup.ts) migrated to the version asked for;
// on Postgres this is openTestDb({ to }).
import type { Db } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { wrapPglite } from '../../src/store/pglite-driver.js';
import { onPostgres, openTestDb, pgliteFromTemplate } from './test-db.js';

/** A fresh database migrated to `to` (0 = only the migrations table; undefined = latest). */
export async function openTestDbAt(to?: number): Promise<Db> {
  if (onPostgres) return openTestDb({ to });
  const db = wrapPglite(await pgliteFromTemplate('bare'));
  await migrate(db, { to });
  return db;
}
