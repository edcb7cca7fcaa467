// Leases: at most one live holder per run. Every write here carries (owner, fence) and the SQL
// rejects a stale one; a rejection comes back as a result the caller branches on. See ADR-0004.
import { assert, InvalidArgumentError, serializeError } from '../errors.js';
import type { Db, Queryable, Tx } from '../store/db.js';
import { toNumber } from '../store/db.js';
import { writeGrouped } from '../store/group-commit.js';
import { notifyThread } from '../store/notify-thread.js';
import { appendEventRow, closeRunWrite, type CloseStatus } from './guarded-writes.js';
import { isClosed, toRun, type Run, type RunRow } from './run-row.js';

/** A held lease: the run, who holds it, and the fence that proves it. */
export interface Lease {
  readonly runId: string;
  readonly threadId: string;
  readonly owner: string;
  readonly fence: number;
  /** Segments since the last voluntary hand-off, this one included. */
  readonly attempts: number;
  readonly expiresAt: Date;
  readonly deadlineAt: Date;
}

export type ClaimResult =
  | { claimed: true; lease: Lease; run: Run }
  | { claimed: false; reason: NotClaimedReason };

/**
 * Why a claim by id took nothing: no such run, it ended, another segment holds it, it waits for an
 * answer or an operator, an earlier turn of its thread is open, or it waits out a model retry
 * (its job comes due when the provider said to come back; migration 0038).
 */
export type NotClaimedReason = 'missing' | 'closed' | 'busy' | 'waiting' | 'blocked' | 'not-due';

export type Interrupt = 'cancel' | 'takeover' | null;

/** A cancel or takeover requested of the run `lease` holds (null once the fence moved on). */
export async function readInterrupt(db: Queryable, lease: Lease): Promise<Interrupt> {
  const [row] = await db.query<{ interrupt: Interrupt }>(
    `select case when cancel_requested_at is not null then 'cancel'
                 when takeover_requested_at is not null then 'takeover' end as interrupt
     from agent_kit_runs where id = $1 and fence = $2`, [lease.runId, lease.fence]);
  return row?.interrupt ?? null;
}

/** Milliseconds as a Postgres interval literal. */
export function msInterval(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) throw new InvalidArgumentError(`expected a positive duration in ms, got ${ms}`);
  return `${Math.round(ms)} milliseconds`;
}

export interface ClaimOptions {
  runId: string;
  owner: string;
  /** Lease TTL; renewed on a timer up to the deadline when shorter than the budget. */
  leaseTtlMs: number;
  /** The invocation budget: the lease never extends past now + budget. Defaults to the TTL. */
  budgetMs?: number;
}

/**
 * Claim a run with the next fence (one SQL statement, agent_kit_claim_run).
 * @throws InvalidArgumentError for a malformed id or duration.
 */
export async function claimRun(db: Queryable, options: ClaimOptions): Promise<ClaimResult> {
  const rows = await db.query<RunRow>('select * from agent_kit_claim_run($1, $2, $3::interval, $4::interval)', claimParams(options));
  return claimResult(db, options, rows[0]);
}

/** The parameters $1..$4 of agent_kit_claim_run for `options`. */
export function claimParams(options: ClaimOptions): unknown[] {
  return [
    options.runId,
    options.owner,
    msInterval(options.leaseTtlMs),
    msInterval(options.budgetMs ?? options.leaseTtlMs),
  ];
}

/** The lease from agent_kit_claim_run's row, or why there is none. */
export async function claimResult(db: Queryable, options: ClaimOptions, row: RunRow | undefined): Promise<ClaimResult> {
  if (!row) return { claimed: false, reason: await whyNotClaimed(db, options.runId) };
  const run = toRun(row);
  assert(run.fence > 0 && run.owner === options.owner, 'a claimed run has our owner and a fence above 0');
  const lease: Lease = {
    runId: run.id,
    threadId: run.threadId,
    owner: options.owner,
    fence: run.fence,
    attempts: run.attempts,
    expiresAt: run.leaseExpiresAt!,
    deadlineAt: run.deadlineAt!,
  };
  return { claimed: true, lease, run };
}

async function whyNotClaimed(db: Queryable, runId: string) {
  const rows = await db.query<{ status: string; blocked: boolean; not_due: boolean }>(
    // Two lookups, one per partial index (queued turns, the active run), as the claim checks it.
    `select r.status,
       r.status = 'queued' and r.retry_due_at > agent_kit_now() and r.cancel_requested_at is null as not_due,
       exists (select 1 from agent_kit_runs e where e.thread_id = r.thread_id
         and e.turn_no < r.turn_no and e.status = 'queued')
       or exists (select 1 from agent_kit_runs e where e.thread_id = r.thread_id
         and e.turn_no < r.turn_no and e.status in ('running', 'waiting_input', 'waiting_takeover')) as blocked
     from agent_kit_runs r where r.id = $1`,
    [runId],
  );
  const row = rows[0];
  if (!row) return 'missing' as const;
  if (isClosed(row.status as Run['status'])) return 'closed' as const;
  if (row.status === 'running') return 'busy' as const;
  if (row.blocked) return 'blocked' as const;
  if (row.not_due) return 'not-due' as const;
  return 'waiting' as const;
}

