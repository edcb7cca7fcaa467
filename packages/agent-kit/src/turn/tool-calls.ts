// Settling a model step's tool calls: run each through the effect ledger (at most once per
// idempotency key), answer questions and approvals from stored inputs (consumed exactly once, in
// the same transaction as the journal step), and turn bad calls into error results, not crashes.
import { askReconcileHook, effectKey, startEffect, type EffectStatus } from '../effect-ledger/index.js';
import { EffectInDoubtError } from '../errors.js';
import { allOrNothing, type Interrupt, type Lease } from '../lease/lease.js';
import type { AgentTool } from '../model/index.js';
import { toolKind } from '../model/agent-tool.js';
import { checkOnRead } from './lease-hold.js';
import type { Db, Queryable } from '../store/db.js';
import { isApproval } from '../approval.js';
import { notifyThread } from '../store/notify-thread.js';
import { storableMessage, storableResult } from '../store/storable.js';
import {
  commitStep, pendingToolCalls, type EffectStart, type StartedEffect, type Step, type StepCommit, type ToolCall, type ToolStep,
} from './journal.js';

export interface ToolContext {
  db: Db; lease: Lease; tools: Record<string, AgentTool<any, any>>; signal: AbortSignal;
  /** Local time (ms) by which a running tool must have finished. */
  stopAtMs: number;
  /** The most a reconcile hook is given (default: the ledger's, 10 s), within stopAtMs. */
  reconcileTimeoutMs?: number;
  /** The most of a tool's result (or thrown message) kept; default the storable module's 1 MiB. */
  maxResultBytes?: number;
  /**
   * True once the segment should slice rather than start more work (too little time left, or
   * asked to stop): no new effect is started then; the next segment starts it with a full budget.
   */
  sliceDue?: () => boolean;
  /** An effect's final status whose write failed (the store went away after the tool ran): the segment records it later (ADR-0115). */
  onUnrecorded?: (effect: NonNullable<StepCommit['effect']>) => void;
}

export type SettleResult =
  /** `interrupt`: the run's pending cancel or takeover as of the last step written. */
  | { kind: 'done'; interrupt: Interrupt }
  | { kind: 'lost' }
  | { kind: 'stopped'; reason: string }
  /** Out of time before a call's effect started: park the run for the next segment. */
  | { kind: 'slice' }
  | { kind: 'wait'; waitingFor: Record<string, unknown> };

/**
 * Settle every pending tool call of the journal's last model step, appending tool steps to it.
 * `started`: the ledger record of the first call's effect, when the model step's commit started it.
 * `pending`: the run's cancel or takeover as the last write (that commit) saw it.
 */
export async function settleToolCalls(
  ctx: ToolContext, journal: Step[], started?: StartedEffect, pending: Interrupt = null,
): Promise<SettleResult> {
  let interrupt = pending;
  let prestarted = started;
  for (const { step, index, call } of pendingToolCalls(journal)) {
    const gone = givenUp(ctx);
    if (gone) return gone;
    // A cancel or takeover recorded before this call: no further call runs, the segment honours
    // it (close aborted, or park). The write that reported it started no effect (migration 0024).
    if (interrupt) return { kind: 'done', interrupt };
    const key = effectKey(ctx.lease.runId, step.stepNo, index);
    const base: Base = { kind: 'tool', stepNo: journal.length, toolCallId: call.toolCallId, toolName: call.toolName };
    const plan = planCall(ctx.tools, call);
    let result: Recorded | SettleResult;
    if (plan.kind === 'invalid') {
      result = await settleInvalid(ctx, journal, base, key, plan.output);
    } else if (plan.kind === 'question') {
      result = await answerQuestion(ctx, call, base, plan.input as { question?: string });
    } else if (plan.kind === 'approval') {
      result = await runApproved(ctx, plan.tool, call, base, key, plan.input);
    } else if (prestarted?.key !== key && ctx.sliceDue?.()) {
      return { kind: 'slice' };
    } else {
      const outcome = await runEffect(ctx, plan.tool, call, key, plan.input, prestarted?.key === key ? prestarted : undefined);
      result = 'kind' in outcome ? outcome : await recordToolStep(ctx, journal, { ...base, ...outcome.step }, outcome.effect);
    }
    if (result.kind !== 'recorded') return result;
    journal.push(result.step);
    interrupt = result.interrupt;
    prestarted = result.started;
  }
  return { kind: 'done', interrupt };
}

