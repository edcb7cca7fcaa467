// `agent-kit enqueue "text" [--thread ID] [--owner USER]`: store a user message and queue its turn
// for the drain (a new thread per call unless --thread is given). Prints the ids as JSON.
import type { Command } from 'commander';
import { NotFoundError } from '../../errors.js';
import { readThreadOwner } from '../../event-log/read-threads.js';
import type { Queryable } from '../../store/db.js';
import { uuidArgument, withDb } from '../main.js';

/** The owner of threads created from the command line when --owner is not given. */
export const defaultCliOwner = 'local';

/** The --owner option of the commands that add a turn: by default, whoever owns the thread. */
export const ownerOption = ['--owner <user>', `the thread's owner (default: the owner of --thread's thread, else "${defaultCliOwner}")`] as const;

/**
 * Whose turn the command adds: --owner, else the thread's owner (the command line is the
 * operator's, who continues a user's thread as that user), else the default for a new thread.
 * @throws NotFoundError naming the thread's owner when --owner is another user.
 */
export async function cliTurnOwner(db: Queryable, options: { thread?: string; owner?: string }): Promise<string> {
  if (options.thread === undefined) return options.owner ?? defaultCliOwner;
  const owner = await readThreadOwner(db, options.thread);
  if (owner === null) throw new NotFoundError(`thread ${options.thread} not found`);
  if (options.owner !== undefined && options.owner !== owner) {
    throw new NotFoundError(`thread ${options.thread} is ${owner}'s, not ${options.owner}'s: leave --owner out, or pass --owner ${owner}`);
  }
  return owner;
}

export function register(program: Command) {
  program
    .command('enqueue')
    .description('queue a turn for the drain; prints threadId, messageId, runId and kind')
    .argument('<text>', 'the user message')
    .option('--thread <id>', 'add the turn to this thread (default: a new thread)', uuidArgument('--thread'))
    .option(...ownerOption)
    .action(async (text: string, options: { thread?: string; owner?: string }) => {
      const { startTurn } = await import('../../queue/start-turn.js');
      const result = await withDb(async (db) => startTurn(db, { threadId: options.thread, ownerId: await cliTurnOwner(db, options), text }));
      console.log(JSON.stringify({
        threadId: result.threadId, messageId: result.messageId, runId: result.runId, kind: result.kind,
      }));
    });
}
