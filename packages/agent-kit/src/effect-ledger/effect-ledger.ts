// The effect ledger: a tool side effect is recorded `started` (guarded) before it runs and
// `completed`/`failed` after, once per idempotency key. A key a dead segment left `started` is
// reconciled through the tool's hook or marked `in_doubt` — never run again blindly (invariant 5).
import { assert, ConflictError, InvalidArgumentError, NotFoundError } from '../errors.js';
import type { Lease } from '../lease/lease.js';
import type { Queryable } from '../store/db.js';
import { toNumber } from '../store/db.js';
import { notifyThread } from '../store/notify-thread.js';
import { storableResult, storableText } from '../store/storable.js';
import type { AgentTool } from '../model/index.js';

export type EffectStatus = 'started' | 'completed' | 'failed' | 'in_doubt';

export interface EffectRecord {
  runId: string;
  key: string;
  status: EffectStatus;
  fence: number;
  tool: string;
  input: unknown;
  result: unknown;
}

interface EffectRow {
  run_id: string;
  key: string;
  status: EffectStatus;
  fence: number | string;
  tool: string;
  input: unknown;
  result: unknown;
}

const toRecord = (row: EffectRow): EffectRecord => ({
  runId: row.run_id,
  key: row.key,
  status: row.status,
  fence: toNumber(row.fence),
  tool: row.tool,
  input: row.input,
  result: row.result,
});

/** The idempotency key of a tool call: (run, step, call index), stable across segments. */
export function effectKey(runId: string, stepNo: number, callIndex: number): string {
  return `${runId}:${stepNo}:${callIndex}`;
}

/**
 * Record `started` for `key`, or find the record already there. Null = lease lost.
 * The caller runs the tool only when the returned record is `started` under its own fence.
 */
export async function startEffect(
  db: Queryable, lease: Lease, key: string, tool: string, input: unknown,
): Promise<EffectRecord | null> {
  const rows = await db.query<EffectRow>(
    `select * from agent_kit_record_effect($1, $2, $3, $4, 'started', $5, $6::jsonb)`,
    [lease.runId, lease.owner, lease.fence, key, tool, JSON.stringify(input ?? null)],
  );
  return rows[0] ? toRecord(rows[0]) : null;
}

/** Finish an effect (completed, failed, or in_doubt). Null = lease lost. */
export async function finishEffect(
  db: Queryable, lease: Lease, key: string, status: Exclude<EffectStatus, 'started'>, result: unknown,
): Promise<EffectRecord | null> {
  const rows = await db.query<EffectRow>(
    `select * from agent_kit_record_effect($1, $2, $3, $4, $5, null, null, $6::jsonb)`,
    [lease.runId, lease.owner, lease.fence, key, status, JSON.stringify(result ?? null)],
  );
  return rows[0] ? toRecord(rows[0]) : null;
}

/** Effects of a run, oldest first. */
export async function listEffects(db: Queryable, runId: string): Promise<EffectRecord[]> {
  const rows = await db.query<EffectRow>(
    'select * from agent_kit_effects where run_id = $1 order by started_at, key',
    [runId],
  );
  return rows.map(toRecord);
}

export type ReconcileOutcome =
  | { status: 'completed'; result: unknown }
  /** `notFound`: the hook answered that the effect did not happen (other in-doubt reasons: none). */
  | { status: 'in_doubt'; result: unknown; notFound?: true };

/**
 * How long a reconcile hook may take before its effect counts as in doubt. A provider's lookup
 * answers in well under a second; 10 s leaves room for a slow one without letting one that hangs
 * hold up a reaper pass or a segment for long. Callers cap it at what is left of their lease.
 * See ADR-0041.
 */
export const defaultReconcileTimeoutMs = 10_000;

export interface ReconcileOptions {
  /** The most the hook may take before the effect is in doubt; default defaultReconcileTimeoutMs. */
  timeoutMs?: number;
  /**
   * The caller gives up (its lease was lost, it is shutting down): the hook is aborted and no
   * verdict is given, so the effect stays `started` for whoever holds the run next.
   */
  signal?: AbortSignal;
  /** The most of a hook's answer kept (see storableResult); default defaultMaxToolResultBytes. */
  maxResultBytes?: number;
}

