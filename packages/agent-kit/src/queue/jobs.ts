// The queue's SQL: take due jobs (SKIP LOCKED, with a visibility timeout), settle a job whose run
// could not be claimed, and requeue a run. No job is ever lost: a taken job comes due again unless
// a claim or a settle removed it, and a settle never drops a job that was re-enqueued meanwhile.
import { InvalidArgumentError } from '../errors.js';
import { msInterval } from '../lease/lease.js';
import type { Queryable } from '../store/db.js';
import { toNumber } from '../store/db.js';

/** A job taken from the queue: the run to claim, and how often it was taken before. */
export interface TakenJob {
  jobId: number;
  runId: string;
  /** Takes of this job so far, this one included. */
  tries: number;
}

/** The most jobs one take may return (the SQL function's own limit). */
export const takeJobsMax = 1000;

/**
 * Take up to `limit` due jobs, pushing their due time `lockMs` forward: a drain that dies after
 * taking loses nothing, the jobs come due again.
 * @throws InvalidArgumentError for a limit outside 1..1000 or a non-positive lock.
 */
export async function takeJobs(db: Queryable, limit: number, lockMs: number): Promise<TakenJob[]> {
  if (!Number.isInteger(limit) || limit < 1 || limit > takeJobsMax) {
    throw new InvalidArgumentError(`job limit must be an integer 1..${takeJobsMax}, got ${limit}`);
  }
  const rows = await db.query<{ job_id: number; run_id: string; tries: number }>(
    'select * from agent_kit_take_jobs($1, $2::interval)',
    [limit, msInterval(lockMs)],
  );
  return rows.map((row) => ({ jobId: toNumber(row.job_id), runId: row.run_id, tries: toNumber(row.tries) }));
}

/**
 * takeJobs for a drain: the same take, and in the same statement the jobs of spent runs (see
 * dropJobsOfSpentRuns) are deleted instead of taken. Returns the jobs to claim and how many
 * were dropped.
 */
export async function takeJobsForDrain(
  db: Queryable, limit: number, lockMs: number, maxRunAttempts: number,
): Promise<{ jobs: TakenJob[]; spent: number }> {
  if (!Number.isInteger(limit) || limit < 1 || limit > takeJobsMax) {
    throw new InvalidArgumentError(`job limit must be an integer 1..${takeJobsMax}, got ${limit}`);
  }
  const rows = await db.query<{ job_id: number; run_id: string; tries: number; spent: boolean }>(
    'select * from agent_kit_take_jobs($1, $2::interval, $3)',
    [limit, msInterval(lockMs), maxRunAttempts],
  );
  const jobs = rows.filter((row) => !row.spent)
    .map((row) => ({ jobId: toNumber(row.job_id), runId: row.run_id, tries: toNumber(row.tries) }));
  return { jobs, spent: rows.length - jobs.length };
}

export type SettleOutcome = 'gone' | 'dropped' | 'rescheduled' | 'due';

/**
 * Settle a job whose run was not claimed (agent_kit_settle_job): drop it for a closed, waiting or
 * blocked run, move it to the lease expiry of a busy one, make it due again if the run turned
 * out claimable. Decided under the run's row lock, so a concurrent re-enqueue is never undone.
 */
export async function settleJob(db: Queryable, jobId: number): Promise<SettleOutcome> {
  const rows = await db.query<{ outcome: SettleOutcome }>('select agent_kit_settle_job($1) as outcome', [jobId]);
  return rows[0]!.outcome;
}

/**
 * Give a run a job due now and wake the workers. With `fence`, only while the run is still
 * running under that fence with an expired lease (the reaper's requeue). False = nothing queued.
 * @throws NotFoundError for an unknown run.
 */
export async function enqueueRun(db: Queryable, runId: string, fence?: number): Promise<boolean> {
  const rows = await db.query<{ ok: boolean }>('select agent_kit_enqueue_run($1, $2) as ok', [runId, fence ?? null]);
  return rows[0]?.ok === true;
}

/**
 * Drop the taken jobs whose run is running with an expired lease and no attempts left: such a run
 * is the reaper's to salvage (it reconciles effects and closes it), and claiming it again would
 * overrun the crash budget. Returns the ids of the jobs dropped.
 */
export async function dropJobsOfSpentRuns(db: Queryable, jobIds: number[], maxRunAttempts: number): Promise<Set<number>> {
  if (jobIds.length === 0) return new Set();
  const rows = await db.query<{ id: number }>(
    `delete from agent_kit_jobs j using agent_kit_runs r
     where j.id = any($1::bigint[]) and r.id = j.run_id and r.status = 'running'
       and r.lease_expires_at <= agent_kit_now() and r.attempts >= $2
     returning j.id`,
    [jobIds, maxRunAttempts],
  );
  return new Set(rows.map((row) => toNumber(row.id)));
}