/**
 * The segment has given up (a renewal was refused: the lease is lost; or its writes failed): no
 * further call is settled and no effect runs. An effect already `started` stays so for the next
 * owner to reconcile; running it now could race that owner's reconcile.
 */
function givenUp(ctx: ToolContext): SettleResult | undefined {
  if (!ctx.signal.aborted) return undefined;
  const reason = ctx.signal.reason;
  return reason === 'lost' ? { kind: 'lost' } : { kind: 'stopped', reason: String(reason) };
}

/** How a tool call is settled, decided from its tool and its input. */
type CallPlan =
  | { kind: 'invalid'; output: string }
  | { kind: 'question' | 'approval' | 'effect'; tool: AgentTool<any, any>; input: unknown };

function planCall(tools: Record<string, AgentTool<any, any>>, call: ToolCall): CallPlan {
  const tool = tools[call.toolName];
  if (!tool) return { kind: 'invalid', output: `Unknown tool "${call.toolName}".` };
  const parsed = tool.inputSchema.safeParse(call.input);
  if (!parsed.success) return { kind: 'invalid', output: `Invalid arguments for ${call.toolName}: ${parsed.error.message}` };
  return { kind: toolKind(tool), tool, input: parsed.data };
}

/**
 * A call this process cannot run (unknown tool, input that does not validate). The ledger is read
 * first: a process that has the tool (the web app, while a CLI worker has only the demo tools)
 * may have run it, and what it recorded is the call's result, not an error for the model to
 * correct. A `started` record is left for reconciliation by whoever holds the run next (the
 * reaper, the next segment): it cannot be one of ours, since no effect is started for a call that
 * does not plan as one, and telling the model the call was invalid would invite a second run.
 */
async function settleInvalid(
  ctx: ToolContext, journal: Step[], base: Base, key: string, output: string,
): Promise<Recorded | SettleResult> {
  const rows = await ctx.db.query<{ status: EffectStatus; result: unknown }>(
    'select status, result from agent_kit_effects where run_id = $1 and key = $2', [ctx.lease.runId, key],
  );
  const record = rows[0];
  if (!record) return recordToolStep(ctx, journal, { ...base, outcome: 'invalid', output });
  if (record.status === 'started') {
    return { kind: 'stopped', reason: `effect ${key} of ${base.toolName} is started and this process cannot settle it (${output})` };
  }
  return recordToolStep(ctx, journal, { ...base, ...recordedOutcome(record.status, record.result) });
}

/**
 * The tool result for an effect the ledger already finished. One an operator resolved (it was in
 * doubt; resolveEffect) is told as their finding, not as the ledger's JSON; their note is for
 * operators and stays out of what the model may repeat to the user.
 */
function recordedOutcome(status: Exclude<EffectStatus, 'started'>, result: unknown): Pick<ToolStep, 'outcome' | 'output'> {
  if (status === 'in_doubt') return inDoubt(result);
  const verdict = (result as { resolved?: { happened?: unknown } } | null)?.resolved;
  if (verdict && typeof verdict.happened === 'boolean') {
    const found = `An operator checked the outside system: this side effect ${verdict.happened ? 'happened' : 'did not happen'}.`;
    return status === 'completed'
      ? { outcome: 'completed', output: { status: 'completed', message: found } }
      : { outcome: 'failed', output: found };
  }
  return status === 'completed' ? { outcome: 'completed', output: result } : { outcome: 'failed', output: errorText(result) };
}

/**
 * The effect to record `started` in the same write as the step that precedes it (migration
 * 0016): the next pending call of `journal` (which includes that step), when it runs an effect
 * without waiting for an answer or an approval.
 */
