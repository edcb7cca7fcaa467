// The reaper: finds running runs whose lease expired and hands them back. It never kills: with
// attempts left the run stays `running` under its expired lease and gets a job (the partial is not
// promoted); at the crash budget it is taken with the next fence and closed as aborted with its
// partial salvaged. Either way the dead segment's `started` effects are reconciled first, each hook
// within a deadline (ADR-0041), after the runs with nothing to reconcile have their jobs. Two
// reapers, or a reaper and a drain, are safe together: every write is guarded by the fence seen.
import {
  askReconcileHook, defaultReconcileTimeoutMs, hookTimeoutMs, reconcileDeadEffects, type SettleOptions,
} from '../effect-ledger/index.js';
import { coerceError, InvalidArgumentError } from '../errors.js';
import { msInterval, type Lease } from '../lease/lease.js';
import { salvageReason, salvageRun } from '../lease/salvage.js';
import { toRun, type RunRow } from '../lease/run-row.js';
import { enqueueRun } from '../queue/jobs.js';
import { recordPass } from '../queue/passes.js';
import { toNumber } from '../store/db.js';
import { askedOfRun, textShownAtCancel } from '../turn/reply-content.js';
import type { Runtime } from '../turn/types.js';

export interface ReapOptions {
  /** Expired runs handled per pass, oldest expiry first. Default 100. */
  limit?: number;
  /** Lease owner for salvage. Default `reaper-<pid>-<random>`. */
  owner?: string;
  /** The most one reconcile hook may take before its effect is in doubt. Default 10 s. */
  reconcileTimeoutMs?: number;
  /**
   * The pass's time: no hook is waited for past it; runs not reached are left for the next pass
   * (`deferred`). Default the invocation budget (the cron route's own time limit).
   */
  budgetMs?: number;
  /** Abort to stop early (a worker shutting down): a hook in flight is abandoned, its effect stays started. */
  signal?: AbortSignal;
}

export interface ReapReport {
  /** Expired runs found by the scan. */
  scanned: number;
  /** Runs with attempts left that got a job (resume path). */
  requeued: number;
  /** Runs closed as aborted with their partial salvaged (give-up path). */
  salvaged: number;
  /** Started effects the tool's reconcile hook found done (now `completed`). */
  reconciled: number;
  /** Started effects that could not be confirmed (now `in_doubt`). */
  inDoubt: number;
  /** Runs that failed with an error (logged with runId, fence, attempt); retried next pass. */
  errors: number;
  /** Runs with effects to reconcile left for the next pass: the pass ran out of time or was stopped. */
  deferred: number;
  /**
   * Started effects of tools this process does not register, left `started` on a requeued run:
   * its next segment, in a process that has the tool, asks the tool's hook. (A run given up is
   * closed, so there they are marked in doubt.)
   */
  unregistered: number;
  durationMs: number;
}

const limitMax = 1_000;
// Salvage is a few statements; a reaper that dies midway should not hold the run for a whole
// default TTL (the invocation budget, minutes) before the next pass can retry.
const salvageLeaseMaxMs = 30_000;
// Room after the last hook to write its verdict and enqueue or close, before the time runs out.
const writeMarginMaxMs = 1_000;

interface ExpiredRun {
  id: string;
  fence: number;
  attempts: number;
}

/**
 * One reaper pass over running runs whose lease expired (an index scan on lease_expires_at).
 * @throws InvalidArgumentError for a limit outside 1..1000; StoreUnavailableError when the scan fails.
 */
