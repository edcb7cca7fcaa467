// A fresh, empty Postgres database on the DATABASE_URL server, for tests that need its URL
// (several pools on one database, a migrator racing another). It carries this run's database
// prefix, so global-setup.ts drops it at the end even when a test forgets to.
import crypto from 'node:crypto';
import { adminQuery, databasePrefix, onPostgres, urlForDatabase } from './test-db.js';

export interface EmptyDatabase {
  readonly name: string;
  readonly url: string;
  /** Drop it, ending any connection still open. */
  drop(): Promise<void>;
}

/** Create an empty database (from template0: no agent_kit_ objects at all). Postgres only. */
export async function createEmptyDatabase(): Promise<EmptyDatabase> {
  if (!onPostgres) throw new Error('createEmptyDatabase needs DATABASE_URL (a Postgres server)');
  const name = `${databasePrefix}${crypto.randomBytes(6).toString('hex')}`;
  await adminQuery(`create database ${name} template template0`);
  return {
    name,
    url: urlForDatabase(name),
    drop: () => adminQuery(`drop database if exists ${name} with (force)`),
  };
}
