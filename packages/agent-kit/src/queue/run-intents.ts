// What a person asks of a run from outside its segment: cancel it, take it over, release it,
// or, holding it, answer in its place.
// Each is one SQL function that decides under the run's row lock and appends the thread's event
// (agent_kit_request_cancel, agent_kit_takeover_run, agent_kit_release_run); these wrappers check
// the arguments, wake the thread's viewers after the commit, and say what the call did. The HTTP
// routes and the command line both go through them (callIntent: the answer to a question too).
import { ConflictError, InvalidArgumentError } from '../errors.js';
import { closedStatuses, type RunStatus } from '../lease/run-row.js';
import { uuidPattern, type Queryable } from '../store/db.js';
import { notifyThread } from '../store/notify-thread.js';
import { requireMessageText } from './start-turn.js';

export interface RunIntentResult {
  runId: string;
  /**
   * The run's status after the call: `waiting_takeover` for a run taken over at once, `queued`
   * for one released. `running` when the running segment is yet to see the intent, at its next
   * write (a cancel closes the run, a takeover parks it); a cancelled run that was not running
   * keeps its status until a segment closes it (its job is due now).
   */
  status: RunStatus;
}

function requireRunId(runId: unknown): string {
  if (typeof runId !== 'string' || !uuidPattern.test(runId)) {
    throw new InvalidArgumentError(`run id must be a uuid, got ${JSON.stringify(String(runId).slice(0, 80))}`);
  }
  return runId;
}

/**
 * Call a SQL function that decides on the run and appends to its thread's log (`call` takes the
 * run id as $1 and `params` as $2, …), then wake the thread's viewers: the status it returns.
 * The HTTP route that answers a question uses it too.
 */
export async function callIntent(db: Queryable, call: string, runId: string, params: unknown[]): Promise<RunStatus> {
  // A run's thread never changes: read in the same statement, it needs no lock.
  const rows = await db.query<{ status: RunStatus; thread_id: string }>(
    `select ${call} as status, (select thread_id from agent_kit_runs where id = $1) as thread_id`, [runId, ...params]);
  notifyThread(db, rows[0]!.thread_id);
  return rows[0]!.status;
}

/**
 * Ask the run to stop: stored once (`cancel-requested`), it closes `aborted` with the text it had
 * (as of `shownSeq`, the last event the asking viewer had shown, when given). A running segment
 * closes it at its next write; any other open run gets a job due now, and the segment that takes
 * it closes it without calling the model. Pass the Db, not an open transaction.
 * @throws InvalidArgumentError for a bad id or seq; NotFoundError; ConflictError for a run that
 *   has closed already (nothing is stored).
 */
export async function cancelRun(db: Queryable, options: { runId: string; shownSeq?: number }): Promise<RunIntentResult> {
  const runId = requireRunId(options.runId);
  const { shownSeq } = options;
  if (shownSeq !== undefined && (!Number.isSafeInteger(shownSeq) || shownSeq < 0)) {
    throw new InvalidArgumentError(`shownSeq must be an integer of 0 or more, got ${String(shownSeq)}`);
  }
  const status = await callIntent(db, 'agent_kit_request_cancel($1, $2)', runId, [shownSeq ?? null]);
  if (closedStatuses.includes(status)) throw new ConflictError(`run ${runId} is already ${status}: nothing to cancel`);
  return { runId, status };
}

/**
 * Hold the run for a person: a queued run, or one waiting for input, is `waiting_takeover` at
 * once; a running one parks so at its next write (within a mirror batch while it streams). `by` names the operator (kept as
 * `taken_over_by` and in the event). Release it with releaseRun.
 * @throws InvalidArgumentError; NotFoundError; ConflictError for a closed run, one being
 *   cancelled, or one behind an earlier open run of its thread.
 */
export async function takeOverRun(db: Queryable, options: { runId: string; by: string }): Promise<RunIntentResult> {
  const runId = requireRunId(options.runId);
  if (typeof options.by !== 'string' || options.by.trim() === '') {
    throw new InvalidArgumentError('a takeover names its operator (by)');
  }
  return { runId, status: await callIntent(db, 'agent_kit_takeover_run($1, $2)', runId, [options.by]) };
}

/**
 * Give a taken-over run back: `queued`, due now, continuing where it stopped; or, while it still
 * runs, withdraw the takeover not yet honoured (`running`).
 * @throws InvalidArgumentError; NotFoundError; ConflictError when the run is not taken over.
 */
export async function releaseRun(db: Queryable, options: { runId: string }): Promise<RunIntentResult> {
  const runId = requireRunId(options.runId);
  return { runId, status: await callIntent(db, 'agent_kit_release_run($1)', runId, []) };
}

export interface ReplyToRunResult {
  runId: string;
  status: 'completed';
  /** The run's assistant message: the operator's text. */
  messageId: string;
  /** The thread's next queued turn, given its job by the reply: a server may start it at once. */
  nextRunId: string | null;
}

/**
 * Answer in a held run's place: the operator's `text` is the turn's reply. A run taken over and
 * parked (`waiting_takeover`) closes `completed` with it as its one assistant message, which
 * names the operator (`by`), as its run-closed event does; its viewers see it at once, and the
 * thread's next queued turn goes on. The model is not asked again for this turn.
 * @throws InvalidArgumentError for a bad id, no operator, or a blank or too long text;
 *   NotFoundError; ConflictError for a run that is not held (take it over first, and for a
 *   running run wait for it to park), one being cancelled, or one with a tool call started and
 *   not settled (release it: its next segment reconciles the call).
 */
export async function replyToRun(db: Queryable, options: { runId: string; by: string; text: string }): Promise<ReplyToRunResult> {
  const runId = requireRunId(options.runId);
  if (typeof options.by !== 'string' || options.by.trim() === '') {
    throw new InvalidArgumentError('a reply names its operator (by)');
  }
  requireMessageText(options.text);
  const [row] = await db.query<{ message_id: string; next_run_id: string | null; thread_id: string }>(
    `select r.message_id, r.next_run_id, (select thread_id from agent_kit_runs where id = $1) as thread_id
     from agent_kit_reply_to_run($1, $2, $3) r`,
    [runId, options.by, options.text]);
  notifyThread(db, row!.thread_id);
  return { runId, status: 'completed', messageId: row!.message_id, nextRunId: row!.next_run_id };
}
