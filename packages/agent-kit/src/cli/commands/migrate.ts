// `agent-kit migrate [--to N]`: apply pending migrations, each in its own transaction.
import { type Command, CommanderError } from 'commander';
import { InvalidArgumentError } from '../../errors.js';
import { withDb } from '../main.js';

export function register(program: Command) {
  program
    .command('migrate')
    .description('apply pending schema migrations (all, or up to --to N)')
    .option('--to <n>', 'stop after migration N', (v) => {
      if (!/^\d+$/.test(v)) throw new CommanderError(2, 'agent-kit.invalidArgument', `--to takes a migration number, got "${v}"`);
      return Number(v);
    })
    .action(async (options: { to?: number }) => {
      const [{ migrate }, { configFromEnv }, { defaultDataDir }, { currentSchema, describeStore }] = await Promise.all([
        import('../../store/migrate.js'), import('../../config.js'), import('../../store/open.js'), import('./status.js'),
      ]);
      const config = configFromEnv();
      let store = '';
      const result = await withDb(async (db) => {
        const migrated = await migrate(db, { to: options.to });
        // Said after the version: a deploy log shows where the tables went (a search_path a pooler
        // dropped made a second set in public), and a DATABASE_URL that was not set.
        store = describeStore(config, defaultDataDir, config.databaseUrl ? await currentSchema(db) : undefined);
        return migrated;
      }, { anySchema: true }).catch((raw: unknown) => {
        // A number past the latest migration is a bad option value, like a malformed one.
        if (raw instanceof InvalidArgumentError) throw new CommanderError(2, 'agent-kit.invalidArgument', raw.message);
        throw raw;
      });
      const pad = (v: number) => String(v).padStart(4, '0');
      console.log(
        (result.applied.length
          ? `applied ${result.applied.map(pad).join(', ')}; schema at ${pad(result.version)}`
          : options.to !== undefined && options.to < result.version
            ? `nothing to apply; schema at ${pad(result.version)}, already past --to ${options.to} (migrations are never undone)`
            : `nothing to apply; schema at ${pad(result.version)}`) + ` (${store})`,
      );
    });
}
