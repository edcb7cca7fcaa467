// `npm run db:dump`: apply every migration to a fresh in-memory PGlite and write the resulting
// schema to sql/schema.sql, so a schema change shows up as a readable diff in review.
// `--check` writes nothing and exits 1 when sql/schema.sql is out of date (for CI).
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dumpSchema, schemaFileText } from '../src/store/dump-schema.js';
import { migrate } from '../src/store/migrate.js';
import { openPgliteDb } from '../src/store/pglite-driver.js';

const schemaPath = fileURLToPath(new URL('../sql/schema.sql', import.meta.url));

async function main(): Promise<number> {
  const db = await openPgliteDb();
  try {
    const { version } = await migrate(db);
    const text = schemaFileText(await dumpSchema(db));
    if (process.argv.includes('--check')) {
      const current = fs.existsSync(schemaPath) ? fs.readFileSync(schemaPath, 'utf8') : '';
      if (current === text) return 0;
      console.error('sql/schema.sql is out of date: run `npm run db:dump` and commit it.');
      return 1;
    }
    fs.writeFileSync(schemaPath, text);
    console.log(`wrote sql/schema.sql (schema version ${version})`);
    return 0;
  } finally {
    await db.close();
  }
}

process.exitCode = await main();
