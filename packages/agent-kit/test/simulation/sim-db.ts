// A simulated worker's door to the database: the Db port, but every statement and transaction
// waits as a pending op until the scheduler picks it, then runs on the real (shared) database
// outside the worker's virtual-time context. A transaction is one op: PGlite serialises them anyway.
import { AsyncResource } from 'node:async_hooks';
import type { Db, Tx } from '../../src/store/db.js';
import { labelOf, type Scheduler } from './scheduler.js';
import { outsideWorkers } from './virtual-time.js';

function directTx(tx: Tx): Tx {
  return {
    query: (sql, params) => outsideWorkers(() => tx.query(sql, params)),
    exec: (sql) => outsideWorkers(() => tx.exec(sql)),
  };
}

/** The Db that worker `workerId` sees. */
export function simulatedDb(real: Db, scheduler: Scheduler, workerId: number): Db {
  return {
    kind: real.kind,
    query<T>(sql: string, params?: readonly unknown[]) {
      return scheduler.register(workerId, { kind: 'query', label: labelOf(sql), sql, params },
        () => outsideWorkers(() => real.query<T>(sql, params)));
    },
    exec(sql) {
      return scheduler.register(workerId, { kind: 'query', label: labelOf(sql), sql },
        () => outsideWorkers(() => real.exec(sql)));
    },
    transaction<T>(fn: (tx: Tx) => Promise<T>) {
      // The body is worker code: keep it in the worker's context while the statements escape it.
      const body = AsyncResource.bind(fn);
      return scheduler.register(workerId, { kind: 'transaction', label: 'transaction' },
        () => outsideWorkers(() => real.transaction((tx) => body(directTx(tx)))));
    },
    // Simulated workers poll; LISTEN is outside the protocol under test.
    async listen() {
      return async () => {};
    },
    async close() {},
  };
}
