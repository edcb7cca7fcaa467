// `agent-kit show RUN_ID [--json]`: one run for a person debugging it: its row and lease, the
// segments that held it (from its events), its journal steps, effects and messages. Effects in
// doubt are named again at the top, where nobody scrolls past them.
import type { Command } from 'commander';
import { readRunDetail, type RunDetail } from '../../event-log/read-runs.js';
import type { RunUsage } from '../../event-log/token-usage.js';
import { NotFoundError } from '../../errors.js';
import { isClosed } from '../../lease/run-row.js';
import type { Queryable } from '../../store/db.js';
import { uuidArgument, withDb } from '../main.js';
import { describeExpiry, formatDuration, formatTable } from './runs.js';

export function register(program: Command) {
  program
    .command('show')
    .description('show one run: lease, segments, journal steps, effects and messages')
    .argument('<run-id>', 'the run id (a uuid)', uuidArgument('RUN_ID'))
    .option('--json', 'print the run detail as JSON')
    .action(async (runId: string, options: { json?: boolean }) => {
      const text = await withDb((db) => formatShowCommand(db, runId, options, new Date()));
      process.stdout.write(text);
    });
}

/**
 * The command's whole output.
 * @throws NotFoundError when there is no such run.
 */
export async function formatShowCommand(
  db: Queryable, runId: string, options: { json?: boolean }, now: Date,
): Promise<string> {
  const detail = await readRunDetail(db, runId);
  if (!detail) throw new NotFoundError(`run ${runId} not found`);
  if (options.json) return `${JSON.stringify(detail, null, 2)}\n`;
  const sections = [
    runSection(detail, now), segmentsSection(detail, now), stepsSection(detail), effectsSection(detail),
    messagesSection(detail),
  ];
  return sections.join('\n');
}

