// The step journal: each completed model step and each tool result of a run, recorded under the
// run's fence. A resumed segment rebuilds the conversation from it and never re-runs a step.
import type { ModelMessage, ProviderMetadata } from 'ai';
import type { EffectRecord } from '../effect-ledger/index.js';
import type { TokenUsage } from '../event-log/token-usage.js';
import { cutResultText, droppableResults, droppedResultNote, overCap } from './context-window.js';
import type { Interrupt, Lease } from '../lease/lease.js';
import type { Queryable } from '../store/db.js';
import { toNumber } from '../store/db.js';
import { byIndex, writeGrouped, type GroupedWrite } from '../store/group-commit.js';

export interface ToolCall {
  toolCallId: string;
  toolName: string;
  input: unknown;
}

/**
 * A part of the model's reasoning as its provider streamed it: the text (a summary on OpenAI, the
 * thinking on Anthropic) and the metadata the provider needs to take it back (ADR-0064).
 */
export interface Reasoning {
  text: string;
  providerMetadata?: ProviderMetadata;
}

export interface ModelStep {
  kind: 'model';
  stepNo: number;
  text: string;
  toolCalls: ToolCall[];
  /** Sent back before the text and calls in the next step's prompt; absent in older journals. */
  reasoning?: Reasoning[];
  /** The tokens the step's request used; absent when the provider reported none, and in older journals. */
  usage?: TokenUsage;
  finishReason: string;
}

/** A finished model step as the journal keeps it, and its `step-finished` event. */
export function modelStepOf(
  stepNo: number, result: { text: string; toolCalls: ToolCall[]; reasoning: Reasoning[]; usage?: TokenUsage; finishReason: string },
): { step: ModelStep; event: { type: string; data: Record<string, unknown> } } {
  const { text, toolCalls, finishReason, usage } = result;
  const step: ModelStep = {
    kind: 'model', stepNo, text, toolCalls, finishReason,
    // Sent back in the next step's prompt (ADR-0064).
    ...(result.reasoning.length > 0 ? { reasoning: result.reasoning } : {}),
    ...(usage ? { usage } : {}),
  };
  // A reply the output limit cut short says so (ADR-0068); viewers tell the reader.
  const cut = finishReason === 'length' ? { finishReason } : {};
  return { step, event: { type: 'step-finished', data: { stepNo, text, toolCalls, ...(usage ? { usage } : {}), ...cut } } };
}

export type ToolOutcome = 'completed' | 'failed' | 'in_doubt' | 'denied' | 'invalid' | 'answered';

export interface ToolStep {
  kind: 'tool';
  stepNo: number;
  toolCallId: string;
  toolName: string;
  outcome: ToolOutcome;
  /** What the model sees: a JSON value, or an error text for failed/denied/invalid. */
  output: unknown;
}

export type Step = ModelStep | ToolStep;

/** The run's journal, in order. */
export async function loadJournal(db: Queryable, runId: string): Promise<Step[]> {
  const rows = await db.query<{ step_no: number; kind: string; data: Record<string, unknown> }>(
    'select step_no, kind, data from agent_kit_steps where run_id = $1 order by step_no',
    [runId],
  );
  return rows.map((row) => ({ ...row.data, kind: row.kind, stepNo: toNumber(row.step_no) }) as Step);
}

/** What a step boundary writes together with the step (see migration 0012). */
export interface StepCommit {
  /** Streamed text the mirror has not written yet: appended to the partial with its event first. */
  delta?: string;
  /** The tool call's effect, finished with its result in the same transaction as its step. */
  effect?: { key: string; status: 'completed' | 'failed' | 'in_doubt'; result: unknown };
  /** Close the run with this final message: the step ended the turn. */
  close?: { status: 'completed' | 'failed' | 'aborted'; message: { text: string } & Record<string, unknown> };
  /** Record `started` for the tool call that runs next (migration 0016); never with `close`. */
  start?: EffectStart;
}

