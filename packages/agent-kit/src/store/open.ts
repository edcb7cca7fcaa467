// Open the configured store: a Postgres server when a URL is given, else the embedded PGlite
// folder (./.agent-kit/ by default), or memory for tests.
import path from 'node:path';
import type { AgentKitConfig } from '../config.js';
import type { Db } from './db.js';
import { openPgDb, type PgDbOptions } from './pg-driver.js';
import { openPgliteDb, type PgliteDbOptions } from './pglite-driver.js';

export interface OpenDbOptions {
  /** postgres://… ; when absent the embedded store is used. */
  databaseUrl?: string;
  /** Folder of the embedded store; `memory` for an in-memory database. */
  dataDir?: string;
  /** Pool size on Postgres. */
  poolMax?: number;
  /** Where LISTEN connects on Postgres, when not databaseUrl (see PgDbOptions.listenConnectionString). */
  listenUrl?: string;
  /** Told of what the store notices on its own, such as a LISTEN that hears nothing (Postgres). */
  log?: PgDbOptions['log'];
  /** TLS to Postgres when the CA is given in code (see PgDbOptions.ssl). */
  ssl?: PgDbOptions['ssl'];
  /** The embedded store's own vacuum and analyze (ADR-0050); a server has autovacuum. */
  embedded?: PgliteDbOptions;
}

/** The embedded store's default folder, relative to the working directory. */
export const defaultDataDir = '.agent-kit';

/**
 * The store's settings in `config` (DATABASE_URL, AGENT_KIT_DATA_DIR, AGENT_KIT_POOL_MAX,
 * AGENT_KIT_LISTEN_URL) as openDb takes them: every place that opens the configured store spreads
 * this, so a setting added to the config reaches each of them (the reference app once dropped the
 * pool size by listing the fields itself).
 */
export function storeOptionsFrom(config: AgentKitConfig): OpenDbOptions {
  return { databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolMax: config.poolMax, listenUrl: config.listenUrl };
}

/** Open the store described by `options` (see OpenDbOptions). */
export async function openDb(options: OpenDbOptions = {}): Promise<Db> {
  if (options.databaseUrl) {
    return openPgDb({
      connectionString: options.databaseUrl, max: options.poolMax, ssl: options.ssl,
      listenConnectionString: options.listenUrl, log: options.log,
    });
  }
  if (options.dataDir === 'memory') return openPgliteDb(undefined, options.embedded);
  return openPgliteDb(path.join(options.dataDir ?? defaultDataDir, 'pgdata'), options.embedded);
}
