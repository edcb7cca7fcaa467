// The embedded store: PGlite (Postgres compiled to WASM) in this process. File-backed in a folder,
// or in memory for tests. PGlite does not lock its folder, so we do: two processes would silently
// lose each other's commits.
import fs from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { coerceError, InvalidArgumentError, StoreLockedError } from '../errors.js';
import type { Db, Tx } from './db.js';
import { maintainEmbeddedStore, scheduleMaintenance, type MaintenanceOutcome } from './pglite-maintenance.js';

type PgliteLike = Pick<PGlite, 'query' | 'exec' | 'transaction' | 'listen' | 'close'>;

function normaliseRow(row: Record<string, unknown>) {
  for (const key in row) {
    if (typeof row[key] === 'bigint') row[key] = Number(row[key]);
  }
  return row;
}

async function run<T>(target: Pick<PGlite, 'query'>, sql: string, params?: readonly unknown[]) {
  try {
    const result = await target.query<Record<string, unknown>>(sql, params as unknown[] | undefined);
    return result.rows.map(normaliseRow) as T[];
  } catch (raw) {
    throw coerceError(raw);
  }
}

export interface PgliteDbOptions {
  /**
   * How often the store checks for tables to vacuum and analyze, as autovacuum would on a server
   * (PGlite has none; ADR-0050). Default 60,000 ms, autovacuum's naptime; 0 turns it off.
   */
  maintenanceEveryMs?: number;
  /** Told what each maintenance pass did, or how it failed. */
  onMaintenance?: (outcome: MaintenanceOutcome) => void;
}

export const defaultMaintenanceEveryMs = 60_000;

function maintenanceInterval(options: PgliteDbOptions): number {
  const everyMs = options.maintenanceEveryMs ?? defaultMaintenanceEveryMs;
  // Node runs a timer longer than 2^31 - 1 ms after 1 ms: a pass would follow a pass at once.
  if (!Number.isFinite(everyMs) || everyMs < 0 || everyMs > 2_147_483_647) {
    throw new InvalidArgumentError(
      `maintenanceEveryMs must be 0 (off) or a number of milliseconds up to 2147483647, got ${everyMs}`,
    );
  }
  return everyMs;
}

/** Wrap an open PGlite instance as a Db. `onClose` runs after the instance closes. */
export function wrapPglite(pglite: PgliteLike, onClose?: () => void, options: PgliteDbOptions = {}): Db {
  let closed = false;
  const everyMs = maintenanceInterval(options);
  const db: Db = {
    kind: 'pglite',
    query: (sql, params) => run(pglite, sql, params),
    async exec(sql) {
      try {
        await pglite.exec(sql);
      } catch (raw) {
        throw coerceError(raw);
      }
    },
    async transaction(fn) {
      try {
        return await pglite.transaction((tx) => {
          const q: Tx = {
            query: (sql, params) => run(tx, sql, params),
            exec: async (sql) => {
              await tx.exec(sql);
            },
          };
          return fn(q);
        });
      } catch (raw) {
        throw coerceError(raw);
      }
    },
    async listen(channel, onNotify) {
      const unlisten = await pglite.listen(channel, onNotify);
      return async () => {
        if (!closed) await unlisten();
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      await maintenance?.stop();
      await pglite.close();
      onClose?.();
    },
  };
  const maintenance = everyMs > 0
    ? scheduleMaintenance(() => maintainEmbeddedStore(db), everyMs, options.onMaintenance)
    : undefined;
  return db;
}

/**
 * PGlite's own start parameters, and no startup-progress timer: Postgres arms it (every
 * `log_startup_progress_interval`, 10 s) while it recovers a folder that was not shut down (a
 * killed process's), PGlite never disarms it, and a Node process that did not close the store
 * then never exited. Unclosed, it now exits at most 10 s after its last statement, when the
 * backend's statistics timer has fired.
 */
function startParams(): string[] {
  return [...PGlite.defaultStartParams, '-c', 'log_startup_progress_interval=0'];
}

/** Open (creating if needed) an embedded database in `dataDir`, or in memory when undefined. */
export async function openPgliteDb(dataDir?: string, options: PgliteDbOptions = {}): Promise<Db> {
  maintenanceInterval(options); // a bad option fails before the store is opened and locked
  if (!dataDir) return wrapPglite(await PGlite.create(), undefined, options);
  fs.mkdirSync(dataDir, { recursive: true });
  const release = lockFolder(dataDir);
  try {
    const pglite = await PGlite.create(dataDir, { startParams: startParams() });
    return wrapPglite(pglite, release, options);
  } catch (raw) {
    release();
    throw coerceError(raw);
  }
}

/**
 * Take an exclusive lock on the folder with an O_EXCL lock file holding our pid. A lock whose
 * pid is no longer alive is stale (its process was killed) and is taken over.
 */
export function lockFolder(dataDir: string): () => void {
  const lockPath = path.join(path.dirname(path.resolve(dataDir)), `${path.basename(dataDir)}.lock`);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = fs.openSync(lockPath, 'wx');
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      const release = () => {
        try {
          if (fs.readFileSync(lockPath, 'utf8') === String(process.pid)) fs.unlinkSync(lockPath);
        } catch {
          // already gone
        }
        process.off('exit', release);
      };
      process.on('exit', release);
      return release;
    } catch (raw) {
      if ((raw as NodeJS.ErrnoException).code !== 'EEXIST') throw raw;
      const holder = Number(fs.readFileSync(lockPath, 'utf8').trim());
      if (holder && isAlive(holder)) {
        throw new StoreLockedError(
          `The embedded store ${dataDir} is in use by process ${holder}. ` +
            'PGlite allows one process per folder: stop that process, or set DATABASE_URL to use a Postgres server.',
        );
      }
      fs.rmSync(lockPath, { force: true }); // stale: its process is gone
    }
  }
  throw new StoreLockedError(`could not lock ${dataDir}`);
}

function isAlive(pid: number) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (raw) {
    return (raw as NodeJS.ErrnoException).code === 'EPERM';
  }
}