export function nextEffectStart(
  tools: Record<string, AgentTool<any, any>>, runId: string, journal: Step[],
): EffectStart | undefined {
  const next = pendingToolCalls(journal)[0];
  if (!next) return undefined;
  const plan = planCall(tools, next.call);
  if (plan.kind !== 'effect') return undefined;
  return { key: effectKey(runId, next.step.stepNo, next.index), tool: next.call.toolName, input: plan.input };
}

/** A tool step in the journal, the run's interrupt as the write saw it, the effect it started. */
interface Recorded {
  kind: 'recorded';
  step: ToolStep;
  interrupt: Interrupt;
  started?: StartedEffect;
}

/**
 * Journal a tool step, with its effect's final status when it ran one, and start the effect of
 * the call that runs next in the same write.
 */
async function recordToolStep(
  ctx: ToolContext, journal: Step[], step: ToolStep, effect?: StepCommit['effect'],
): Promise<Recorded | SettleResult> {
  const start = ctx.sliceDue?.() ? undefined : nextEffectStart(ctx.tools, ctx.lease.runId, [...journal, step]);
  const committed = await commitStep(ctx.db, ctx.lease, step, toolEvent(step), { effect, start }).catch(unrecorded(ctx, effect));
  if (!committed.ok) return { kind: 'lost' };
  notifyThread(ctx.db, ctx.lease.threadId, committed.seq);
  return { kind: 'recorded', step, interrupt: committed.interrupt, started: committed.started };
}

/** Rethrow a failed write's error, telling the segment the effect status it carried (recorded later). */
function unrecorded(ctx: ToolContext, effect: StepCommit['effect']) {
  return (error: unknown): never => {
    if (effect) ctx.onUnrecorded?.(effect);
    throw error;
  };
}

function toolEvent(step: ToolStep) {
  return {
    type: 'tool-result',
    data: { stepNo: step.stepNo, toolCallId: step.toolCallId, toolName: step.toolName, outcome: step.outcome, output: step.output },
  };
}

/** A tool call's result for the journal, and the effect to finish in the same write. */
type EffectOutcome = { step: Pick<ToolStep, 'outcome' | 'output'>; effect?: StepCommit['effect'] } | SettleResult;

/**
 * Run a tool's side effect at most once per key, through the ledger: `started` is committed
 * before the tool runs (by the previous step's commit, `started`, or here); the final status is
 * written with the tool step (commitStep).
 */
async function runEffect(
  ctx: ToolContext, tool: AgentTool<any, any>, call: ToolCall, key: string, input: unknown,
  started?: StartedEffect,
): Promise<EffectOutcome> {
  const record = started ?? await startEffect(ctx.db, ctx.lease, key, call.toolName, input);
  if (!record) return { kind: 'lost' };
  if (record.status !== 'started') return { step: recordedOutcome(record.status, record.result) };
  if (record.fence !== ctx.lease.fence) {
    // Left `started` by a dead segment: ask the outside system, never run it again.
    const reconciled = await askReconcileHook(tool, key, hookOptions(ctx), input);
    if (!reconciled) return givenUp(ctx) ?? { kind: 'stopped', reason: 'deadline during reconcile' };
    const effect = { key, status: reconciled.status, result: reconciled.result };
    if (reconciled.status === 'completed') return { step: { outcome: 'completed', output: reconciled.result }, effect };
    return { step: inDoubt(reconciled.result), effect };
  }
  const gone = givenUp(ctx); // the start's write may have taken longer than the lease
  if (gone) return gone;
  // The tool's signal also aborts at the segment's deadline: its result would be dropped, so
  // its work should stop (the effect stays `started` for the next owner to reconcile).
  const deadline = new AbortController();
  const pastDeadline = () => deadline.abort(new Error('the segment reached its deadline while the tool ran'));
  // Read by the tool, it looks at the clock itself (checkOnRead): the segment's signal checks the
  // lease's end, and past the segment's deadline this one aborts there and then. After a freeze
  // the timers that would abort it run late, after the tool's own.
  const signal = checkOnRead(AbortSignal.any([ctx.signal, deadline.signal]), () => {
    if (!ctx.signal.aborted && Date.now() >= ctx.stopAtMs) pastDeadline();
  });
  const ran = await beforeDeadline(ctx, () => execute(tool, input, key, signal, ctx.maxResultBytes));
  // (A tool that threw after reading the deadline's abort stopped for it, whatever it threw.)
  if (ran === 'deadline' || (ran.kind === 'threw' && deadline.signal.aborted)) {
    pastDeadline();
    return givenUp(ctx) ?? { kind: 'stopped', reason: 'deadline during tool' };
  }
  if (ran.kind === 'ok') {
    return { step: { outcome: 'completed', output: ran.value }, effect: { key, status: 'completed', result: ran.value } };
  }
  // Our own signal aborted the tool (lease lost, segment stopping): its error says nothing about
  // the effect, which may have happened. Record nothing; the effect stays `started` for the next
  // owner to reconcile. Recording `failed` would let the model run it again under a new key.
  const abandoned = givenUp(ctx);
  if (abandoned) return abandoned;
  return judgeThrow(ctx, tool, key, input, ran);
}