/** An effect to record `started` before its tool runs: the ledger key, the tool, its input. */
export interface EffectStart {
  key: string;
  tool: string;
  input: unknown;
}

/** The ledger record of the effect the commit started, or found already there. */
export type StartedEffect = Pick<EffectRecord, 'key' | 'status' | 'fence' | 'result'>;

export type CommitResult =
  | { ok: true; seq: number; interrupt: Interrupt; messageId: string | null; started?: StartedEffect }
  | { ok: false };

/**
 * Record a step under the lease with its event, and what `extra` asks for, in one guarded
 * statement (agent_kit_commit_step), grouped with other runs' commits of this process when they
 * pile up (writeGrouped). `ok: false` = lease lost and nothing written. The caller
 * wakes viewers (notifyThread) once the write has committed.
 * `stepNo` must be the journal's length: a step is written once, by one segment.
 */
export async function commitStep(
  db: Queryable, lease: Lease, step: Step, event: { type: string; data: Record<string, unknown> }, extra: StepCommit = {},
): Promise<CommitResult> {
  const { kind, stepNo, ...data } = step;
  const row = await writeGrouped(db, commitStepWrite, {
    runId: lease.runId, owner: lease.owner, fence: lease.fence, stepNo, kind, data, eventType: event.type, eventData: event.data,
    delta: extra.delta,
    // A present effect or start without a value is JSON null, never a missing value (SQL NULL).
    effectKey: extra.effect?.key, effectStatus: extra.effect?.status, effectResult: extra.effect && (extra.effect.result ?? null),
    closeStatus: extra.close?.status, closeMessage: extra.close?.message,
    startKey: extra.start?.key, startTool: extra.start?.tool, startInput: extra.start && (extra.start.input ?? null),
  });
  if (!row) return { ok: false };
  const started = extra.start && row.started_status
    ? { key: extra.start.key, status: row.started_status, fence: toNumber(row.started_fence ?? 0), result: row.started_result }
    : undefined;
  return { ok: true, seq: toNumber(row.seq ?? 0), interrupt: row.interrupt, messageId: row.message_id, started };
}

interface CommitRow {
  seq: number | string | null;
  interrupt: Interrupt;
  message_id: string | null;
  started_status: StartedEffect['status'] | null;
  started_fence: number | string | null;
  started_result: unknown;
}

/** agent_kit_commit_step's parameters by name: also the element of agent_kit_commit_steps. */
interface CommitArgs {
  runId: string;
  owner: string;
  fence: number;
  stepNo: number;
  kind: string;
  data: unknown;
  eventType: string;
  eventData: unknown;
  delta?: string;
  effectKey?: string;
  effectStatus?: string;
  effectResult?: unknown;
  closeStatus?: string;
  closeMessage?: unknown;
  startKey?: string;
  startTool?: string;
  startInput?: unknown;
}

/** A jsonb parameter: SQL NULL for no value, else the value's JSON (JSON null included). */
const jsonOrNull = (value: unknown) => (value === undefined ? null : JSON.stringify(value));

/** A step commit, alone or grouped with other runs' (migration 0017, ADR-0021). */
const commitStepWrite: GroupedWrite<CommitArgs, CommitRow | undefined> = {
  name: 'commit_step',
  async one(db, a) {
    const rows = await db.query<CommitRow>(
      'select * from agent_kit_commit_step($1, $2, $3, $4, $5, $6::jsonb, $7, $8::jsonb, $9, $10, $11, $12::jsonb, ' +
        '$13, $14::jsonb, $15, $16, $17::jsonb)',
      [
        a.runId, a.owner, a.fence, a.stepNo, a.kind, JSON.stringify(a.data), a.eventType, JSON.stringify(a.eventData),
        a.delta ?? null,
        a.effectKey ?? null, a.effectStatus ?? null, jsonOrNull(a.effectResult),
        a.closeStatus ?? null, jsonOrNull(a.closeMessage),
        a.startKey ?? null, a.startTool ?? null, jsonOrNull(a.startInput),
      ],
    );
    return rows[0];
  },
  async many(db, all) {
    const rows = await db.query<CommitRow & { i: number }>(
      'select * from agent_kit_commit_steps($1::jsonb)', [JSON.stringify(all)],
    );
    return byIndex(rows, all.length);
  },
};

