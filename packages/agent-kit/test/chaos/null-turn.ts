// Stand-in segment runners for the drain, reaper and worker tests: they claim like the turn
// engine (one SQL claim, the next fence; or take the drain's batch claim) and then close, park, lose or hang on purpose, so the
// queue's behaviour is tested apart from the model. Also a Runtime for tests.
import type { AgentKitConfig } from '../../src/config.js';
import { claimRun, closeRun, parkRun, type Lease } from '../../src/lease/lease.js';
import type { AgentTool } from '../../src/model/index.js';
import type { Db } from '../../src/store/db.js';
import type { RunSegment, Runtime, SegmentOptions, SegmentOutcome } from '../../src/turn/types.js';

export function testConfig(overrides: Partial<AgentKitConfig> = {}): AgentKitConfig {
  return { model: 'scripted', invocationBudgetMs: 30_000, leaseTtlMs: 30_000, maxRunAttempts: 3, ...overrides };
}

/** A Runtime whose model is never called (the null turns below do not call one). */
export function testRuntime(
  db: Db, config: Partial<AgentKitConfig> = {}, tools: Record<string, AgentTool<any, any>> = {},
  log?: Runtime['log'],
): Runtime {
  return { db, model: () => { throw new Error('the null turn calls no model'); }, tools, config: testConfig(config), log };
}

/** What a null turn does once it holds the lease. */
export type NullTurnAction = (rt: Runtime, lease: Lease, options: SegmentOptions) => Promise<SegmentOutcome>;

/** A segment runner that claims like the engine (unless the drain did) and then runs `action`. */
export function nullTurn(action: NullTurnAction = closeWith('done')): RunSegment {
  return async (rt, options) => {
    if (options.preClaimed) return action(rt, options.preClaimed.claim.lease, options);
    const claim = await claimRun(rt.db, {
      runId: options.runId, owner: options.owner,
      leaseTtlMs: Math.min(options.leaseTtlMs ?? rt.config.leaseTtlMs, options.budgetMs ?? rt.config.invocationBudgetMs),
      budgetMs: options.budgetMs ?? rt.config.invocationBudgetMs,
    });
    if (!claim.claimed) return { kind: 'not-claimed', reason: claim.reason };
    return action(rt, claim.lease, options);
  };
}

/** Close the run as completed with `text`. */
export function closeWith(text: string, delayMs = 0): NullTurnAction {
  return async (rt, lease) => {
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
    const messageId = await closeRun(rt.db, lease, 'completed', { text });
    return messageId
      ? { kind: 'closed', status: 'completed', messageId, fence: lease.fence }
      : { kind: 'lost', fence: lease.fence };
  };
}

/** Park the run waiting for input (no job: an answer re-enqueues it). */
export const parkForInput: NullTurnAction = async (rt, lease) => {
  const ok = await parkRun(rt.db, lease, 'waiting_input', { id: 'q1', kind: 'question' });
  return ok ? { kind: 'parked', status: 'waiting_input', fence: lease.fence } : { kind: 'lost', fence: lease.fence };
};

/** Leave the lease to expire, as a segment that hit its deadline mid-step does. */
export const stopMidStep: NullTurnAction = async (_rt, lease) => ({ kind: 'stopped', fence: lease.fence, reason: 'test' });

/** Wait for the stop signal, then park for input: a segment honouring SIGTERM at a boundary. */
export function parkOnStop(started?: () => void): NullTurnAction {
  return async (rt, lease, options) => {
    started?.();
    const signal = options.stopSignal;
    if (signal && !signal.aborted) await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
    return parkForInput(rt, lease, options);
  };
}

/** Count rows of `sql` (a `select count(*) as n …`). */
export async function count(db: Db, sql: string, params: unknown[] = []): Promise<number> {
  const rows = await db.query<{ n: number | string }>(sql, params);
  return Number(rows[0]!.n);
}

/** A run's status and fence, its assistant messages and its jobs: what a drain test checks. */
export async function runState(db: Db, runId: string) {
  const [row] = await db.query<{ status: string; fence: number }>('select status, fence from agent_kit_runs where id = $1', [runId]);
  const messages = await count(db, `select count(*) as n from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId]);
  const jobs = await count(db, 'select count(*) as n from agent_kit_jobs where run_id = $1', [runId]);
  return { status: row!.status, fence: Number(row!.fence), messages, jobs };
}

/** Poll `probe` until it returns true, or fail after `timeoutMs` (generous: CI machines stall). */
export async function eventually(probe: () => Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<number> {
  const startedMs = Date.now();
  for (;;) {
    if (await probe()) return Date.now() - startedMs;
    if (Date.now() - startedMs > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