/** Extend the lease by `leaseTtlMs`, capped at its deadline. False = lost (or expired). */
export async function renewLease(db: Queryable, lease: Lease, leaseTtlMs: number): Promise<boolean> {
  const rows = await db.query<{ ok: boolean }>('select agent_kit_renew_lease($1, $2, $3, $4::interval) as ok', [
    lease.runId,
    lease.owner,
    lease.fence,
    msInterval(leaseTtlMs),
  ]);
  return rows[0]?.ok === true;
}

/**
 * Give the lease up with `error` (agent_kit_fail_segment, guarded by owner and fence): it expires
 * at once, the attempt stays spent, a `segment-failed` event says why, and the next reaper pass
 * hands the run on. False = lost (nothing written).
 */
export async function failLease(db: Queryable, lease: Lease, error: unknown): Promise<boolean> {
  const rows = await db.query<{ ok: boolean }>('select agent_kit_fail_segment($1, $2, $3, $4::jsonb) as ok', [
    lease.runId, lease.owner, lease.fence, JSON.stringify(serializeError(error)),
  ]);
  return rows[0]?.ok === true;
}

export type MirrorResult = { ok: true; seq: number | null; interrupt: Interrupt } | { ok: false };

/** The stream mirror's write: append `delta` to the partial output, heartbeat, event. */
export function mirrorPartial(db: Queryable, lease: Lease, delta: string): Promise<MirrorResult> {
  return mirrorWrite(db, lease, 'select * from agent_kit_mirror_partial($1, $2, $3, $4)', [delta]);
}

/**
 * The mirror's write of a batch that holds what the model thought (ADR-0070): heartbeat, a
 * `reasoning-delta` event, then `delta` of the reply as mirrorPartial writes it, in one statement.
 */
export function mirrorReasoning(db: Queryable, lease: Lease, reasoning: string, delta: string): Promise<MirrorResult> {
  return mirrorWrite(db, lease, 'select * from agent_kit_mirror_reasoning($1, $2, $3, $4, $5)', [reasoning, delta]);
}

async function mirrorWrite(db: Queryable, lease: Lease, sql: string, texts: string[]): Promise<MirrorResult> {
  const rows = await db.query<{ seq: number | null; interrupt: Interrupt }>(
    sql, [lease.runId, lease.owner, lease.fence, ...texts],
  );
  const row = rows[0];
  if (!row) return { ok: false };
  const seq = row.seq === null ? null : toNumber(row.seq);
  if (seq !== null) notifyThread(db, lease.threadId, seq);
  return { ok: true, seq, interrupt: row.interrupt };
}

/** Start a segment: set the visible partial it continues from and announce it. Null = lost. */
export function beginSegment(
  db: Queryable, lease: Lease, partial: string, data: Record<string, unknown> = {},
): Promise<number | null> {
  return setPartialAndAnnounce(db, 'agent_kit_begin_segment', lease, partial, data);
}

/**
 * Ask a refused model step again (agent_kit_retry_step, ADR-0061): the run's partial becomes
 * `text`, what the retry goes on from, and a `model-retry` event carries it with `data`, so every
 * viewer shows that text from here on. Null = lost.
 */
export function retryStep(db: Queryable, lease: Lease, text: string, data: Record<string, unknown>): Promise<number | null> {
  return setPartialAndAnnounce(db, 'agent_kit_retry_step', lease, text, data);
}

/**
 * Park the run for a model retry whose wait does not fit in the segment (agent_kit_park_for_retry,
 * ADR-0062): queued with its job due in `delayMs`, the attempt kept spent; a `model-retry` event
 * with `data`, then `run-parked`. Null = lost.
 */
export async function parkForRetry(
  db: Queryable, lease: Lease, delayMs: number, data: Record<string, unknown>,
): Promise<number | null> {
  const rows = await db.query<{ seq: number | string | null }>(
    'select agent_kit_park_for_retry($1, $2, $3, $4::interval, $5::jsonb) as seq',
    [lease.runId, lease.owner, lease.fence, msInterval(Math.max(1, delayMs)), JSON.stringify(data)],
  );
  const seq = rows[0]?.seq;
  if (seq === null || seq === undefined) return null;
  notifyThread(db, lease.threadId, toNumber(seq) + 1); // the run-parked after it
  return toNumber(seq);
}

