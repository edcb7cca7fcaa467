// `agent-kit enqueue "text" [--thread ID] [--owner USER]`: store a user message and queue its turn
// for the drain (a new thread per call unless --thread is given). Prints the ids as JSON.
import type { Command } from 'commander';
import { uuidArgument, withDb } from '../main.js';

/** The owner of threads created from the command line when --owner is not given. */
export const defaultCliOwner = 'local';

export function register(program: Command) {
  program
    .command('enqueue')
    .description('queue a turn for the drain; prints threadId, messageId and runId')
    .argument('<text>', 'the user message')
    .option('--thread <id>', 'add the turn to this thread (default: a new thread)', uuidArgument('--thread'))
    .option('--owner <user>', 'the thread owner', defaultCliOwner)
    .action(async (text: string, options: { thread?: string; owner: string }) => {
      const { startTurn } = await import('../../queue/start-turn.js');
      const result = await withDb((db) => startTurn(db, { threadId: options.thread, ownerId: options.owner, text }));
      console.log(JSON.stringify({
        threadId: result.threadId, messageId: result.messageId, runId: result.runId, kind: result.kind,
      }));
    });
}