function preview(value: unknown, max = 80): string {
  const text = (typeof value === 'string' ? value : JSON.stringify(value) ?? '').replace(/\s+/g, ' ');
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function runSection({ run, ownerId, effects, jobDueAt, usage, regenerates, restoredOver, segments }: RunDetail, now: Date): string {
  const lines = [
    `run ${run.id}`,
    `  thread    ${run.threadId} (owner ${ownerId}, turn ${run.turnNo})`,
    `  status    ${run.status}   fence ${run.fence}   attempts ${run.attempts}`,
    `  lease     ${leaseLine(run, now)}`,
    `  created   ${run.createdAt.toISOString()}   updated ${run.updatedAt.toISOString()}`,
  ];
  if (jobDueAt) lines.push(`  job       ${describeDue(jobDueAt, now)}`);
  if (usage) lines.push(`  tokens    ${describeUsage(usage)}`);
  // (The row keeps what it waited for after the answer; it waits only while waiting_input.)
  if (run.waitingFor && run.status === 'waiting_input') lines.push(`  waiting   ${describeWaiting(run.waitingFor)}`);
  if (run.cancelRequestedAt) lines.push(`  cancel    requested ${run.cancelRequestedAt.toISOString()}`);
  if (run.takenOverBy) lines.push(`  takeover  by ${run.takenOverBy}`);
  if (regenerates) {
    lines.push(`  replaces  run ${regenerates.runId} (its reply ${regenerates.edited ? 'asked again, the message edited' : 'asked again'})`);
  }
  if (restoredOver) lines.push(`  restored  in place of run ${restoredOver} (an earlier answer put back)`);
  // Why an aborted run was given up: its cancel says so above; a salvage, only in its event.
  const salvaged = segments.find((s) => s.salvaged !== undefined)?.salvaged;
  if (salvaged) lines.push(`  salvaged  ${salvaged}`);
  if (run.supersededBy) lines.push(`  replaced  by run ${run.supersededBy} (out of the conversation: a reply asked again, or an earlier answer put back)`);
  // A closed run's partial is history; while it is open it is what viewers see right now.
  if (run.partial && !isClosed(run.status)) lines.push(`  partial   ${preview(run.partial)}`);
  lines.push(...inDoubtLines(run.id, effects));
  return `${lines.join('\n')}\n`;
}

/**
 * What the run waits for, for a person: the question and its id, or the tool call to approve
 * with its input (the id is what `POST /api/runs/:id/input` names); anything else as JSON.
 */
function describeWaiting(waitingFor: Record<string, unknown>): string {
  const { id, kind } = waitingFor;
  if (kind === 'question' && typeof waitingFor.question === 'string') {
    return `an answer to question ${String(id)}: ${preview(JSON.stringify(waitingFor.question), 90)}`;
  }
  if (kind === 'approval' && typeof waitingFor.toolName === 'string') {
    return `approval ${String(id)} of ${waitingFor.toolName} ${preview(waitingFor.input, 70)}`;
  }
  return preview(waitingFor);
}

/**
 * One line per effect in doubt, key and tool: what an operator checks with the outside system;
 * then the command that records what they found.
 */
function inDoubtLines(runId: string, effects: RunDetail['effects']): string[] {
  const inDoubt = effects.filter((e) => e.status === 'in_doubt');
  if (inDoubt.length === 0) return [];
  return [
    ...inDoubt.map((e, i) => `  ${i === 0 ? 'in doubt ' : '         '} ${e.key}  tool ${e.tool}`),
    `  verdict   agent-kit resolve-effect ${runId} ${inDoubt.length === 1 ? inDoubt[0]!.key : 'KEY'} --happened` +
      ' (or --did-not-happen, once the segment that started it can no longer act)',
  ];
}

const count = (n: number | undefined) => (n ?? 0).toLocaleString('en-US');

/** "1,234 in (1,000 cached), 56 out (20 reasoning), 3 model steps", with what was not reported said so. */
function describeUsage(usage: RunUsage): string {
  const input = `${count(usage.inputTokens)} in${usage.cacheReadTokens ? ` (${count(usage.cacheReadTokens)} cached)` : ''}`;
  const output = `${count(usage.outputTokens)} out${usage.reasoningTokens ? ` (${count(usage.reasoningTokens)} reasoning)` : ''}`;
  const steps = usage.reported === usage.modelSteps
    ? `${usage.modelSteps} model step${usage.modelSteps === 1 ? '' : 's'}`
    : `${usage.reported} of ${usage.modelSteps} model steps reported`;
  return `${input}, ${output}, ${steps}`;
}

/** "due in 27s" (a drain takes it from then) or "due since 3s" (waiting for a drain). */
function describeDue(at: Date, now: Date): string {
  const ms = at.getTime() - now.getTime();
  return ms > 0 ? `due in ${formatDuration(ms)}` : `due since ${formatDuration(-ms)}`;
}

function leaseLine(run: RunDetail['run'], now: Date): string {
  if (!run.owner) return '-';
  return `${run.owner}, ${run.leaseExpiresAt ? describeExpiry(run.leaseExpiresAt, now) : 'no expiry'}`;
}

function section(title: string, count: number, body: () => string): string {
  return count === 0 ? `${title}: none\n` : `${title} (${count})\n${indent(body())}`;
}

function indent(text: string): string {
  return text.split('\n').map((line) => (line ? `  ${line}` : line)).join('\n');
}

function segmentsSection({ segments, run }: RunDetail, now: Date): string {
  const rows = segments.map((s) => [
    String(s.fence), String(s.attempt ?? '-'), s.owner ?? '-', s.startedAt.toISOString(), s.deadlineAt ?? '-',
    endedAs(s, run, now),
  ]);
  // A claim that left nothing in the log has a row too, so that every attempt spent shows: its
  // process lacked a tool of the run (ADR-0110), or stopped or died before a segment began.
  const listed = new Set(segments.map((s) => s.fence));
  for (let fence = run.fence; fence >= 1; fence--) {
    if (listed.has(fence)) continue;
    const at = rows.findIndex((row) => Number(row[0]) > fence);
    const holding = fence === run.fence && run.status === 'running' && run.leaseExpiresAt !== null && run.leaseExpiresAt > now;
    const silent = [String(fence), '-', run.owner && holding ? run.owner : '-', '-', '-', holding
      ? 'claimed, no segment begun: it settles what a dead segment started, or left the run for a tool it lacks (see its log)'
      : 'no segment began (its process lacked a tool the run had started, or stopped or died first)'];
    rows.splice(at === -1 ? rows.length : at, 0, silent);
  }
  return section('segments', rows.length, () => formatTable(
    // The deadline is when a segment stops itself: past it, an effect it started in doubt can no
    // longer happen late (the operating guide's verdict on an effect in doubt).
    ['FENCE', 'ATTEMPT', 'OWNER', 'STARTED', 'DEADLINE', 'ENDED AS'],
    rows,
  ));
}

/**
 * A segment that wrote no end before the next claim: a segment that stops at its deadline with a
 * tool call under way leaves its lease to run out too (the call may still act), as a dead one does.
 */
const lostText = 'lost (no end written: its process died or froze, or its deadline cut a tool call; the next fence took the run on)';

/** Why a segment handed its run on (ADR-0121), in words; the run may have been cancelled or held meanwhile. */
function parkReasonText(reason: string | undefined): string {
  switch (reason) {
    case 'slice': return " (a slice: its invocation's time ran out)";
    case 'stop': return ' (its process was stopping)';
    case 'store-error': return ' (handed on after a store error)';
    case 'started-late': return ' (started too late in its invocation; no attempt spent)';
    default: return '';
  }
}

/** How a segment ended, why it failed, or that it still holds the run (or held it until its lease ran out). */
function endedAs(s: RunDetail['segments'][number], run: RunDetail['run'], now: Date): string {
  if (s.endedAs === 'failed') return `failed: ${preview(s.error ?? '', 110)}`;
  if (s.endedAs === 'lost') return lostText;
  if (s.salvaged !== undefined && s.endedAs !== null) return `${s.endedAs} (salvaged: the crash budget was spent)`;
  if (s.endedAs !== null) return `${s.endedAs}${s.retryDueAt ? ' (model retry)' : parkReasonText(s.parkReason)}`;
  // (A later claim holds the run: this one never ended, and its lease ran out.)
  if (s.fence < run.fence) return lostText;
  const expired = run.status === 'running' && s.fence === run.fence && run.leaseExpiresAt !== null && run.leaseExpiresAt <= now;
  return expired ? 'lease expired (dead or frozen: the reaper hands the run on)' : 'running';
}

function stepsSection({ steps }: RunDetail): string {
  return section('steps', steps.length, () => formatTable(
    ['#', 'KIND', 'FENCE', 'SUMMARY'],
    steps.map((s) => [String(s.stepNo), s.kind, String(s.fence), stepSummary(s.kind, s.data)]),
  ));
}

function stepSummary(kind: string, data: Record<string, unknown>): string {
  if (kind === 'tool') {
    return `${String(data.toolName)} → ${String(data.outcome)}: ${preview(data.output, 50)}`;
  }
  const toolCalls = Array.isArray(data.toolCalls) ? (data.toolCalls as { toolName?: string }[]) : [];
  const calls = toolCalls.map((c) => c.toolName);
  // What the step cost and whether it kept reasoning for the next (ADR-0064, ADR-0065).
  const usage = data.usage as { inputTokens?: number; outputTokens?: number } | undefined;
  const tokens = usage ? `  (${count(usage.inputTokens)} in, ${count(usage.outputTokens)} out)` : '';
  const reasoning = Array.isArray(data.reasoning) && data.reasoning.length > 0 ? '  [reasoning]' : '';
  // A reply the model's output limit cut, its continuations spent or impossible (ADR-0068).
  const cut = data.finishReason === 'length' ? '  [output limit]' : '';
  return `${preview(data.text ?? '', 50)}${calls.length ? `  [calls ${calls.join(', ')}]` : ''}${reasoning}${cut}${tokens}`;
}

function effectsSection({ effects }: RunDetail): string {
  return section('effects', effects.length, () => formatTable(
    ['KEY', 'TOOL', 'STATUS', 'FENCE', 'RESULT'],
    effects.map((e) => [e.key, e.tool, e.status, String(e.fence), effectResult(e.result)]),
  ));
}

/** An operator's verdict in words (resolve-effect: who found what, their note), else the JSON. */
function effectResult(result: unknown): string {
  const verdict = (result as { resolved?: { by?: unknown; happened?: unknown; note?: unknown } } | null)?.resolved;
  if (!verdict || typeof verdict.happened !== 'boolean') return preview(result ?? '-', 40);
  const note = typeof verdict.note === 'string' && verdict.note !== '' ? ` (${verdict.note})` : '';
  return preview(`${String(verdict.by)} checked: ${verdict.happened ? 'happened' : 'did not happen'}${note}`, 60);
}

function messagesSection({ messages, question }: RunDetail): string {
  // The message it answers, when a regeneration took it along to the run that answers it now.
  const moved = question && !messages.some((m) => m.id === question.id) ? [question] : [];
  return section('messages', moved.length + messages.length, () => [
    ...moved.map((m) => `${m.role} (now with run ${m.runId ?? '-'}): ${preview(m.text, 100)}\n`),
    ...messages.map((m) => `${m.role}${m.partial ? ' (partial)' : ''}: ${preview(m.text, 100)}\n`),
  ].join(''));
}
