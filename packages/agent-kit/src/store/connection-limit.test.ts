// A server that will not take another connection now (the role's or the server's connection
// limit, 53300) has seen no statement: the driver asks again for a few seconds instead of failing
// at once. A worker whose pool met a managed plan's per-role limit spent a run's attempt on each
// such refusal, and salvaged turns that were only waiting for a connection. Postgres only.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminQuery, databasePrefix, onPostgres } from '../../test/harness/test-db.js';
import { StoreUnavailableError } from '../errors.js';
import { openPgDb } from './pg-driver.js';

const role = `${databasePrefix}one_conn`;

describe.runIf(onPostgres)('a connection the server will not take now (Postgres)', () => {
  let url: string;
  beforeAll(async () => {
    await adminQuery(`drop role if exists ${role}`);
    await adminQuery(`create role ${role} login connection limit 1`);
    const parsed = new URL(process.env.DATABASE_URL!);
    parsed.username = role;
    parsed.password = '';
    url = parsed.toString();
  });
  afterAll(async () => {
    await adminQuery(`drop role if exists ${role}`);
  });

  it('is asked for again until the limit lets it in, for a statement and for a transaction', async () => {
    const holder = new pg.Client({ connectionString: url });
    await holder.connect(); // the role's one connection
    const db = openPgDb({ connectionString: url, max: 1 });
    try {
      const released = new Promise<void>((resolve) => setTimeout(() => void holder.end().then(resolve), 400));
      // Failed with "too many connections for role" (StoreUnavailableError) at once before.
      await expect(db.query<{ n: number }>('select 1 as n')).resolves.toEqual([{ n: 1 }]);
      await released;
      await expect(db.transaction((tx) => tx.query<{ n: number }>('select 2 as n'))).resolves.toEqual([{ n: 2 }]);
    } finally {
      await db.close();
      await holder.end().catch(() => {});
    }
  });

  it('fails as unavailable once it has asked for about 4.5 s', async () => {
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    const db = openPgDb({ connectionString: url, max: 1 });
    try {
      const startedMs = performance.now();
      const error = await db.query('select 1').then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toMatch(/too many connections for role/);
      expect(performance.now() - startedMs).toBeGreaterThan(4_000);
    } finally {
      await db.close();
      await holder.end();
    }
  });
});