export async function reapExpiredRuns(rt: Runtime, options: ReapOptions = {}): Promise<ReapReport> {
  const startedMs = Date.now();
  const limit = options.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > limitMax) {
    throw new InvalidArgumentError(`reap limit must be an integer 1..${limitMax}, got ${limit}`);
  }
  const owner = options.owner ?? `reaper-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const report: ReapReport = {
    scanned: 0, requeued: 0, salvaged: 0, reconciled: 0, inDoubt: 0, errors: 0, deferred: 0, unregistered: 0,
    durationMs: 0,
  };
  const rows = await rt.db.query<{ id: string; fence: number; attempts: number; has_started: boolean }>(
    `select r.id, r.fence, r.attempts, exists (select 1 from agent_kit_effects e
       where e.run_id = r.id and e.status = 'started') as has_started
     from agent_kit_runs r
     where r.status = 'running' and r.lease_expires_at <= agent_kit_now()
     order by r.lease_expires_at limit $1`,
    [limit],
  );
  report.scanned = rows.length;
  await recordPass(rt, 'reap', owner);
  const plain: ExpiredRun[] = [];
  const toSettle: ExpiredRun[] = [];
  for (const row of rows) {
    const run: ExpiredRun = { id: row.id, fence: toNumber(row.fence), attempts: toNumber(row.attempts) };
    // Nothing to reconcile: requeued first, in one statement, so that no tool's hook delays them.
    if (run.attempts < rt.config.maxRunAttempts && !row.has_started) plain.push(run);
    else toSettle.push(run);
  }
  try {
    report.requeued += await requeueAll(rt, plain);
  } catch (raw) {
    report.errors += plain.length;
    rt.log?.({ msg: 'reap: requeue failed', runIds: plain.map((r) => r.id), error: coerceError(raw).message });
  }
  const budgetMs = options.budgetMs ?? rt.config.invocationBudgetMs;
  const pass: SettleOptions = {
    timeoutMs: options.reconcileTimeoutMs ?? defaultReconcileTimeoutMs,
    signal: options.signal,
    stopAtMs: startedMs + budgetMs - Math.min(writeMarginMaxMs, budgetMs / 4),
  };
  for (const run of toSettle) {
    if (options.signal?.aborted || hookTimeoutMs(pass) === 0) {
      report.deferred++; // still expired: the next pass finds it again
      continue;
    }
    try {
      const done = run.attempts >= rt.config.maxRunAttempts
        ? await giveUpRun(rt, run, owner, report, pass)
        : await requeueRun(rt, run, report, pass);
      if (!done) report.deferred++;
    } catch (raw) {
      report.errors++;
      const error = coerceError(raw);
      rt.log?.({ msg: 'reap: run failed', runId: run.id, fence: run.fence, attempt: run.attempts, error: error.message });
    }
  }
  report.durationMs = Date.now() - startedMs;
  return report;
}

/**
 * Resume path: reconcile the dead segment's started effects under the fence seen, then give the
 * run a job. The run row is not changed; a drain that claimed it meanwhile makes both no-ops.
 * False = left for the next pass (a hook was abandoned or the pass ran out of time).
 */
async function requeueRun(rt: Runtime, run: ExpiredRun, report: ReapReport, pass: SettleOptions): Promise<boolean> {
  const effects = await startedEffects(rt, run.id);
  for (const effect of effects) {
    const tool = rt.tools[effect.tool];
    if (!tool) {
      // `agent-kit reap`, or any process without this tool, cannot ask its hook: judging the
      // effect in doubt here would spoil a payment the next segment's hook could confirm.
      report.unregistered++;
      continue;
    }
    const outcome = await askReconcileHook(tool, effect.key, pass, effect.input ?? undefined);
    if (outcome === null) return false;
    const rows = await rt.db.query<{ ok: boolean }>(
      'select agent_kit_reconcile_effect($1, $2, $3, $4, $5::jsonb) as ok',
      [run.id, run.fence, effect.key, outcome.status, JSON.stringify(outcome.result ?? null)],
    );
    if (rows[0]?.ok !== true) continue; // settled by another reaper, or the run changed hands
    if (outcome.status === 'completed') report.reconciled++;
    else report.inDoubt++;
  }
  if (await enqueueRun(rt.db, run.id, run.fence)) report.requeued++;
  return true;
}

/**
 * Resume path for runs without started effects, one statement for all. Ids are sorted so that
 * two reapers lock jobs in the same order (no deadlock); each enqueue is guarded by its fence.
 */
async function requeueAll(rt: Runtime, runs: ExpiredRun[]): Promise<number> {
  if (runs.length === 0) return 0;
  const sorted = [...runs].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const rows = await rt.db.query<{ n: number | string }>(
    `select count(*) filter (where q.ok) as n from (
       select agent_kit_enqueue_run(u.id, u.fence) as ok
       from unnest($1::uuid[], $2::bigint[]) with ordinality as u(id, fence, nth) order by u.nth) q`,
    [sorted.map((r) => r.id), sorted.map((r) => r.fence)],
  );
  return toNumber(rows[0]?.n);
}

/**
 * Give-up path: take the run with the next fence (no attempt counted), reconcile its started
 * effects under that lease, tell viewers, and close it as aborted with its partial as a message
 * marked partial. A reaper that dies midway leaves a lease that expires; the next pass retries.
 * A hook gets no more than what is left of the salvage lease. False = left for the next pass.
 */
async function giveUpRun(
  rt: Runtime, run: ExpiredRun, owner: string, report: ReapReport, pass: SettleOptions,
): Promise<boolean> {
  const takenAtMs = Date.now();
  const leaseMs = Math.min(rt.config.leaseTtlMs, salvageLeaseMaxMs);
  const rows = await rt.db.query<RunRow>(
    'select * from agent_kit_take_for_salvage($1, $2, $3::interval, $4)',
    [run.id, owner, msInterval(leaseMs), rt.config.maxRunAttempts],
  );
  if (!rows[0]) return true; // another reaper or a drain got there first
  const taken = toRun(rows[0]);
  const lease: Lease = {
    runId: taken.id, threadId: taken.threadId, owner, fence: taken.fence, attempts: taken.attempts,
    expiresAt: taken.leaseExpiresAt!, deadlineAt: taken.deadlineAt!,
  };
  const leaseStopAtMs = takenAtMs + leaseMs - Math.min(writeMarginMaxMs, leaseMs / 4);
  const settled = await reconcileDeadEffects(rt.db, lease, rt.tools, {
    ...pass, stopAtMs: Math.min(pass.stopAtMs ?? Infinity, leaseStopAtMs),
  });
  if (!settled) return true; // lost
  report.reconciled += settled.completed;
  report.inDoubt += settled.inDoubt;
  if (settled.unsettled > 0) return false; // the salvage lease expires; the next pass takes it again
  // A claim past the budget that died before giving the run up spent none of it (ADR-0007).
  const attempts = Math.min(taken.attempts, rt.config.maxRunAttempts);
  const reason = salvageReason(attempts, rt.config.maxRunAttempts);
  // A run whose viewer asked it to stop keeps the text that viewer saw, as a cancel's close does (ADR-0090).
  const shown = taken.cancelRequestedAt ? await textShownAtCancel(rt.db, taken.id, taken.threadId) : null;
  const content = { ...await askedOfRun(rt.db, taken.id, rt.tools), ...(taken.cancelRequestedAt ? { cancelled: true } : {}) };
  const messageId = await salvageRun(rt.db, lease, shown ?? taken.partial, reason, content, attempts);
  if (messageId !== null) report.salvaged++;
  rt.log?.({ msg: 'reap: salvaged', runId: taken.id, fence: taken.fence, attempt: taken.attempts, closed: messageId !== null });
  return true;
}

async function startedEffects(rt: Runtime, runId: string) {
  return rt.db.query<{ key: string; tool: string; input: unknown }>(
    `select key, tool, input from agent_kit_effects where run_id = $1 and status = 'started' order by started_at, key`,
    [runId],
  );
}
