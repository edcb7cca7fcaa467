// `agent-kit resolve-effect RUN_ID KEY --happened|--did-not-happen [--note TEXT] [--by NAME]`:
// record what an operator found in the outside system for an effect in doubt, so that
// `agent-kit runs --in-doubt` stops listing it, the thread (the chat) is told, and so is a run
// that meets the effect again.
import { type Command, CommanderError, Option } from 'commander';
import type { Db } from '../../store/db.js';
import { uuidArgument, withDb } from '../main.js';

export interface ResolveOptions {
  happened?: boolean;
  didNotHappen?: boolean;
  note?: string;
  by: string;
  json?: boolean;
}

export function register(program: Command) {
  program
    .command('resolve-effect')
    .description('record whether an effect in doubt happened, after checking the outside system by its key')
    .argument('<run-id>', 'the run id (a uuid)', uuidArgument('RUN_ID'))
    .argument('<key>', 'the effect key (agent-kit show lists it)')
    .option('--happened', 'the outside system did it: the effect becomes completed')
    .option('--did-not-happen', 'the outside system has no trace of it: the effect becomes failed')
    .option('--note <text>', 'what was checked, kept with the verdict')
    .addOption(new Option('--by <name>', 'who decided').default(process.env.USER || 'operator', '$USER, else "operator"'))
    .option('--json', 'print the effect as JSON, as POST /api/runs/:id/resolve-effect answers')
    .action(async (runId: string, key: string, options: ResolveOptions) => {
      const happened = resolveVerdict(options);
      process.stdout.write(await withDb((db) => formatResolveEffectCommand(db, runId, key, happened, options)));
    });
}

/**
 * Record the verdict and say what the effect is now.
 * @throws NotFoundError for no such effect, ConflictError when it is not in doubt.
 */
export async function formatResolveEffectCommand(
  db: Db, runId: string, key: string, happened: boolean, options: Pick<ResolveOptions, 'by' | 'note' | 'json'>,
): Promise<string> {
  const { resolveEffect } = await import('../../effect-ledger/index.js');
  const effect = await resolveEffect(db, { runId, key, happened, by: options.by, note: options.note });
  if (options.json) {
    return `${JSON.stringify({ runId, key: effect.key, tool: effect.tool, status: effect.status, result: effect.result })}\n`;
  }
  return `effect ${effect.key} (${effect.tool}) is now ${effect.status}\n`;
}

/** Exactly one of --happened and --did-not-happen. */
export function resolveVerdict(options: ResolveOptions): boolean {
  if (Boolean(options.happened) === Boolean(options.didNotHappen)) {
    throw new CommanderError(2, 'agent-kit.invalidArgument', 'give exactly one of --happened and --did-not-happen');
  }
  return Boolean(options.happened);
}
