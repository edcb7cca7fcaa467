// What a database error becomes: here, a database that is not on the server says how to make it
// (an adopter's `database "adopt_x" does not exist` said nothing more), on real Postgres too.
import { describe, expect, it } from 'vitest';
import { coerceError, StoreUnavailableError } from './errors.js';
import { openPgDb } from './store/pg-driver.js';
import { onPostgres, urlForDatabase } from '../test/harness/test-db.js';

describe('coerceError', () => {
  it('says how to make a database that does not exist, and keeps the driver error as its cause', () => {
    const raw = Object.assign(new Error('database "adopt_x" does not exist'), { code: '3D000' });
    const error = coerceError(raw);
    expect(error.message).toBe('database "adopt_x" does not exist: create it (`createdb NAME`, or CREATE DATABASE in psql) or fix DATABASE_URL');
    expect(error.cause).toBe(raw);
    expect(error).not.toBeInstanceOf(StoreUnavailableError); // a setting to fix: not waited out
  });

  it.runIf(onPostgres)('says so for a real server', async () => {
    const db = openPgDb({ connectionString: urlForDatabase('agent_kit_no_such_database') });
    try {
      await expect(db.query('select 1')).rejects.toThrow(/"agent_kit_no_such_database" does not exist: create it/);
    } finally {
      await db.close();
    }
  });
});
