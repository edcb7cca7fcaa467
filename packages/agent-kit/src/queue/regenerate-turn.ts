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
  /**
   * The run whose reply the caller saw and asks again (ADR-0092). Once a call replaced it, the
   * same call again (a lost response, another page asking the same reply again) returns the run
   * that replaced it, `created: false`, and writes nothing; a reply replaced otherwise since is a
   * ConflictError. Without it, every call regenerates.
   */
  replaces?: string;
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
  /** False when `replaces` had been replaced by this regeneration already: nothing was written. */
  created: boolean;
}

/**
 * Ask a user message's turn again (or with `text`, its edit): a new run answers it, and its old
 * turn and every later one are superseded. Every turn from the message's on must have ended.
 * @throws InvalidArgumentError for bad ids or a blank or oversized text; NotFoundError for a
 *   thread the owner does not have, a message or a `replaces` run not in it; ConflictError while
 *   a turn from it on is under way, for a message whose turn an earlier regeneration replaced,
 *   for an edit of a message that answered its turn's question, or for a `replaces` run that is
 *   no longer the message's reply (and was not replaced by this regeneration).
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
  if (options.replaces !== undefined && (typeof options.replaces !== 'string' || !uuidPattern.test(options.replaces))) {
    throw new InvalidArgumentError(`the run a regeneration replaces must be a run id, got ${JSON.stringify(String(options.replaces).slice(0, 80))}`);
  }
  const rows = await db.query<{ thread_id: string; message_id: string; run_id: string; superseded: string[]; created: boolean }>(
    'select * from agent_kit_regenerate_turn($1, $2, $3, $4::interval, $5, $6)',
    [
      options.threadId,
      options.ownerId,
      options.message,
      `${Math.max(0, Math.round(options.jobDelayMs ?? 0))} milliseconds`,
      options.text ?? null,
      options.replaces ?? null,
    ],
  );
  const row = rows[0]!;
  if (row.created) notifyThread(db, row.thread_id);
  // (uuid[] comes as an array from both stores.)
  return { threadId: row.thread_id, messageId: row.message_id, runId: row.run_id, superseded: row.superseded, created: row.created };
}
