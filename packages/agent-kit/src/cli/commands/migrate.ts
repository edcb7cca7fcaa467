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
      const { migrate } = await import('../../store/migrate.js');
      const result = await withDb((db) => migrate(db, { to: options.to }), { anySchema: true }).catch((raw: unknown) => {
        // A number past the latest migration is a bad option value, like a malformed one.
        if (raw instanceof InvalidArgumentError) throw new CommanderError(2, 'agent-kit.invalidArgument', raw.message);
        throw raw;
      });
      const pad = (v: number) => String(v).padStart(4, '0');
      console.log(
        result.applied.length
          ? `applied ${result.applied.map(pad).join(', ')}; schema at ${pad(result.version)}`
          : options.to !== undefined && options.to < result.version
            ? `nothing to apply; schema at ${pad(result.version)}, already past --to ${options.to} (migrations are never undone)`
            : `nothing to apply; schema at ${pad(result.version)}`,
      );
    });
}
