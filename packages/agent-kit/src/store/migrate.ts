// Schema migrations: ordered, append-only plain SQL files in sql/migrations, each applied in one
// transaction that first records itself, under a transaction-scoped advisory lock so that two
// migrators at once (or a pooler in transaction mode) are safe. See ADR-0005.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError, SchemaMismatchError } from '../errors.js';
import type { Db, Tx } from './db.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  hash: string;
  /** First line `--! breaking`: older library versions cannot run against it. */
  breaking: boolean;
}

/** sql/migrations of this package, whether we run from src/ (tests) or dist/ (built). */
export const migrationsDir = fileURLToPath(new URL('../../sql/migrations/', import.meta.url));

/** Read and order the migration files; names are NNNN_snake_name.sql. */
export function loadMigrations(dir = migrationsDir): Migration[] {
  const files = fs.readdirSync(dir).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).sort();
  return files.map((file, index) => {
    const version = Number(file.slice(0, 4));
    if (version !== index + 1) throw new Error(`migration ${file} is out of sequence: expected ${index + 1}`);
    const sql = fs.readFileSync(path.join(dir, file), 'utf8');
    return {
      version,
      name: file.slice(5, -4),
      sql,
      hash: crypto.createHash('sha256').update(sql).digest('hex').slice(0, 16),
      breaking: sql.startsWith('--! breaking'),
    };
  });
}

const bootstrap = `
create table if not exists agent_kit_migrations (
  version int primary key,
  name text not null,
  hash text not null,
  breaking boolean not null default false,
  applied_at timestamptz not null default now()
)`;

// Both migrators take this lock first; it ends with the transaction, so no session state leaks.
const lockSql = `select pg_advisory_xact_lock(4280001)`;

export interface MigrateResult {
  applied: number[];
  version: number;
}

/** Apply pending migrations up to `to` (default: all). Safe to run twice or concurrently. */
export async function migrate(db: Db, options: { to?: number; migrations?: Migration[] } = {}) {
  const migrations = options.migrations ?? loadMigrations();
  const latest = migrations.length;
  const to = options.to ?? latest;
  if (!Number.isInteger(to) || to < 0 || to > latest) {
    throw new InvalidArgumentError(`--to must be a migration number from 0 to ${latest}, got ${options.to}`);
  }
  await db.transaction(async (tx) => {
    await tx.query(lockSql);
    await tx.exec(bootstrap);
  });
  const applied: number[] = [];
  for (const migration of migrations.slice(0, to)) {
    const didApply = await db.transaction(async (tx) => {
      await tx.query(lockSql);
      const done = await tx.query<{ hash: string }>(
        'select hash from agent_kit_migrations where version = $1',
        [migration.version],
      );
      if (done[0]) {
        checkHash(migration, done[0].hash);
        return false;
      }
      await tx.query('insert into agent_kit_migrations(version, name, hash, breaking) values ($1, $2, $3, $4)', [
        migration.version,
        migration.name,
        migration.hash,
        migration.breaking,
      ]);
      await tx.exec(migration.sql);
      return true;
    });
    if (didApply) applied.push(migration.version);
  }
  return { applied, version: await schemaVersion(db) } satisfies MigrateResult;
}

function checkHash(migration: Migration, storedHash: string) {
  if (storedHash !== migration.hash) {
    throw new SchemaMismatchError(
      `migration ${migration.version} (${migration.name}) was changed after it was applied ` +
        `(stored ${storedHash}, file ${migration.hash}). Migrations are append-only: add a new one.`,
    );
  }
}

/** The highest applied migration, 0 when none. */
export async function schemaVersion(db: Pick<Tx, 'query'>): Promise<number> {
  const exists = await db.query<{ ok: boolean }>(`select to_regclass('agent_kit_migrations') is not null as ok`);
  if (!exists[0]?.ok) return 0;
  const rows = await db.query<{ v: number | null }>('select max(version) as v from agent_kit_migrations');
  return Number(rows[0]?.v ?? 0);
}

/**
 * Refuse to run against a schema this library cannot use: behind ours (run `agent-kit migrate`),
 * or ahead of ours by a breaking migration (upgrade agent-kit first).
 */
export async function checkSchema(db: Db, migrations: Migration[] = loadMigrations()): Promise<void> {
  const known = migrations.length;
  const version = await schemaVersion(db);
  if (version === 0) {
    const elsewhere = await tablesElsewhere(db);
    if (elsewhere) throw new SchemaMismatchError(elsewhere);
  }
  if (version < known) {
    throw new SchemaMismatchError(
      `Schema is at ${pad(version)}; this agent-kit needs ${pad(known)}. Run \`agent-kit migrate\` first.`,
    );
  }
  if (version > known) {
    const rows = await db.query<{ version: number }>(
      'select version from agent_kit_migrations where version > $1 and breaking order by version limit 1',
      [known],
    );
    if (rows[0]) {
      throw new SchemaMismatchError(
        `Schema is at ${pad(version)} (breaking at ${pad(rows[0].version)}); this agent-kit knows ` +
          `${pad(known)}. Upgrade agent-kit first.`,
      );
    }
  }
}

const pad = (n: number) => String(n).padStart(4, '0');

/**
 * When this connection finds no tables but another schema holds them: where they are, and why
 * they are not seen (a search_path a pooler dropped, a role without the schema's grant). "Run
 * migrate" would there make a second, empty set in the schema this connection sees.
 */
async function tablesElsewhere(db: Db): Promise<string | null> {
  const rows = await db.query<{ schema: string; usable: boolean; current: string | null }>(
    `select n.nspname as schema, has_schema_privilege(n.oid, 'USAGE') as usable, current_schema() as current
     from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where c.relname = 'agent_kit_migrations' and c.relkind in ('r', 'p')
       and n.nspname is distinct from current_schema() and left(n.nspname, 8) <> 'pg_temp_'
     order by n.nspname`);
  const found = rows[0];
  if (!found) return null;
  const here = found.current === null ? 'no schema' : `schema ${found.current}`;
  return `agent-kit's tables are in schema ${found.schema}, but this connection reads ${here}: ` +
    (found.usable
      ? `put ${found.schema} first on the role's search_path (alter role … set search_path = ${found.schema})`
      : `this role has no usage on schema ${found.schema} (grant usage on schema ${found.schema} to …), and it must be first on the role's search_path`) +
    '. (`agent-kit migrate` with this connection makes a set of tables of its own here, if that is what you want.)';
}