/** A reconcile hook asked during a segment: its timeout, within the segment's deadline and signal. */
function hookOptions(ctx: ToolContext) {
  return { signal: ctx.signal, timeoutMs: ctx.reconcileTimeoutMs, stopAtMs: ctx.stopAtMs, maxResultBytes: ctx.maxResultBytes };
}

type Execution = { kind: 'ok'; value: unknown } | { kind: 'threw'; message: string; inDoubt: boolean };

async function execute(
  tool: AgentTool<any, any>, input: unknown, key: string, signal: AbortSignal, maxBytes?: number,
): Promise<Execution> {
  try {
    if (!tool.execute) return { kind: 'threw', message: `Tool "${tool.name}" cannot be executed.`, inDoubt: false };
    // Made storable before anything keeps it (ADR-0056): a refused result would lose an effect that happened.
    return { kind: 'ok', value: storableResult((await tool.execute(input, { idempotencyKey: key, signal })) ?? null, maxBytes) };
  } catch (raw) {
    const message = storableMessage(raw instanceof Error ? raw.message : String(raw), maxBytes);
    return { kind: 'threw', message, inDoubt: isInDoubt(raw) };
  }
}

/** An EffectInDoubtError, also from another copy of the package (same code, another class). */
function isInDoubt(raw: unknown): boolean {
  return raw instanceof EffectInDoubtError || (raw as { code?: unknown } | null)?.code === 'EFFECT_IN_DOUBT';
}

/**
 * What a throw from `execute` means for the effect (ADR-0040). A tool with a `reconcile` hook is
 * asked first: found → completed with its result. Otherwise an EffectInDoubtError (or a hook that
 * fails) → in_doubt; any other error → failed, which tells the model the effect did not happen.
 */
async function judgeThrow(
  ctx: ToolContext, tool: AgentTool<any, any>, key: string, input: unknown, thrown: { message: string; inDoubt: boolean },
): Promise<EffectOutcome> {
  let status: 'failed' | 'in_doubt' = thrown.inDoubt ? 'in_doubt' : 'failed';
  let reason = thrown.inDoubt ? `the tool could not tell whether it happened: ${thrown.message}` : thrown.message;
  if (tool.reconcile) {
    const asked = await askReconcileHook(tool, key, hookOptions(ctx), input);
    if (!asked) return givenUp(ctx) ?? { kind: 'stopped', reason: 'deadline during reconcile' };
    if (asked.status === 'completed') {
      return { step: { outcome: 'completed', output: asked.result }, effect: { key, status: 'completed', result: asked.result } };
    }
    if (!asked.notFound) {
      // The hook failed or did not answer in time: nobody can tell.
      status = 'in_doubt';
      reason = `${thrown.message}; then ${String((asked.result as { reason?: unknown } | null)?.reason ?? 'the reconcile hook failed')}`;
    }
  }
  if (status === 'failed') return { step: { outcome: 'failed', output: reason }, effect: { key, status, result: { error: reason } } };
  const result = { reason, key };
  return { step: inDoubt(result), effect: { key, status, result } };
}

