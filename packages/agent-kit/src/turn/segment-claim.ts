// How a segment starts: the claim of its run (one at a time, or a batch for the drain), its
// segment-started event, and what its prompts are built from: the conversation before the run and
// what the thread knows of its model's context window, read in the claim's own statement.
import type { ModelMessage } from 'ai';
import type { ContextWindow } from './context-window.js';
import { isBlank } from '../blank.js';
import { assert, InvalidArgumentError } from '../errors.js';
import { claimParams, claimResult, msInterval, type ClaimOptions, type ClaimResult, type Lease } from '../lease/lease.js';
import type { RunRow } from '../lease/run-row.js';
import type { Queryable } from '../store/db.js';
import { toNumber } from '../store/db.js';

/**
 * The conversation before a run's journal (agent_kit__history, migrations 0023 and 0026): each
 * earlier turn's first user message and final answer, the newest `turnsParam` turns of them (all
 * when null), then this run's user message. A function, not a subquery, so that in a claim's
 * statement it reads after the claim decided the earlier turns were closed (a subquery would read
 * with the statement's older snapshot).
 */
const historyJson = (threadParam: string, turnParam: string, turnsParam: string) =>
  `agent_kit__history(${threadParam}, ${turnParam}, ${turnsParam}::int)`;

type HistoryRow = { role: 'user' | 'assistant'; text: string };

/**
 * The window of earlier turns (ADR-0046) as the history function's int parameter: a window
 * past any thread's length (Number.MAX_SAFE_INTEGER, say) is cut to one that still means all.
 */
const windowParam = (historyTurns: number | undefined) =>
  historyTurns === undefined ? null : Math.min(historyTurns, 2 ** 31 - 2);

/**
 * History rows as model messages. Answers to questions reach the model as tool results. A turn
 * that closed without text (cancelled or failed before any reply) has an empty answer, left out:
 * it tells a model nothing, and Anthropic's API refuses an empty message before the last.
 */
const toMessages = (rows: HistoryRow[]): ModelMessage[] => rows
  .filter((row) => row.role === 'user' || !isBlank(row.text ?? ''))
  .map((row) => ({ role: row.role, content: row.text }) as ModelMessage);

/**
 * Start a segment (agent_kit_begin_segment: the visible partial it continues from, and its
 * segment-started event) and read the conversation before the run in the same round trip. The
 * history is of closed turns and this run's user message, which no longer change. Null = lost.
 */
export async function beginSegmentWithHistory(
  db: Queryable, lease: Lease, partial: string, data: Record<string, unknown>, turnNo: number, historyTurns?: number,
): Promise<Begun | null> {
  const rows = await db.query<{ seq: number | string | null; history: HistoryRow[]; context_window: ContextWindow | null }>(
    `select agent_kit_begin_segment($1, $2, $3, $4, $5::jsonb) as seq, ${historyJson('$6::uuid', '$7::int', '$8')} as history,
       ${contextWindowOf('$6::uuid')} as context_window`,
    [lease.runId, lease.owner, lease.fence, partial, JSON.stringify(data), lease.threadId, turnNo, windowParam(historyTurns)],
  );
  const row = rows[0];
  if (row?.seq === null || row?.seq === undefined) return null;
  return { seq: toNumber(row.seq), history: toMessages(row.history), contextWindow: row.context_window };
}

/**
 * A begun segment: its segment-started event, the conversation before its run, and what the
 * thread knows of its model's context window (ADR-0069).
 */
export interface Begun {
  seq: number;
  history: ModelMessage[];
  contextWindow: ContextWindow | null;
}

/** The thread's remembered context window (migration 0031), read beside its history. */
const contextWindowOf = (threadParam: string) => `(select context_window from agent_kit_threads where id = ${threadParam})`;

/** A claim for the engine; a first claim (fence 1) has already begun its segment. */
export type SegmentClaim = ClaimResult & { begun?: Begun };

/** A claimed run for the engine, as claimSegment or claimDueSegments returns it. */
export type ClaimedSegment = Extract<SegmentClaim, { claimed: true }>;

type ClaimRow = RunRow & { begin_seq: number | string | null; history: HistoryRow[] | null; context_window: ContextWindow | null };