/** The text of all completed model steps: what the final message is built from. */
export function committedText(journal: Step[]): string {
  return journal.map((s) => (s.kind === 'model' ? s.text : '')).join('');
}

/** Whether a model step of the journal kept reasoning, which the next prompt sends back. */
export function hasReasoning(journal: Step[]): boolean {
  return journal.some((step) => step.kind === 'model' && (step.reasoning?.length ?? 0) > 0);
}

/** Tool calls of the last model step that have no result yet, in call order. */
export function pendingToolCalls(journal: Step[]): { step: ModelStep; index: number; call: ToolCall }[] {
  const lastModel = [...journal].reverse().find((s): s is ModelStep => s.kind === 'model');
  if (!lastModel) return [];
  const answered = new Set(
    journal.filter((s): s is ToolStep => s.kind === 'tool' && s.stepNo > lastModel.stepNo).map((s) => s.toolCallId),
  );
  return lastModel.toolCalls
    .map((call, index) => ({ step: lastModel, index, call }))
    .filter(({ call }) => !answered.has(call.toolCallId));
}

/** True when the last model step ended the turn (it called no tools). */
export function isTurnFinished(journal: Step[]): boolean {
  const last = journal[journal.length - 1];
  return last?.kind === 'model' && last.toolCalls.length === 0;
}

/**
 * The prompt for the next model step: thread history, then this run's journal, each model step's
 * reasoning first unless `reasoning` is false; the oldest `droppedResults` of the results the
 * model has answered already left out, a note in their place, and every result longer than
 * `resultCap` characters cut to it (ADR-0067).
 */
export function buildMessages(
  history: ModelMessage[], journal: Step[], options: { reasoning?: boolean; droppedResults?: number; resultCap?: number } = {},
): ModelMessage[] {
  const reasoning = options.reasoning ?? true;
  const dropped = new Set(options.droppedResults ? droppableResults(journal).slice(0, options.droppedResults) : []);
  const messages = [...history];
  for (const step of journal) {
    if (step.kind === 'model') {
      const content: Exclude<ModelMessage & { role: 'assistant' }, undefined>['content'] = [];
      for (const part of (reasoning && step.reasoning) || []) {
        content.push({ type: 'reasoning', text: part.text, ...(part.providerMetadata ? { providerOptions: part.providerMetadata } : {}) });
      }
      if (step.text) content.push({ type: 'text', text: step.text });
      for (const call of step.toolCalls) {
        content.push({ type: 'tool-call', toolCallId: call.toolCallId, toolName: call.toolName, input: call.input });
      }
      messages.push({ role: 'assistant', content });
    } else {
      const isError = step.outcome === 'failed' || step.outcome === 'denied' || step.outcome === 'invalid';
      messages.push({
        role: 'tool',
        content: [{
          type: 'tool-result',
          toolCallId: step.toolCallId,
          toolName: step.toolName,
          output: resultOutput(step, isError, dropped.has(step), options.resultCap),
        }],
      });
    }
  }
  return messages;
}

/** A tool result as the next prompt gives it: as it is, left out, or cut to `cap` (ADR-0067). */
function resultOutput(step: ToolStep, isError: boolean, dropped: boolean, cap: number | undefined) {
  if (dropped) return { type: 'text', value: droppedResultNote(step) } as const;
  if (overCap(step, cap)) return { type: 'text', value: cutResultText(step, cap!) } as const;
  if (isError) return { type: 'error-text', value: String(step.output) } as const;
  return { type: 'json', value: (step.output ?? null) as never } as const;
}
