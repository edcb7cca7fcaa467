// Migrations as an operator meets them: idempotent, safe to race, stoppable at --to N, refusing
// an edited history and a schema the library cannot use, keeping data written under every older
// version, and honouring the lease rollout window (0003 accepts a lease-less close, 0004 refuses
// it). Also checks that sql/schema.sql is the dump of "all applied". Method: real migrations on
// fresh databases (PGlite, or Postgres with DATABASE_URL), data written with plain SQL.
import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaseRequiredError, SchemaMismatchError, InvalidArgumentError } from '../../src/errors.js';
import type { Db } from '../../src/store/db.js';
import { dumpSchema, schemaFileText } from '../../src/store/dump-schema.js';
import { checkSchema, loadMigrations, migrate, schemaVersion, type Migration } from '../../src/store/migrate.js';
import { openPgDb } from '../../src/store/pg-driver.js';
import { createEmptyDatabase } from '../harness/empty-database.js';
import { onPostgres } from '../harness/test-db.js';
import { openTestDbAt } from '../harness/versioned-test-db.js';

const migrations = loadMigrations();
const latest = migrations.length;
const allVersions = migrations.map((m) => m.version);
const schemaPath = new URL('../../sql/schema.sql', import.meta.url);

const opened: Db[] = [];
async function freshDb(to?: number): Promise<Db> {
  const db = await openTestDbAt(to);
  opened.push(db);
  return db;
}
afterEach(async () => {
  await Promise.all(opened.splice(0).map((db) => db.close()));
});

async function appliedRows(db: Db) {
  return db.query<{ version: number; hash: string }>('select version, hash from agent_kit_migrations order by version');
}

/** The SQLSTATE a database error carried, through the typed error's cause. */
function sqlState(error: unknown): unknown {
  return ((error as { cause?: { code?: unknown } }).cause ?? {}).code;
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the call to fail');
}