/**
 * Ask the tool's reconcile hook whether a started effect happened, with a deadline and an
 * AbortSignal: found → completed; not found, no hook, a failure, or no answer in time → in doubt.
 * The hook gets `timeoutMs`, capped at what is left before `stopAtMs`. Null (no verdict) when
 * `options.signal` aborted first, or no time was left before `stopAtMs`.
 */
export async function askReconcileHook(
  tool: AgentTool<any, any> | undefined, key: string, options: SettleOptions = {}, input?: unknown,
): Promise<ReconcileOutcome | null> {
  if (!tool?.reconcile) {
    const reason = tool ? 'no reconcile hook' : 'the tool is not registered in this process';
    return { status: 'in_doubt', result: { reason, key } };
  }
  if (options.signal?.aborted) return null;
  const timeoutMs = Math.floor(hookTimeoutMs(options));
  if (timeoutMs <= 0 && options.stopAtMs !== undefined) return null;
  const hookSignal = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let onAbort = () => {};
  const stopped = new Promise<'timed out' | 'abandoned'>((resolve) => {
    timer = setTimeout(() => resolve('timed out'), timeoutMs);
    onAbort = () => resolve('abandoned');
    options.signal?.addEventListener('abort', onAbort, { once: true });
  });
  const answer = (async () => tool.reconcile!({ idempotencyKey: key, signal: hookSignal.signal, ...(input === undefined ? {} : { input }) }))();
  answer.catch(() => {}); // an answer (or failure) that comes after we stopped waiting is dropped
  try {
    const first = await Promise.race([answer.then((found) => ({ found })), stopped]);
    if (first === 'abandoned') {
      hookSignal.abort(options.signal?.reason);
      return null;
    }
    if (first === 'timed out') {
      hookSignal.abort(new Error(`reconcile hook did not answer within ${timeoutMs} ms`));
      return { status: 'in_doubt', result: { reason: `reconcile hook did not answer within ${timeoutMs} ms`, key } };
    }
    if (first.found.found) return { status: 'completed', result: storableResult(first.found.result, options.maxResultBytes) };
    // The hook looked and found nothing: the effect did not happen, but the tool may still be
    // running somewhere (a zombie); reporting in_doubt keeps us from running it a second time.
    return { status: 'in_doubt', result: { reason: 'not found by reconcile hook', key }, notFound: true };
  } catch (raw) {
    return { status: 'in_doubt', result: { reason: storableText(`reconcile hook failed: ${String((raw as Error)?.message ?? raw)}`), key } };
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
  }
}

/** askReconcileHook without a caller's signal: always a verdict, within `timeoutMs` (default 10 s). */
export async function reconcileWithTool(
  tool: AgentTool<any, any> | undefined, key: string, options: { timeoutMs?: number; input?: unknown } = {},
): Promise<ReconcileOutcome> {
  const outcome = await askReconcileHook(tool, key, { timeoutMs: options.timeoutMs }, options.input);
  assert(outcome !== null, 'a reconcile without a signal always gives a verdict');
  return outcome;
}

export interface SettleOptions extends ReconcileOptions {
  /**
   * Local clock (Date.now()) by which the caller must have written its verdicts: its lease's end
   * less a margin. Each hook gets no more than what is left; an effect reached after it is left
   * `started` (unsettled).
   */
  stopAtMs?: number;
  /**
   * Leave an effect of a tool missing from `tools` `started` (listed in `unregistered`) for a
   * process that has the tool, instead of judging it in doubt: its hook could still confirm it.
   * A run that goes on does; one given up (salvaged) does not, as nobody will ask again.
   */
  leaveUnregistered?: boolean;
}

/** A hook's time: the timeout, capped at what is left before `stopAtMs`; 0 = none left. */
export function hookTimeoutMs(options: SettleOptions): number {
  const timeoutMs = options.timeoutMs ?? defaultReconcileTimeoutMs;
  return options.stopAtMs === undefined ? timeoutMs : Math.max(0, Math.min(timeoutMs, options.stopAtMs - Date.now()));
}

/**
 * Reconcile every effect that an earlier (dead) segment left `started`, under our lease: through
 * the tool's hook (completed) or else in doubt. Runs before a resumed segment does anything else,
 * and before a salvage. Returns how many of each it settled and how many it left `started`
 * (out of time, `options.signal` aborted, or a tool this process does not have with
 * `leaveUnregistered`: those tools are named), or null if the lease was lost.
 */
