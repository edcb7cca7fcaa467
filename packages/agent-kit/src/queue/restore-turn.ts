// Restoring an earlier answer (ADR-0096): a reply that a regeneration replaced is put back in the
// conversation, in one SQL call (agent_kit_restore_turn). The run now in its place and every turn
// after that one are superseded by it; the conversation goes on from it.
import { InvalidArgumentError } from '../errors.js';
import { uuidPattern, type Queryable } from '../store/db.js';
import { notifyThread } from '../store/notify-thread.js';
import { requireOwner } from './start-turn.js';

export interface RestoreTurnOptions {
  /** The run whose reply is taken back: one a regeneration (or another restore) replaced. */
  runId: string;
  /** The owner of the run's thread. */
  ownerId: string;
}

export interface RestoreTurnResult {
  threadId: string;
  runId: string;
  /** The user message the restored reply answers, back with its run (under the client id the page has). */
  messageId: string;
  /** The runs it replaced, in turn order: the one that held its place, and every turn after it. */
  superseded: string[];
  /** False when the run was part of the conversation already: nothing was written. */
  restored: boolean;
}

/**
 * Put an earlier answer back: the run that holds its place in the conversation now (the reply
 * that regenerated it, or a later regeneration's) and every turn after that one are superseded by
 * it, and the thread's next turn follows it. Every turn of the thread must have ended. A run that
 * is in the conversation already is answered with `restored: false`, and nothing is written.
 * @throws InvalidArgumentError for a bad run id or owner; NotFoundError for a run not in a thread
 *   of the owner's; ConflictError while a turn is under way, and for a run that was not replaced
 *   as an answer but left out as a turn after one (it followed a reply that was replaced since).
 */
export async function restoreTurn(db: Queryable, options: RestoreTurnOptions): Promise<RestoreTurnResult> {
  if (typeof options.runId !== 'string' || !uuidPattern.test(options.runId)) {
    throw new InvalidArgumentError(`run id must be a uuid, got ${JSON.stringify(String(options.runId).slice(0, 80))}`);
  }
  requireOwner(options.ownerId);
  const rows = await db.query<{ thread_id: string; run_id: string; message_id: string; superseded: string[]; restored: boolean }>(
    'select * from agent_kit_restore_turn($1, $2)', [options.runId, options.ownerId],
  );
  const row = rows[0]!;
  if (row.restored) notifyThread(db, row.thread_id);
  return { threadId: row.thread_id, runId: row.run_id, messageId: row.message_id, superseded: row.superseded, restored: row.restored };
}
