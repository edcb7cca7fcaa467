// Settling a model step's tool calls: run each through the effect ledger (at most once per
// idempotency key), answer questions and approvals from stored inputs (consumed exactly once, in
// the same transaction as the journal step), and turn bad calls into error results, not crashes.
import { effectKey, finishEffect, reconcileWithTool, startEffect } from '../effect-ledger/index.js';
import type { Lease } from '../lease/lease.js';
import type { AgentTool } from '../model/index.js';
import type { Db, Queryable } from '../store/db.js';
import { recordStep, type Step, type ToolCall, type ToolStep, pendingToolCalls } from './journal.js';

export interface ToolContext {
  db: Db;
  lease: Lease;
  tools: Record<string, AgentTool<any, any>>;
  signal: AbortSignal;
  /** Local time (ms) by which a running tool must have finished. */
  stopAtMs: number;
}

export type SettleResult =
  | { kind: 'done' }
  | { kind: 'lost' }
  | { kind: 'stopped'; reason: string }
  | { kind: 'wait'; waitingFor: Record<string, unknown> };

class LeaseLost extends Error {}

/** Settle every pending tool call of the journal's last model step, appending tool steps to it. */
export async function settleToolCalls(ctx: ToolContext, journal: Step[]): Promise<SettleResult> {
  for (const { step, index, call } of pendingToolCalls(journal)) {
    const tool = ctx.tools[call.toolName];
    const key = effectKey(ctx.lease.runId, step.stepNo, index);
    const base: Base = { kind: 'tool', stepNo: journal.length, toolCallId: call.toolCallId, toolName: call.toolName };
    const parsed = tool?.inputSchema.safeParse(call.input);
    let result: ToolStep | SettleResult;
    if (!tool || !parsed) {
      result = await recordToolStep(ctx, { ...base, outcome: 'invalid', output: `Unknown tool "${call.toolName}".` });
    } else if (!parsed.success) {
      const output = `Invalid arguments for ${call.toolName}: ${parsed.error.message}`;
      result = await recordToolStep(ctx, { ...base, outcome: 'invalid', output });
    } else if (tool.kind === 'question') {
      result = await answerQuestion(ctx, call, base, parsed.data as { question?: string });
    } else if (tool.needsApproval) {
      result = await runApproved(ctx, tool, call, base, key, parsed.data);
    } else {
      const outcome = await runEffect(ctx, tool, call, key, parsed.data);
      result = 'kind' in outcome ? outcome : await recordToolStep(ctx, { ...base, ...outcome });
    }
    if (result.kind !== 'tool') return result;
    journal.push(result);
  }
  return { kind: 'done' };
}

async function recordToolStep(ctx: ToolContext, step: ToolStep): Promise<ToolStep | SettleResult> {
  return (await recordStep(ctx.db, ctx.lease, step, toolEvent(step))) ? step : { kind: 'lost' };
}

function toolEvent(step: ToolStep) {
  return {
    type: 'tool-result',
    data: { stepNo: step.stepNo, toolCallId: step.toolCallId, toolName: step.toolName, outcome: step.outcome, output: step.output },
  };
}

type EffectOutcome = Pick<ToolStep, 'outcome' | 'output'> | SettleResult;

/** Run a tool's side effect at most once per key, through the ledger. */
async function runEffect(
  ctx: ToolContext, tool: AgentTool<any, any>, call: ToolCall, key: string, input: unknown,
): Promise<EffectOutcome> {
  const record = await startEffect(ctx.db, ctx.lease, key, call.toolName, input);
  if (!record) return { kind: 'lost' };
  if (record.status === 'completed') return { outcome: 'completed', output: record.result };
  if (record.status === 'failed') return { outcome: 'failed', output: errorText(record.result) };
  if (record.status === 'in_doubt') return inDoubt(record.result);
  if (record.fence !== ctx.lease.fence) {
    // Left `started` by a dead segment: ask the outside system, never run it again.
    const reconciled = await reconcileWithTool(tool, key);
    if (!(await finishEffect(ctx.db, ctx.lease, key, reconciled.status, reconciled.result))) return { kind: 'lost' };
    return reconciled.status === 'completed' ? { outcome: 'completed', output: reconciled.result } : inDoubt(reconciled.result);
  }
  const settled = await executeBefore(ctx, tool, input, key);
  if (settled.kind === 'deadline') return { kind: 'stopped', reason: 'deadline during tool' };
  const status = settled.kind === 'ok' ? 'completed' : 'failed';
  const stored = settled.kind === 'ok' ? settled.value : { error: settled.message };
  if (!(await finishEffect(ctx.db, ctx.lease, key, status, stored))) return { kind: 'lost' };
  return settled.kind === 'ok' ? { outcome: 'completed', output: settled.value } : { outcome: 'failed', output: settled.message };
}

