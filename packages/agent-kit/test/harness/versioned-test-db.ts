// Test databases at a given schema version, for migration tests. On PGlite one bare instance is
// made per file and cloned (a clone is several times cheaper than a new initdb), then migrated to
// the version asked for; on Postgres this is openTestDb({ to }).
import { PGlite } from '@electric-sql/pglite';
import type { Db } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { wrapPglite } from '../../src/store/pglite-driver.js';
import { onPostgres, openTestDb } from './test-db.js';

let bare: Promise<PGlite> | undefined;

/** A fresh database migrated to `to` (0 = only the migrations table; undefined = latest). */
export async function openTestDbAt(to?: number): Promise<Db> {
  if (onPostgres) return openTestDb({ to });
  bare ??= PGlite.create();
  const clone = (await (await bare).clone()) as unknown as PGlite;
  const db = wrapPglite(clone);
  await migrate(db, { to });
  return db;
}
