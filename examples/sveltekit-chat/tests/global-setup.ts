// Once per run: on the embedded store, make one migrated PGlite folder that every test file
// copies, since initdb plus migrations takes seconds and a copy a fraction of one. On Postgres
// each file creates its own database instead (see harness.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate, openDb } from 'agent-kit';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A migrated embedded store (its `pgdata/` inside), or '' on Postgres. */
    pgliteTemplateDir: string;
  }
}

export default async function setup(project: TestProject) {
  if (process.env.DATABASE_URL) {
    project.provide('pgliteTemplateDir', '');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'sveltekit-chat-template-'));
  const db = await openDb({ dataDir: dir });
  await migrate(db);
  await db.close();
  project.provide('pgliteTemplateDir', dir);
  return () => rmSync(dir, { recursive: true, force: true });
}
