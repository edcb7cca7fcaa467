// Regenerating a reply (ADR-0091): the turn of a user message asked again, as a new run that
// answers the same message (or its edit), in one SQL call (agent_kit_regenerate_turn). The turn it
// replaces and every turn after it are superseded: kept, but out of the conversation and the
// thread's reads.
import { InvalidArgumentError } from '../errors.js';
import { uuidPattern, type Queryable } from '../store/db.js';
import { notifyThread } from '../store/notify-thread.js';
import { requireMessageText, requireOwner } from './start-turn.js';

export interface RegenerateTurnOptions {
  threadId: string;
  ownerId: string;
  /** The user message whose reply is asked again: the client id it was sent with, or its stored id. */
  message: string;
  /**
   * The message's text as the caller has it. Another text edits the message: the new run answers
   * a new message of that text, under the old one's client id, and the old one stays with its turn.
   */
  text?: string;
  /** As startTurn's: a caller that runs the turn itself gives itself a head start on the drain. */
  jobDelayMs?: number;
}

export interface RegenerateTurnResult {
  threadId: string;
  /** The user message the new turn answers: the one named, moved to the new run, or its edit. */
  messageId: string;
  /** The new run. */
  runId: string;
  /** The runs it replaced, in turn order: the message's old turn and every turn after it. */
  superseded: string[];
}

/**
 * Ask a user message's turn again (or with `text`, its edit): a new run answers it, and its old
 * turn and every later one are superseded. Every turn from the message's on must have ended.
 * @throws InvalidArgumentError for bad ids or a blank or oversized text; NotFoundError for a
 *   thread the owner does not have or a message not in it; ConflictError while a turn from it on
 *   is under way, for a message whose turn an earlier regeneration replaced, or for an edit of a
 *   message that answered its turn's question.
 */
export async function regenerateTurn(db: Queryable, options: RegenerateTurnOptions): Promise<RegenerateTurnResult> {
  if (typeof options.threadId !== 'string' || !uuidPattern.test(options.threadId)) {
    throw new InvalidArgumentError(`thread id must be a uuid, got ${JSON.stringify(String(options.threadId).slice(0, 80))}`);
  }
  requireOwner(options.ownerId);
  if (typeof options.message !== 'string' || options.message === '') {
    throw new InvalidArgumentError('the message to regenerate must be a client message id or a message id');
  }
  if (options.text !== undefined) requireMessageText(options.text);
  const rows = await db.query<{ thread_id: string; message_id: string; run_id: string; superseded: string[] }>(
    'select * from agent_kit_regenerate_turn($1, $2, $3, $4::interval, $5)',
    [
      options.threadId,
      options.ownerId,
      options.message,
      `${Math.max(0, Math.round(options.jobDelayMs ?? 0))} milliseconds`,
      options.text ?? null,
    ],
  );
  const row = rows[0]!;
  notifyThread(db, row.thread_id);
  // (uuid[] comes as an array from both stores.)
  return { threadId: row.thread_id, messageId: row.message_id, runId: row.run_id, superseded: row.superseded };
}