export async function reconcileDeadEffects(
  db: Queryable, lease: Lease, tools: Record<string, AgentTool<any, any>>, options: SettleOptions = {},
): Promise<{ completed: number; inDoubt: number; unsettled: number; unregistered: string[] } | null> {
  const rows = await db.query<EffectRow>(
    `select * from agent_kit_effects where run_id = $1 and status = 'started' and fence < $2
     order by started_at, key`,
    [lease.runId, lease.fence],
  );
  const settled = { completed: 0, inDoubt: 0, unsettled: 0, unregistered: [] as string[] };
  for (const row of rows) {
    if (options.leaveUnregistered && !Object.hasOwn(tools, row.tool)) {
      settled.unsettled++;
      if (!settled.unregistered.includes(row.tool)) settled.unregistered.push(row.tool);
      continue;
    }
    const outcome = await askReconcileHook(tools[row.tool], row.key, options, row.input ?? undefined);
    if (outcome === null) {
      settled.unsettled++;
      continue;
    }
    if (!(await finishEffect(db, lease, row.key, outcome.status, outcome.result))) return null;
    if (outcome.status === 'completed') settled.completed++;
    else settled.inDoubt++;
  }
  return settled;
}

/**
 * An operator's verdict on an effect in doubt, after checking the outside system by its key:
 * `happened` → completed, otherwise failed. The earlier in-doubt result is kept under `inDoubt`
 * and the verdict under `resolved` (who, when, a note). Only an `in_doubt` effect can be
 * resolved: a tool step that already told the model "in doubt" is not rewritten, but a run that
 * meets the effect again (requeued, not yet past its call) is told the verdict.
 *
 * In the same statement the run's thread gets an `effect-resolved` event (fence 0: an operator's
 * act outside any segment, like a cancel request), so whoever reads the thread, now or later,
 * sees the verdict beside the reply that was cut short (ADR-0043). The note stays in the ledger:
 * it is written for operators, and the thread's events are the user's to read. Pass the Db, not
 * an open transaction: viewers are woken once the statement has committed.
 * @throws InvalidArgumentError for an empty `by`; NotFoundError when there is no such effect;
 *   ConflictError when it is not in doubt.
 */
export async function resolveEffect(
  db: Queryable, effect: { runId: string; key: string; happened: boolean; by: string; note?: string },
): Promise<EffectRecord> {
  if (typeof effect.by !== 'string' || effect.by.trim() === '') {
    throw new InvalidArgumentError('a verdict names who decided it (by)');
  }
  const rows = await db.query<EffectRow & { thread_id: string; seq: number | string }>(
    `with resolved as (
       update agent_kit_effects
          set status = case when $3::boolean then 'completed' else 'failed' end,
              result = jsonb_build_object(
                'resolved', jsonb_build_object('by', $4::text, 'note', $5::text, 'at', now(), 'happened', $3::boolean),
                'inDoubt', result),
              finished_at = now()
        where run_id = $1 and key = $2 and status = 'in_doubt'
        returning *)
     select resolved.*, r.thread_id,
            agent_kit__append_event(r.thread_id, r.id, 0, 'effect-resolved', jsonb_build_object(
              'runId', r.id, 'key', resolved.key, 'tool', resolved.tool, 'happened', $3::boolean, 'by', $4::text)) as seq
       from resolved join agent_kit_runs r on r.id = resolved.run_id`,
    [effect.runId, effect.key, effect.happened, effect.by, effect.note ?? null],
  );
  const row = rows[0];
  if (row) {
    notifyThread(db, row.thread_id, toNumber(row.seq));
    return toRecord(row);
  }
  const [found] = await db.query<{ status: string; resolved: { by?: unknown; at?: unknown; happened?: unknown } | null }>(
    `select status, result->'resolved' as resolved from agent_kit_effects where run_id = $1 and key = $2`, [effect.runId, effect.key],
  );
  if (!found) throw new NotFoundError(`effect ${effect.key} of run ${effect.runId} not found`);
  // A second verdict (two operators on one page, a retried command) names the first one.
  const first = found.resolved;
  if (first && typeof first === 'object' && typeof first.by === 'string') {
    const verdict = first.happened === true ? 'it happened' : 'it did not happen';
    throw new ConflictError(`effect ${effect.key} was resolved already: ${first.by} said ${verdict}` +
      `${typeof first.at === 'string' ? ` at ${first.at}` : ''}; nothing changed`);
  }
  throw new ConflictError(`effect ${effect.key} is ${found.status}, not in doubt: nothing to resolve`);
}
