// Starting a turn: the user's message, its queued run and job, and their events, in one SQL call
// (agent_kit_start_turn). A retried call with the same client message id creates nothing new.
import { InvalidArgumentError } from '../errors.js';
import { isBlank } from '../blank.js';
import { uuidPattern, type Queryable } from '../store/db.js';
import { notifyThread } from '../store/notify-thread.js';

export interface StartTurnOptions {
  /** Omit to create a new thread owned by `ownerId`. */
  threadId?: string;
  ownerId: string;
  text: string;
  /** The client's id for this message: a retried POST finds the first one's run. */
  clientMessageId?: string;
  /**
   * Delay before the drain may take the job. A caller that runs the turn itself (the chat
   * request) gives itself a head start; the job is the fallback if it dies before claiming.
   */
  jobDelayMs?: number;
}

export interface StartTurnResult {
  threadId: string;
  messageId: string;
  runId: string;
  /** False when the client message id was seen before (nothing new was written). */
  created: boolean;
  /** 'turn' = a new run; 'input' = the message answered the thread's waiting run. */
  kind: 'turn' | 'input' | 'duplicate';
}

/**
 * The delay a caller that runs the turn itself (the chat request, `agent-kit chat`) gives the
 * turn's job: it claims the run at once, and a drain takes the job only if it died first.
 */
export const defaultHeadStartMs = 5_000;

/** Maximum accepted message size, in characters. */
export const maxMessageChars = 32_000;

/** A user message's text: a non-blank string of at most maxMessageChars (InvalidArgumentError otherwise). */
export function requireMessageText(text: unknown): asserts text is string {
  if (typeof text !== 'string' || isBlank(text)) throw new InvalidArgumentError('message text must be a non-empty string');
  if (text.length > maxMessageChars) {
    throw new InvalidArgumentError(`message is ${text.length} characters; the limit is ${maxMessageChars}`);
  }
}

/** An owner id: blank is no owner (SQL refuses '' but would take '   ', a thread nobody signs in as). */
export function requireOwner(ownerId: unknown): asserts ownerId is string {
  if (typeof ownerId !== 'string' || ownerId.trim() === '') throw new InvalidArgumentError('owner id must be a non-blank string');
}

/**
 * Store a user message and queue its turn.
 * @throws InvalidArgumentError for empty or oversized text; NotFoundError for a thread the owner does not have.
 */
export async function startTurn(db: Queryable, options: StartTurnOptions): Promise<StartTurnResult> {
  requireMessageText(options.text);
  requireOwner(options.ownerId);
  if (options.threadId !== undefined && !uuidPattern.test(options.threadId)) {
    throw new InvalidArgumentError(`thread id must be a uuid, got ${JSON.stringify(options.threadId.slice(0, 80))}`);
  }
  const rows = await db.query<{ thread_id: string; message_id: string; run_id: string; created: boolean; kind: StartTurnResult['kind'] }>(
    'select * from agent_kit_start_turn($1, $2, $3, $4, $5::interval)',
    [
      options.threadId ?? null,
      options.ownerId,
      options.text,
      options.clientMessageId ?? null,
      `${Math.max(0, Math.round(options.jobDelayMs ?? 0))} milliseconds`,
    ],
  );
  const row = rows[0]!;
  if (row.created) notifyThread(db, row.thread_id);
  return { threadId: row.thread_id, messageId: row.message_id, runId: row.run_id, created: row.created, kind: row.kind };
}