/**
 * The rows of `claimed` (a call of agent_kit_claim_run or agent_kit_claim_due_runs), each with
 * its segment begun and its history read when it is the run's first claim with no cancel or
 * takeover pending. `beginParam` holds the begin data.
 *
 * A first claim begins its segment by appending `segment-started` itself, with the data
 * agent_kit_begin_segment would write: that function's update (partial to '', heartbeat to now)
 * would only rewrite what the claim has just set, and the claim in the same statement holds the
 * row lock and returned the (owner, fence, running) that function's guard checks. Writing the
 * run row once instead of twice saves a tenth of a null turn's executor time in Postgres.
 */
const claimSegmentsSql = (claimed: string, beginParam: string, turnsParam: string) => `select c.*,
    case when c.fence = 1 and c.partial = '' and c.cancel_requested_at is null and c.takeover_requested_at is null
      then agent_kit__append_event(c.thread_id, c.id, c.fence, 'segment-started', ${beginParam}::jsonb
        || jsonb_build_object('runId', c.id, 'fence', c.fence, 'attempt', c.attempts, 'owner', c.owner,
          'text', c.partial, 'leaseExpiresAt', c.lease_expires_at, 'deadlineAt', c.deadline_at)) end as begin_seq,
    case when c.fence = 1 then ${historyJson('c.thread_id', 'c.turn_no', turnsParam)} end as history,
    case when c.fence = 1 then ${contextWindowOf('c.thread_id')} end as context_window
  from ${claimed} c`;

const freshBegin = JSON.stringify({ continued: false, stepNo: 0 });

function withBegun(claim: SegmentClaim, row: ClaimRow | undefined): SegmentClaim {
  if (claim.claimed && row && row.begin_seq !== null && row.begin_seq !== undefined) {
    claim.begun = { seq: toNumber(row.begin_seq), history: toMessages(row.history ?? []), contextWindow: row.context_window ?? null };
  }
  return claim;
}

/**
 * Claim a run (agent_kit_claim_run) and, when it is the run's first claim with no cancel or
 * takeover pending, begin its segment (empty partial, step 0) and read its history in the same
 * statement: a fresh turn's start is one round trip. Any later claim begins on its own, after
 * reading the journal that decides what it continues from.
 */
export async function claimSegment(db: Queryable, options: ClaimOptions & HistoryWindow): Promise<SegmentClaim> {
  const rows = await db.query<ClaimRow>(
    claimSegmentsSql('agent_kit_claim_run($1, $2, $3::interval, $4::interval)', '$5', '$6'),
    [...claimParams(options), freshBegin, windowParam(options.historyTurns)],
  );
  return withBegun(await claimResult(db, options, rows[0]), rows[0]);
}

/** The most runs one batch claim may ask for (the SQL function's own limit). */
export const claimDueMax = 1000;

/** The most earlier turns a first claim reads into the history (ADR-0046); all when unset. */
export interface HistoryWindow {
  historyTurns?: number;
}

export interface ClaimDueOptions extends HistoryWindow {
  /** One lease owner per run to claim (1..1000): the k-th run claimed gets the k-th. */
  owners: readonly string[];
  leaseTtlMs: number;
  /** The invocation budget: no lease extends past now + budget. */
  budgetMs: number;
  /** A run with an expired lease and this many attempts is left to the reaper. */
  maxRunAttempts: number;
}

/**
 * Claim the runs of the earliest due jobs, up to one per owner, in one statement
 * (agent_kit_claim_due_runs), beginning each first claim's segment as claimSegment does. Fewer
 * come back when fewer are claimable now; the jobs it could not use stay due, for
 * takeJobsForDrain and settleJob.
 * @throws InvalidArgumentError for no owners, more than 1000, or a non-positive duration.
 */
export async function claimDueSegments(db: Queryable, options: ClaimDueOptions): Promise<ClaimedSegment[]> {
  const { owners } = options;
  if (owners.length < 1 || owners.length > claimDueMax) {
    throw new InvalidArgumentError(`a batch claim takes 1..${claimDueMax} owners, got ${owners.length}`);
  }
  const rows = await db.query<ClaimRow>(
    claimSegmentsSql('agent_kit_claim_due_runs($1::text[], $2::interval, $3::interval, $4)', '$5', '$6'),
    [owners, msInterval(options.leaseTtlMs), msInterval(options.budgetMs), options.maxRunAttempts, freshBegin,
      windowParam(options.historyTurns)],
  );
  return Promise.all(rows.map(async (row) => {
    const claim = withBegun(await claimResult(db, { runId: row.id, owner: row.owner!, leaseTtlMs: options.leaseTtlMs }, row), row);
    assert(claim.claimed && owners.includes(row.owner!), 'a batch-claimed run has one of our owners');
    return claim;
  }));
}
