// The agent-kit command line. Each command opens the configured store (DATABASE_URL, else the
// embedded folder), does one thing, closes it, and returns an exit code.
import { Command, CommanderError } from 'commander';
import { configFromEnv } from '../config.js';
import { coerceError } from '../errors.js';
import { openDb } from '../store/open.js';
import { migrate } from '../store/migrate.js';
import type { Db } from '../store/db.js';

/** Open the store from the environment, run `fn`, always close. */
export async function withDb<T>(fn: (db: Db) => Promise<T>): Promise<T> {
  const config = configFromEnv();
  const db = await openDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

export function buildProgram(): Command {
  const program = new Command('agent-kit')
    .description('Durable AI-agent chat turns on plain PostgreSQL')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });

  program
    .command('migrate')
    .description('apply pending schema migrations (all, or up to --to N)')
    .option('--to <n>', 'stop after migration N', (v) => {
      if (!/^\d+$/.test(v)) throw new CommanderError(2, 'agent-kit.invalidTo', `--to takes a migration number, got "${v}"`);
      return Number(v);
    })
    .action(async (options: { to?: number }) => {
      const result = await withDb((db) => migrate(db, { to: options.to }));
      console.log(
        result.applied.length
          ? `applied ${result.applied.map((v) => String(v).padStart(4, '0')).join(', ')}; schema at ${result.version}`
          : `nothing to apply; schema at ${result.version}`,
      );
    });
  return program;
}

/** Run the CLI; resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (raw) {
    if (raw instanceof CommanderError) {
      if (raw.exitCode !== 0 && !raw.message.startsWith('error:') && raw.code === 'agent-kit.invalidTo') {
        console.error(`error: ${raw.message}`);
      }
      return raw.exitCode;
    }
    const error = coerceError(raw);
    console.error(`agent-kit: ${error.message}`);
    return 1;
  }
}
