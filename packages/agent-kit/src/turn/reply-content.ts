// What a closed run's message holds besides its text (ADR-0087): the questions and approvals the
// run asked the user, each where it stands in the text, with its answer and, when the user typed
// the answer as a chat message, that message. A reader that shows only `content.text` loses
// nothing; one that rebuilds the chat (agent-kit/client's toUIMessages) places each question, and
// puts a typed answer between the text before it and the text after it, as the live chat had them.
import type { Queryable } from '../store/db.js';
import type { AgentTool } from '../model/agent-tool.js';
import { toolKind } from '../model/agent-tool.js';
import { loadJournal, type Step, type ToolStep } from './journal.js';
import { answerIn, approves } from './tool-calls.js';

/** A question or an approval as the run's message keeps it (`content.asked`). */
export type Asked = (
  | { id: string; kind: 'question'; toolName: string; question: string; answer?: string }
  | { id: string; kind: 'approval'; toolName: string; input: unknown; approved?: boolean }
) & {
  /** Where it was asked: the length of the reply's text at that point. */
  at: number;
  /** The chat message that answered it, when one did (a message sent while the run waited). */
  answeredBy?: string;
};

/**
 * The questions and approvals in `journal`, in the order asked; the chat messages that answered
 * them are read from the run's inputs, and only when there is one to read (a turn that asked
 * nothing costs no query), with an answer the journal does not hold yet.
 */
export async function askedIn(
  db: Queryable, runId: string, journal: readonly Step[], tools: Record<string, AgentTool<any, any>>,
): Promise<Asked[]> {
  const results = new Map<string, ToolStep>();
  for (const step of journal) if (step.kind === 'tool') results.set(step.toolCallId, step);
  const asked: Asked[] = [];
  let at = 0;
  for (const step of journal) {
    if (step.kind !== 'model') continue;
    at += step.text.length;
    for (const call of step.toolCalls) {
      const tool = tools[call.toolName];
      const kind = tool ? toolKind(tool) : 'effect';
      if (kind === 'effect') continue;
      const result = results.get(call.toolCallId);
      if (kind === 'question') {
        const question = (call.input as { question?: unknown } | null)?.question;
        const answer = (result?.output as { answer?: unknown } | null | undefined)?.answer;
        asked.push({
          id: call.toolCallId, kind, toolName: call.toolName, question: typeof question === 'string' ? question : '', at,
          ...(result?.outcome === 'answered' && typeof answer === 'string' ? { answer } : {}),
        });
      } else {
        asked.push({
          id: call.toolCallId, kind, toolName: call.toolName, input: call.input, at,
          ...(result ? { approved: result.outcome !== 'denied' } : {}),
        });
      }
    }
  }
  if (asked.length === 0) return asked;
  // The inputs name the chat message that answered, and hold an answer the journal does not have
  // yet: one given to a run whose next segment died before it read it (a salvaged run).
  const inputs = await db.query<{ question_id: string; data: Record<string, unknown> }>(
    'select question_id, data from agent_kit_inputs where run_id = $1', [runId]);
  const given = new Map(inputs.map((row) => [row.question_id, row.data]));
  return asked.map((a) => {
    const data = given.get(a.id);
    if (!data) return a;
    const answeredBy = typeof data.messageId === 'string' ? { answeredBy: data.messageId } : {};
    if (results.has(a.id)) return { ...a, ...answeredBy };
    return a.kind === 'question' ? { ...a, answer: answerIn(data), ...answeredBy } : { ...a, approved: approves(data), ...answeredBy };
  });
}

/**
 * What a salvaged message holds besides its text: the run's questions, read from its journal (a
 * run given up at its crash budget has no segment that holds the journal).
 */
export async function askedOfRun(
  db: Queryable, runId: string, tools: Record<string, AgentTool<any, any>>,
): Promise<{ asked?: Asked[] }> {
  const asked = await askedIn(db, runId, await loadJournal(db, runId), tools);
  return asked.length > 0 ? { asked } : {};
}

/**
 * The reply's text as its viewers had it at the thread's event the cancel named (ADR-0090): the
 * text of the run's last `segment-started` up to that event, with the `model-retry` texts and
 * `text-delta` events after it folded in as a viewer's stream folds them. Null when the cancel
 * named no event (an operator's, the CLI's): the run keeps its whole text.
 */
export async function textShownAtCancel(db: Queryable, runId: string, threadId: string): Promise<string | null> {
  // One statement: the run's row (its seq, or null), then the events of the fold, if any.
  const rows = await db.query<{ shown: string | number | null; type: string | null; text: string | null }>(
    `select r.cancel_shown_seq as shown, e.type, e.data->>'text' as text
     from agent_kit_runs r
     left join agent_kit_thread_events e on e.thread_id = $1 and e.run_id = r.id and e.seq <= r.cancel_shown_seq
       and e.seq >= coalesce((select max(b.seq) from agent_kit_thread_events b
         where b.run_id = r.id and b.type = 'segment-started' and b.seq <= r.cancel_shown_seq), 0)
       and e.type in ('segment-started', 'model-retry', 'text-delta')
     where r.id = $2
     order by e.seq`, [threadId, runId]);
  if (rows[0]?.shown === null || rows[0]?.shown === undefined) return null;
  let text = '';
  for (const event of rows) {
    if (event.type === 'text-delta') text += event.text ?? '';
    else if (event.type !== null && event.text !== null) text = event.text; // a segment or a retried step goes on from its text
  }
  return text;
}