/** Run `work`, giving up (without its result) at the segment's deadline. */
async function beforeDeadline<T>(ctx: ToolContext, work: () => Promise<T>): Promise<T | 'deadline'> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'deadline'>((resolve) => {
    timer = setTimeout(() => resolve('deadline'), Math.max(0, ctx.stopAtMs - Date.now()));
  });
  try {
    return await Promise.race([work(), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

function inDoubt(result: unknown): Pick<ToolStep, 'outcome' | 'output'> {
  return {
    outcome: 'in_doubt',
    output: {
      status: 'in_doubt',
      message: 'This side effect may or may not have happened. It was not repeated; check before retrying.',
      detail: result ?? null,
    },
  };
}

function errorText(result: unknown): string {
  const error = (result as { error?: unknown } | null)?.error;
  return typeof error === 'string' ? error : JSON.stringify(result);
}

async function readInput(db: Queryable, runId: string, questionId: string) {
  const rows = await db.query<{ data: Record<string, unknown> }>(
    'select data from agent_kit_inputs where run_id = $1 and question_id = $2 and consumed_at is null',
    [runId, questionId],
  );
  return rows[0]?.data;
}

/** Consume the stored input and record the tool step (and its effect) in one guarded transaction. */
async function consumeAndRecord(
  ctx: ToolContext, questionId: string, step: ToolStep, effect?: StepCommit['effect'],
): Promise<Recorded | SettleResult> {
  const committed = await allOrNothing(ctx.db, async (tx) => {
    const rows = await tx.query<{ data: unknown }>('select agent_kit_consume_input($1, $2, $3, $4) as data', [
      ctx.lease.runId, ctx.lease.owner, ctx.lease.fence, questionId,
    ]);
    if (rows[0]?.data === null || rows[0]?.data === undefined) return null;
    const result = await commitStep(tx, ctx.lease, step, toolEvent(step), { effect });
    return result.ok ? result : null;
  }).catch(unrecorded(ctx, effect));
  if (committed === null) return { kind: 'lost' };
  notifyThread(ctx.db, ctx.lease.threadId);
  return { kind: 'recorded', step, interrupt: committed.interrupt };
}

type Base = Pick<ToolStep, 'kind' | 'stepNo' | 'toolCallId' | 'toolName'>;

async function answerQuestion(
  ctx: ToolContext, call: ToolCall, base: Base, input: { question?: string },
): Promise<Recorded | SettleResult> {
  const data = await readInput(ctx.db, ctx.lease.runId, call.toolCallId);
  if (!data) {
    return { kind: 'wait', waitingFor: { id: call.toolCallId, kind: 'question', question: input.question ?? '', toolName: call.toolName } };
  }
  return consumeAndRecord(ctx, call.toolCallId, { ...base, outcome: 'answered', output: { answer: answerIn(data) } });
}

/** An approval: the effect runs only after a stored "approved"; the input is consumed with the step. */
async function runApproved(
  ctx: ToolContext, tool: AgentTool<any, any>, call: ToolCall, base: Base, key: string, input: unknown,
): Promise<Recorded | SettleResult> {
  const data = await readInput(ctx.db, ctx.lease.runId, call.toolCallId);
  if (!data) {
    return {
      kind: 'wait',
      waitingFor: { id: call.toolCallId, kind: 'approval', toolName: call.toolName, input: call.input },
    };
  }
  if (!approves(data)) {
    return consumeAndRecord(ctx, call.toolCallId, { ...base, outcome: 'denied', output: 'The user denied this tool call.' });
  }
  if (ctx.sliceDue?.()) return { kind: 'slice' }; // the approval stays stored for the next segment
  const outcome = await runEffect(ctx, tool, call, key, input);
  if ('kind' in outcome) return outcome;
  return consumeAndRecord(ctx, call.toolCallId, { ...base, ...outcome.step }, outcome.effect);
}

/** The answer a stored input gives a question: the input route's `answer`, or a typed message's text. */
export function answerIn(data: Record<string, unknown>): string {
  return typeof data.answer === 'string' ? data.answer : typeof data.text === 'string' ? data.text : JSON.stringify(data);
}

/** Whether a stored input approves: the input route's `approved: true`, or a typed bare yes. */
export function approves(data: Record<string, unknown>): boolean {
  return data.approved === true || (typeof data.text === 'string' && isApproval(data.text));
}