describe('applying migrations', () => {
  it('applies every migration once and nothing the second time', async () => {
    const db = await freshDb(0);
    expect(await schemaVersion(db)).toBe(0);
    expect(await migrate(db)).toEqual({ applied: allVersions, version: latest });
    expect(await migrate(db)).toEqual({ applied: [], version: latest });
    expect((await appliedRows(db)).map((r) => r.version)).toEqual(allVersions);
  });

  it('stops at --to N and applies the rest later', async () => {
    const db = await freshDb(0);
    expect(await migrate(db, { to: 2 })).toEqual({ applied: [1, 2], version: 2 });
    const fence = await db.query(
      `select 1 from information_schema.columns where table_name = 'agent_kit_runs' and column_name = 'fence'`,
    );
    expect(fence).toEqual([]); // 0003 adds it
    expect(await migrate(db, { to: 2 })).toEqual({ applied: [], version: 2 });
    expect(await migrate(db)).toEqual({ applied: allVersions.slice(2), version: latest });
  });

  it('refuses a --to outside 0..latest', async () => {
    const db = await freshDb(0);
    await expect(migrate(db, { to: latest + 1 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(migrate(db, { to: -1 })).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(await schemaVersion(db)).toBe(0);
  });

  it('lets two migrators run at once on one database: both succeed, each migration is applied once', async () => {
    if (onPostgres) {
      const reference = await dumpSchema(await freshDb());
      for (let round = 0; round < 3; round++) { // a few rounds, so the two really overlap
        const empty = await createEmptyDatabase();
        const a = openPgDb({ connectionString: empty.url, max: 2 });
        const b = openPgDb({ connectionString: empty.url, max: 2 });
        try {
          const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
          expect([...ra.applied, ...rb.applied].sort((x, y) => x - y)).toEqual(allVersions);
          expect([ra.version, rb.version]).toEqual([latest, latest]);
          expect((await appliedRows(a)).map((r) => r.version)).toEqual(allVersions);
          expect(await dumpSchema(a)).toBe(reference);
        } finally {
          await Promise.all([a.close(), b.close()]);
          await empty.drop();
        }
      }
    } else {
      // PGlite serialises the two on one instance; the second must still see the first's work.
      const db = await freshDb(0);
      const [ra, rb] = await Promise.all([migrate(db), migrate(db)]);
      expect([...ra.applied, ...rb.applied].sort((x, y) => x - y)).toEqual(allVersions);
      expect((await appliedRows(db)).map((r) => r.version)).toEqual(allVersions);
    }
  });

  it('refuses to run when an applied migration was changed afterwards', async () => {
    const db = await freshDb(3);
    const edited: Migration[] = migrations.map((m) =>
      m.version === 2 ? { ...m, sql: `${m.sql}\n-- an edit`, hash: 'e'.repeat(16) } : m);
    const error = await rejection(migrate(db, { migrations: edited }));
    expect(error).toBeInstanceOf(SchemaMismatchError);
    expect(error.message).toMatch(/migration 2 \(thread_event_log\) was changed after it was applied/);
    expect(await schemaVersion(db)).toBe(3); // nothing past the edited one was applied
  });
});

describe('checking the schema at startup', () => {
  const extra = (breaking: boolean): Migration => ({
    version: latest + 1, name: 'from_the_future', sql: 'create table agent_kit_future (x int)',
    hash: 'f'.repeat(16), breaking,
  });

  it('accepts the schema it knows', async () => {
    await expect(checkSchema(await freshDb())).resolves.toBeUndefined();
  });

  it('refuses a schema behind the library, telling to migrate', async () => {
    const db = await freshDb(latest - 1);
    const error = await rejection(checkSchema(db));
    expect(error).toBeInstanceOf(SchemaMismatchError);
    expect(error.message).toMatch(/Run `agent-kit migrate`/);
  });

  it('accepts a schema ahead by a non-breaking migration', async () => {
    const db = await freshDb();
    await migrate(db, { migrations: [...migrations, extra(false)] });
    await expect(checkSchema(db)).resolves.toBeUndefined();
  });

  it('refuses a schema ahead by a breaking migration, telling to upgrade', async () => {
    const db = await freshDb();
    await migrate(db, { migrations: [...migrations, extra(true)] });
    const error = await rejection(checkSchema(db));
    expect(error).toBeInstanceOf(SchemaMismatchError);
    expect(error.message).toMatch(/breaking at .*Upgrade agent-kit first/);
    // A library that stops before 0004 (breaking) must refuse today's schema too.
    await expect(checkSchema(db, migrations.slice(0, 3))).rejects.toBeInstanceOf(SchemaMismatchError);
  });
});

describe('the lease rollout window (ADR-0004: rollout is ordered)', () => {
  async function claimedRun(db: Db, owner: string) {
    const [turn] = await db.query<{ run_id: string }>(`select * from agent_kit_start_turn(null, 'u1', 'hi')`);
    const [lease] = await db.query<{ fence: number }>(
      `select fence from agent_kit_claim_run($1, $2, interval '30 seconds')`, [turn!.run_id, owner]);
    return { runId: turn!.run_id, fence: Number(lease!.fence) };
  }
  const assistantMessages = async (db: Db, runId: string) =>
    (await db.query(`select 1 from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId])).length;

  it('at 0003 closes without lease args (old code) but rejects a stale fence', async () => {
    const db = await freshDb(3);
    const { runId, fence } = await claimedRun(db, 'w1');
    const [stale] = await db.query<{ id: string | null }>(
      `select agent_kit_close_run($1, 'completed', '{"text":"x"}', 'w1', $2) as id`, [runId, fence - 1]);
    expect(stale!.id).toBeNull();
    expect(await assistantMessages(db, runId)).toBe(0);
    const [old] = await db.query<{ id: string | null }>(
      `select agent_kit_close_run($1, 'completed', '{"text":"x"}') as id`, [runId]);
    expect(old!.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(await assistantMessages(db, runId)).toBe(1);
  });

  it('after 0004 raises LeaseRequiredError (AK003) without lease args and closes with them', async () => {
    const db = await freshDb(3);
    expect(await migrate(db, { to: 4 })).toEqual({ applied: [4], version: 4 });
    const { runId, fence } = await claimedRun(db, 'w1');
    const error = await rejection(db.query(`select agent_kit_close_run($1, 'completed', '{"text":"x"}')`, [runId]));
    expect(error).toBeInstanceOf(LeaseRequiredError);
    expect(sqlState(error)).toBe('AK003');
    expect(await assistantMessages(db, runId)).toBe(0);
    const [closed] = await db.query<{ id: string | null }>(
      `select agent_kit_close_run($1, 'completed', '{"text":"x"}', 'w1', $2) as id`, [runId, fence]);
    expect(closed!.id).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('migrating a database that holds data', () => {
  it('applies each migration over the one before it, and the older data keeps working', async () => {
    const db = await freshDb(1);
    // Schema 1: a thread with a closed turn and a queued one, written the way 0001 code did.
    const [thread] = await db.query<{ id: string }>(`insert into agent_kit_threads (owner_id) values ('u1') returning id`);
    const threadId = thread!.id;
    const runs = await db.query<{ id: string }>(
      `insert into agent_kit_runs (thread_id, turn_no) values ($1, 1), ($1, 2) returning id`, [threadId]);
    const [first, second] = runs.map((r) => r.id) as [string, string];
    await db.query(`insert into agent_kit_messages (thread_id, run_id, role, content)
      values ($1, $2, 'user', '{"text":"one"}'), ($1, $3, 'user', '{"text":"two"}')`, [threadId, first, second]);
    await db.query(`select agent_kit_close_run($1, 'completed', '{"text":"answer one"}')`, [first]);

    expect(await migrate(db, { to: 2 })).toEqual({ applied: [2], version: 2 });
    const [counter] = await db.query<{ last_seq: number }>('select last_seq from agent_kit_threads where id = $1', [threadId]);
    expect(counter!.last_seq).toBe(0);
    const [seq] = await db.query<{ seq: number }>(
      `select agent_kit__append_event($1, $2, 0, 'note', '{}') as seq`, [threadId, second]);
    expect(seq!.seq).toBe(1);

    expect(await migrate(db, { to: 3 })).toEqual({ applied: [3], version: 3 });
    const [before] = await db.query<{ status: string; fence: number; attempts: number }>(
      'select status, fence, attempts from agent_kit_runs where id = $1', [second]);
    expect(before).toEqual({ status: 'queued', fence: 0, attempts: 0 });
    const [claim] = await db.query<{ fence: number }>(
      `select fence from agent_kit_claim_run($1, 'w1', interval '30 seconds')`, [second]);
    expect(claim!.fence).toBe(1);
    const [guarded] = await db.query<{ seq: number }>(
      `select agent_kit_append_event($1, 'w1', 1, 'note', '{}') as seq`, [second]);
    expect(guarded!.seq).toBe(2);

    expect(await migrate(db, { to: 4 })).toEqual({ applied: [4], version: 4 });
    const [closed] = await db.query<{ id: string | null }>(
      `select agent_kit_close_run($1, 'completed', '{"text":"answer two"}', 'w1', 1) as id`, [second]);
    expect(closed!.id).not.toBeNull();

    expect(await migrate(db)).toEqual({ applied: allVersions.slice(4), version: latest });
    const after = await db.query<{ turn_no: number; status: string; text: string }>(
      `select r.turn_no, r.status, m.content->>'text' as text from agent_kit_runs r
       join agent_kit_messages m on m.id = r.message_id where r.thread_id = $1 order by r.turn_no`, [threadId]);
    expect(after).toEqual([
      { turn_no: 1, status: 'completed', text: 'answer one' },
      { turn_no: 2, status: 'completed', text: 'answer two' },
    ]);
    const events = await db.query<{ seq: number }>(
      'select seq from agent_kit_thread_events where thread_id = $1 order by seq', [threadId]);
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3]);
  });
});

describe('sql/schema.sql', () => {
  it('is the dump of the fully migrated schema (else run `npm run db:dump` and commit it)', async () => {
    const expected = fs.readFileSync(schemaPath, 'utf8');
    const actual = schemaFileText(await dumpSchema(await freshDb()));
    expect(actual, 'sql/schema.sql is out of date: run `npm run db:dump` in packages/agent-kit').toBe(expected);
  });

  it('changes with the schema: the dump at 0003 differs from the dump at 0004', async () => {
    const at3 = await dumpSchema(await freshDb(3));
    const db = await freshDb(3);
    await migrate(db, { to: 4 });
    const at4 = await dumpSchema(db);
    expect(at4).not.toBe(at3);
    expect(at4).toContain('since migration 0004');
    expect(at3).toMatch(/^-- function agent_kit_close_run\(p_run_id uuid, p_status text, p_message jsonb, p_owner text, p_fence bigint\)$/m);
  });

  it.runIf(onPostgres)('is the same for a schema with another name', async () => {
    const empty = await createEmptyDatabase();
    const url = new URL(empty.url);
    url.searchParams.set('options', '-c search_path=agent_kit_elsewhere');
    const admin = openPgDb({ connectionString: empty.url, max: 1 });
    const other = openPgDb({ connectionString: url.toString(), max: 1 });
    try {
      await admin.exec('create schema agent_kit_elsewhere');
      await migrate(other);
      expect(await dumpSchema(other)).toBe(await dumpSchema(await freshDb()));
    } finally {
      await Promise.all([admin.close(), other.close()]);
      await empty.drop();
    }
  });
});
