// The store: the Db port, its two drivers, migrations and the clock control used by tests.
export type { Db, DbKind, Queryable, Tx } from './db.js';
export { toNumber } from './db.js';
export { openPgDb, type PgDbOptions } from './pg-driver.js';
export { openPgliteDb, wrapPglite, lockFolder, defaultMaintenanceEveryMs, type PgliteDbOptions } from './pglite-driver.js';
export { maintainEmbeddedStore, type MaintenanceOutcome, type MaintenanceReport } from './pglite-maintenance.js';
export { openDb, defaultDataDir, storeOptionsFrom, type OpenDbOptions } from './open.js';
export { migrate, loadMigrations, schemaVersion, checkSchema, migrationsDir, type Migration } from './migrate.js';
export { setFakeNow, clearFakeNow, advanceFakeNow, dbNow } from './clock.js';
export { dumpSchema, schemaFileText, schemaFileHeader } from './dump-schema.js';
export { notifyThread, notifyRunThread } from './notify-thread.js';
