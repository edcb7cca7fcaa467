// A thread read (GET /api/threads/:id) as `useChat` starts from it: its messages in the order and
// under the ids the live chat had them, and whether a turn is under way to resume.
import type { UIMessage } from 'ai';

/** A thread as `GET /api/threads/:id` answers it, as far as `toUIMessages` reads it. */
export interface ThreadRead {
  thread: { id: string };
  messages: ReadonlyArray<{ id: string; runId: string | null; clientMessageId?: string | null; role: string; text: string }>;
  /** The thread's runs (the read has them; `hasTurnUnderWay` looks at their status). */
  runs?: ReadonlyArray<{ status: string }>;
}

/** The statuses of a run that is over: its message is in the thread's read. */
const closedStatuses: ReadonlySet<string> = new Set(['completed', 'failed', 'aborted']);

/**
 * Whether a thread read shows a turn not yet over (running, queued, or waiting for an answer or a
 * takeover): what `useChat`'s `resume` is for. When every turn is over, the read already holds
 * every reply, and resuming would only stream the last one again. A read without its runs: true.
 */
export function hasTurnUnderWay(read: ThreadRead): boolean {
  return read.runs === undefined || read.runs.some((run) => !closedStatuses.has(run.status));
}

/**
 * A thread read back as `useChat`'s starting `messages`, under the ids the chat knew them by: a
 * reply under its run's id (the id its live stream had, so a resumed stream takes its place), a
 * user's message under the id it was sent with; each message names the thread.
 */
export function toUIMessages(read: ThreadRead): UIMessage[] {
  const metadata = { threadId: read.thread.id };
  return inTurnOrder(read.messages).map((m) => ({
    id: m.role === 'assistant' && m.runId ? m.runId : (m.clientMessageId ?? m.id),
    role: m.role === 'assistant' ? 'assistant' : 'user',
    parts: [{ type: 'text', text: m.text }],
    metadata: m.role === 'assistant' && m.runId ? { ...metadata, runId: m.runId } : metadata,
  }));
}

/**
 * `messages` (stored in the order they were written) as the chat had them: each reply right after
 * the message that started its turn. A message sent while a turn ran is written before that
 * turn's reply, but the live chat (and the model, turn by turn) had the reply first.
 */
function inTurnOrder<M extends ThreadRead['messages'][number]>(messages: readonly M[]): M[] {
  const replies = new Map<string, M>();
  for (const m of messages) if (m.role === 'assistant' && m.runId) replies.set(m.runId, m);
  const placed = new Set<M>();
  const ordered: M[] = [];
  for (const m of messages) {
    if (placed.has(m)) continue;
    ordered.push(m);
    placed.add(m);
    const reply = m.role === 'user' && m.runId ? replies.get(m.runId) : undefined;
    if (reply && !placed.has(reply)) {
      ordered.push(reply);
      placed.add(reply);
    }
  }
  return ordered;
}