async function setPartialAndAnnounce(
  db: Queryable, fn: 'agent_kit_begin_segment' | 'agent_kit_retry_step', lease: Lease, partial: string, data: Record<string, unknown>,
): Promise<number | null> {
  const rows = await db.query<{ seq: number | null }>(
    `select ${fn}($1, $2, $3, $4, $5::jsonb) as seq`,
    [lease.runId, lease.owner, lease.fence, partial, JSON.stringify(data)],
  );
  const seq = rows[0]?.seq;
  if (seq === null || seq === undefined) return null;
  notifyThread(db, lease.threadId, toNumber(seq));
  return toNumber(seq);
}

/** Append an event under the lease. Null = lost. */
export async function appendEvent(
  db: Queryable, lease: Lease, type: string, data: Record<string, unknown>,
): Promise<number | null> {
  const seq = await appendEventRow(db, lease, type, data);
  if (seq !== null) notifyThread(db, lease.threadId, seq);
  return seq;
}

class Rejected extends Error {}

/**
 * Several guarded writes as one: `fn` returns null when the fence rejected one of them, and then
 * none is kept. Null = lost. The caller wakes viewers after it returns (after the commit).
 */
export async function allOrNothing<T>(db: Db, fn: (tx: Tx) => Promise<T | null>): Promise<T | null> {
  try {
    return await db.transaction(async (tx) => {
      const result = await fn(tx);
      if (result === null) throw new Rejected('rejected by the fence');
      return result;
    });
  } catch (error) {
    if (error instanceof Rejected) return null;
    throw error;
  }
}

export type ParkStatus = 'queued' | 'waiting_input' | 'waiting_takeover';

/** Why a segment handed its run on, queued: the run-parked event's `data.reason` (ADR-0121). */
export type ParkReason = 'slice' | 'stop' | 'store-error' | 'started-late';

/** Hand the run off voluntarily (question, takeover, slice end). False = lost. */
export async function parkRun(
  db: Queryable, lease: Lease, status: ParkStatus, waitingFor?: Record<string, unknown>,
): Promise<boolean> {
  return parked(db, lease, await parkRunRow(db, lease, status, waitingFor));
}

/** Hand the run on, queued for the next segment, saying why. False = lost. */
export async function parkQueued(db: Queryable, lease: Lease, reason: ParkReason): Promise<boolean> {
  return parked(db, lease, await parkRunRow(db, lease, 'queued', undefined, reason));
}

function parked(db: Queryable, lease: Lease, ok: boolean): boolean {
  if (ok) notifyThread(db, lease.threadId);
  return ok;
}

/**
 * Give back a run whose segment started too late in its invocation to finish its step (ADR-0113),
 * or was asked to stop before its step left anything (ADR-0117): queued, as a slice end, with the
 * attempt its claim counted taken back. False = lost.
 */
export async function parkStartedLate(db: Queryable, lease: Lease, reason: 'started-late' | 'stop' = 'started-late'): Promise<boolean> {
  const rows = await db.query<{ ok: boolean }>('select agent_kit_park_started_late($1, $2, $3, $4) as ok',
    [lease.runId, lease.owner, lease.fence, reason]);
  return parked(db, lease, rows[0]?.ok === true);
}

/**
 * Park the run to wait for an answer, with the input-requested event that asks for it, in one
 * transaction: a crash between the two would leave the question asked twice. False = lost.
 */
export async function requestInput(db: Db, lease: Lease, waitingFor: Record<string, unknown>): Promise<boolean> {
  const parked = await allOrNothing(db, async (tx) => {
    if ((await appendEventRow(tx, lease, 'input-requested', { runId: lease.runId, ...waitingFor })) === null) return null;
    return (await parkRunRow(tx, lease, 'waiting_input', waitingFor)) || null;
  });
  if (parked === null) return false;
  notifyThread(db, lease.threadId);
  return true;
}

async function parkRunRow(
  q: Queryable, lease: Lease, status: ParkStatus, waitingFor?: Record<string, unknown>, reason?: ParkReason,
): Promise<boolean> {
  const rows = await q.query<{ ok: boolean }>('select agent_kit_park_run($1, $2, $3, $4, $5::jsonb, $6) as ok', [
    lease.runId,
    lease.owner,
    lease.fence,
    status,
    waitingFor === undefined ? null : JSON.stringify(waitingFor),
    reason ?? null,
  ]);
  return rows[0]?.ok === true;
}

export type { CloseStatus } from './guarded-writes.js';

/** Close the run with its final message. Returns the message id, or null when the guard rejected. */
export async function closeRun(
  db: Queryable, lease: Lease, status: CloseStatus, message: { text: string } & Record<string, unknown>,
): Promise<string | null> {
  const id = await writeGrouped(db, closeRunWrite, { runId: lease.runId, owner: lease.owner, fence: lease.fence, status, message });
  if (id !== null) notifyThread(db, lease.threadId);
  return id;
}