/** Run the tool, giving up (without a result) at the segment's deadline. */
async function executeBefore(ctx: ToolContext, tool: AgentTool<any, any>, input: unknown, key: string) {
  type Settled = { kind: 'ok'; value: unknown } | { kind: 'error'; message: string } | { kind: 'deadline' };
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<Settled>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'deadline' }), Math.max(0, ctx.stopAtMs - Date.now()));
  });
  const execution = (async (): Promise<Settled> => {
    try {
      if (!tool.execute) return { kind: 'error', message: `Tool "${tool.name}" cannot be executed.` };
      return { kind: 'ok', value: (await tool.execute(input, { idempotencyKey: key, signal: ctx.signal })) ?? null };
    } catch (raw) {
      return { kind: 'error', message: raw instanceof Error ? raw.message : String(raw) };
    }
  })();
  try {
    return await Promise.race([execution, deadline]);
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

/** Consume the stored input and record the tool step in one guarded transaction. */
async function consumeAndRecord(ctx: ToolContext, questionId: string, step: ToolStep): Promise<boolean> {
  try {
    return await ctx.db.transaction(async (tx) => {
      const rows = await tx.query<{ data: unknown }>('select agent_kit_consume_input($1, $2, $3, $4) as data', [
        ctx.lease.runId, ctx.lease.owner, ctx.lease.fence, questionId,
      ]);
      if (rows[0]?.data === null || rows[0]?.data === undefined) throw new LeaseLost();
      if (!(await recordStep(tx, ctx.lease, step, toolEvent(step)))) throw new LeaseLost();
      return true;
    });
  } catch (error) {
    if (error instanceof LeaseLost) return false;
    throw error;
  }
}

type Base = Pick<ToolStep, 'kind' | 'stepNo' | 'toolCallId' | 'toolName'>;

async function answerQuestion(ctx: ToolContext, call: ToolCall, base: Base, input: { question?: string }) {
  const data = await readInput(ctx.db, ctx.lease.runId, call.toolCallId);
  if (!data) {
    return { kind: 'wait', waitingFor: { id: call.toolCallId, kind: 'question', question: input.question ?? '', toolName: call.toolName } } as const;
  }
  const answer = typeof data.answer === 'string' ? data.answer : typeof data.text === 'string' ? data.text : JSON.stringify(data);
  const step: ToolStep = { ...base, outcome: 'answered', output: { answer } };
  return (await consumeAndRecord(ctx, call.toolCallId, step)) ? step : ({ kind: 'lost' } as const);
}

/** An approval: the effect runs only after a stored "approved"; the input is consumed with the step. */
async function runApproved(
  ctx: ToolContext, tool: AgentTool<any, any>, call: ToolCall, base: Base, key: string, input: unknown,
) {
  const data = await readInput(ctx.db, ctx.lease.runId, call.toolCallId);
  if (!data) {
    return {
      kind: 'wait',
      waitingFor: { id: call.toolCallId, kind: 'approval', toolName: call.toolName, input: call.input },
    } as const;
  }
  const approved = data.approved === true || (typeof data.text === 'string' && /^\s*(y|yes|ok|approve|approved)\b/i.test(data.text));
  let step: ToolStep;
  if (!approved) {
    step = { ...base, outcome: 'denied', output: 'The user denied this tool call.' };
  } else {
    const outcome = await runEffect(ctx, tool, call, key, input);
    if ('kind' in outcome) return outcome;
    step = { ...base, ...outcome };
  }
  return (await consumeAndRecord(ctx, call.toolCallId, step)) ? step : ({ kind: 'lost' } as const);
}
