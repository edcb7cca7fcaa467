// A test file's fresh database and route handlers over the real turn engine and the scripted
// model (`tokens` words a reply), with the header sign-in of the HTTP tests.
import { createHandlers, type Handlers } from '../../src/http/handlers.js';
import type { Db } from '../../src/store/db.js';
import { headerAuth } from './http-harness.js';
import { openTestDb } from './test-db.js';
import { makeRuntime } from './turn-kit.js';

export interface RealEngine {
  db: Db;
  handlers: Handlers;
}

export async function openRealEngine(tokens: number): Promise<RealEngine> {
  const db = await openTestDb();
  return { db, handlers: createHandlers({ rt: makeRuntime(db, { tokens }), authenticate: headerAuth }) };
}

/** Let the segments the handlers started finish, then close the database. */
export async function closeRealEngine(engine: RealEngine | undefined): Promise<void> {
  if (!engine) return;
  await engine.handlers.segments.settle();
  await engine.db.close();
}
