// The agent-kit command line. Each command opens the configured store (DATABASE_URL, else the
// embedded folder), does one thing, closes it, and returns an exit code. Startup loads only
// commander and the command registrations: the store, config (zod), the turn runtime and the
// model are imported by the action that uses them, so `--help` and a usage error stay cheap.
import fs from 'node:fs';
import { Command, CommanderError } from 'commander';
import { coerceError } from '../errors.js';
import { uuidPattern, type Db } from '../store/db.js';
import type { MaintenanceOutcome } from '../store/pglite-maintenance.js';
import { logToStderr } from './commands/with-runtime.js';

/**
 * Open the store from the environment, run `fn`, always close. The schema is checked first (a
 * server that was never migrated says "run `agent-kit migrate` first", not "relation does not
 * exist"), except for `migrate` itself (`anySchema`). The embedded store is migrated first, as
 * `createRuntime` migrates it for the commands that run turns: one process owns its folder, so
 * `runs` on a fresh folder answers as `chat` does, instead of asking for a migrate `chat` skips.
 */
export async function withDb<T>(fn: (db: Db) => Promise<T>, options: { anySchema?: boolean } = {}): Promise<T> {
  const [{ configFromEnv }, { openDb, storeOptionsFrom }, { checkSchema, migrate }, { flushNotifications }] = await Promise.all([
    import('../config.js'), import('../store/open.js'), import('../store/migrate.js'), import('../store/notify-thread.js'),
  ]);
  const config = configFromEnv();
  const db = await openDb({ ...storeOptionsFrom(config), embedded: { onMaintenance }, log: logToStderr });
  try {
    if (!options.anySchema && !config.databaseUrl) await migrate(db);
    if (!options.anySchema) await checkSchema(db);
    return await fn(db);
  } finally {
    await flushNotifications(db); // the viewers of what `fn` wrote hear it now, not at their next poll
    await db.close();
  }
}

/** A failed vacuum pass of the embedded store (ADR-0050), e.g. in a long `agent-kit worker`. */
function onMaintenance(outcome: MaintenanceOutcome) {
  if ('error' in outcome) logToStderr({ msg: 'embedded store: maintenance failed', error: outcome.error.message });
}

/** An argument or option parser for a uuid: anything else is a usage error (exit 2) naming `what`. */
export function uuidArgument(what: string): (value: string) => string {
  return (value) => {
    if (!uuidPattern.test(value)) {
      throw new CommanderError(2, 'agent-kit.invalidArgument', `${what} must be a uuid, got "${value}"`);
    }
    return value;
  };
}

/**
 * Commands live one per file in ./commands/, each exporting `register(program)`; they are loaded
 * in name order, so adding a command touches no shared file. Every file there is loaded at
 * startup, so a command imports what its action needs inside the action (`await import`).
 */
async function registerCommands(program: Command) {
  const dir = new URL('./commands/', import.meta.url);
  const files = fs.readdirSync(dir).filter((f) => /\.(js|ts)$/.test(f) && !/\.(test|d)\.(js|ts)$/.test(f)).sort();
  for (const file of files) {
    const mod = (await import(new URL(file, dir).href)) as { register?: (p: Command) => void };
    mod.register?.(program);
  }
}

/** The package's version, from its package.json (two folders up from src/cli and dist/cli). */
function packageVersion(): string {
  return (JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

export async function buildProgram(): Promise<Command> {
  const program = new Command('agent-kit')
    .description('Durable AI-agent chat turns on plain PostgreSQL')
    .version(packageVersion(), '-V, --version', 'print the version of agent-kit')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
  await registerCommands(program);

  return program;
}

/**
 * What a command does when its reader closes stdout (EPIPE): exit 0 by default. A command with
 * work under way that must not be dropped (`chat`'s turn) sets its own while it runs.
 */
export const stdoutClosed = { handle: (): void => process.exit(0) };

/** Run the CLI; resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  // `agent-kit events … | head` closes our stdout early: that is the reader's choice, not a failure.
  let closed = false;
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (closed) return; // (writes after it fail too)
    if (error.code !== 'EPIPE') throw error;
    closed = true;
    stdoutClosed.handle();
  });
  const program = await buildProgram();
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (raw) {
    if (raw instanceof CommanderError) {
      if (raw.exitCode !== 0 && !raw.message.startsWith('error:') && raw.code.startsWith('agent-kit.')) {
        console.error(`error: ${raw.message}`);
      }
      return raw.exitCode;
    }
    const error = coerceError(raw);
    console.error(`error: ${error.message}`);
    return 1;
  }
}
