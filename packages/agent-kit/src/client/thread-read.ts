// A thread read (GET /api/threads/:id) as `useChat` starts from it: its messages in the order and
// under the ids the live chat had them, and whether a turn is under way to resume.
import type { UIMessage } from 'ai';
import type { Regenerates } from './metadata.js';

/** A thread as `GET /api/threads/:id` answers it, as far as `toUIMessages` reads it. */
export interface ThreadRead {
  thread: { id: string; lastSeq?: number };
  messages: ReadonlyArray<{
    id: string; runId: string | null; clientMessageId?: string | null; role: string; text: string;
    /** A reply's `asked`: the questions its run asked, and the chat messages that answered them (ADR-0087). */
    content?: { asked?: unknown; operator?: unknown };
  }>;
  /**
   * The thread's runs (the read has them; `hasTurnUnderWay` looks at their status). A regenerated
   * run names the run whose reply it replaced (ADR-0091): its reply's metadata says so.
   */
  runs?: ReadonlyArray<{
    id?: string; status: string; regenerates?: Regenerates | null; restoredOver?: string | null;
    /**
     * A turn under way whose question was answered by a message the user sent: its reply up to
     * the last such answer (the text, and the questions as `content.asked` holds them).
     */
    replySoFar?: { text: string; asked?: unknown };
  }>;
}

type ReadMessage = ThreadRead['messages'][number];

/** The statuses of a run that is over: its message is in the thread's read, and a turn queued behind it may start. */
export const closedStatuses: ReadonlySet<string> = new Set(['completed', 'failed', 'aborted']);

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
 * user's message under the id it was sent with; each message names the thread. A reply shows
 * each question or approval its run asked as the `data-agent-kit-input` part the live chat had,
 * and one the user answered by sending a message is split there, as the live chat had it: the
 * reply up to the question, the message, and the rest of the reply under the id
 * `<run id>:<the message's id>`. A turn under way has an empty reply after its message, which a
 * resumed stream fills in its place (ADR-0088).
 */
export function toUIMessages(read: ThreadRead): UIMessage[] {
  const metadata = { threadId: read.thread.id };
  const byId = new Map(read.messages.map((m) => [m.id, m]));
  const placed = new Set<ReadMessage>();
  const shown: UIMessage[] = [];
  const awaited = awaitedReplies(read);
  const runs = new Map((read.runs ?? []).flatMap((run) => (run.id ? [[run.id, run] as const] : [])));
  const answerLinks = (runId: string) => {
    const run = runs.get(runId);
    return { ...(run?.regenerates ? { regenerates: run.regenerates } : {}), ...(run?.restoredOver ? { restoredOver: run.restoredOver } : {}) };
  };
  for (const m of inTurnOrder(read.messages)) {
    if (placed.has(m)) continue; // an answer, shown inside its reply
    placed.add(m);
    if (m.role === 'assistant' && m.runId) {
      // An operator's reply names the operator, as its live stream's finish does (ADR-0114).
      const operator = typeof m.content?.operator === 'string' ? { operator: m.content.operator } : {};
      shown.push(...replyPieces(m, m.runId, byId, placed, { ...metadata, ...answerLinks(m.runId), ...operator }));
    }
    // (A user's message names its turn's run too: a regenerate names it as the reply it replaces, ADR-0092.)
    else shown.push({ id: uiIdOf(m), role: m.role === 'assistant' ? 'assistant' : 'user', parts: [{ type: 'text', text: m.text }],
      metadata: m.role === 'user' && m.runId ? { ...metadata, runId: m.runId } : metadata });
    const soFar = m.role === 'user' && m.runId ? runs.get(m.runId)?.replySoFar : undefined;
    if (soFar && m.runId && !closedStatuses.has(runs.get(m.runId)!.status)) {
      shown.push(...replyUnderWay(m.runId, soFar, byId, placed, { ...metadata, ...answerLinks(m.runId) }));
    } else if (m.runId && awaited.get(m.runId) === m) {
      shown.push({ id: m.runId, role: 'assistant', parts: [], metadata: { ...metadata, runId: m.runId } });
    }
  }
  return shown;
}

/**
 * A turn under way that the user answered by typing a message: its reply so far in pieces around
 * the answers, as the live chat had it, then an empty reply after the last answer, under the id
 * `<run id>:<answer>`, which the resumed stream fills (the route goes on after that answer).
 */
function replyUnderWay(
  runId: string, soFar: { text: string; asked?: unknown }, byId: ReadonlyMap<string, ReadMessage>, placed: Set<ReadMessage>,
  metadata: { threadId: string; regenerates?: Regenerates },
): UIMessage[] {
  const reply: ReadMessage = { id: runId, runId, role: 'assistant', text: soFar.text, content: { asked: soFar.asked } };
  const pieces = replyPieces(reply, runId, byId, placed, metadata);
  const lastAnswer = askedOf(reply).flatMap((a) => (a.answeredBy === undefined ? [] : [byId.get(a.answeredBy)])).at(-1);
  const rest = lastAnswer ? `${runId}:${uiIdOf(lastAnswer)}` : runId;
  if (pieces.at(-1)?.id !== rest) pieces.push({ id: rest, role: 'assistant', parts: [], metadata: { ...metadata, runId } });
  return pieces;
}

/**
 * Each turn under way (the read's runs not closed) whose reply the read does not have, by its run:
 * the last message of the user's it has (the one that started it, or an answer to it since).
 */
function awaitedReplies(read: ThreadRead): Map<string, ReadMessage> {
  const underWay = new Set((read.runs ?? []).flatMap((run) => (run.id && !closedStatuses.has(run.status) ? [run.id] : [])));
  const awaited = new Map<string, ReadMessage>();
  for (const m of read.messages) if (m.role === 'user' && m.runId && underWay.has(m.runId)) awaited.set(m.runId, m);
  for (const m of read.messages) if (m.role === 'assistant' && m.runId) awaited.delete(m.runId);
  return awaited;
}

/** The id a chat knew a user's message by: the one it was sent with. */
function uiIdOf(m: ReadMessage): string {
  return m.clientMessageId ?? m.id;
}

/** A question or approval as a reply's `content.asked` holds it (what a reader needs of it). */
interface Asked {
  id: string; kind: string; at: number; answeredBy?: string;
  toolName?: unknown; question?: unknown; input?: unknown; answer?: unknown; approved?: unknown;
}

function askedOf(m: ReadMessage): Asked[] {
  const asked = m.content?.asked;
  if (!Array.isArray(asked)) return [];
  return asked.filter((a): a is Asked => typeof a === 'object' && a !== null
    && typeof (a as Asked).id === 'string' && typeof (a as Asked).kind === 'string' && Number.isInteger((a as Asked).at));
}

/**
 * A reply as the chat showed it: its text with its questions in place, in one message, or in one
 * more after each question answered by a message the user sent (that message between them).
 */
function replyPieces(
  reply: ReadMessage, runId: string, byId: ReadonlyMap<string, ReadMessage>, placed: Set<ReadMessage>,
  metadata: { threadId: string; regenerates?: Regenerates; operator?: string },
): UIMessage[] {
  const pieces: UIMessage[] = [];
  let piece: UIMessage = { id: runId, role: 'assistant', parts: [], metadata: { ...metadata, runId } };
  let cursor = 0;
  const textTo = (at: number) => {
    if (at > cursor) piece.parts.push({ type: 'text', text: reply.text.slice(cursor, at) });
    cursor = Math.max(cursor, at);
  };
  for (const asked of askedOf(reply)) {
    textTo(Math.min(asked.at, reply.text.length));
    const { at: _at, answeredBy: _by, ...data } = asked;
    piece.parts.push({ type: 'data-agent-kit-input', id: asked.id, data: { ...data, runId } });
    const answer = asked.answeredBy === undefined ? undefined : byId.get(asked.answeredBy);
    if (!answer || answer.role !== 'user' || answer.runId !== runId || placed.has(answer)) continue;
    placed.add(answer);
    pieces.push(piece, { id: uiIdOf(answer), role: 'user', parts: [{ type: 'text', text: answer.text }], metadata: { threadId: metadata.threadId, runId } });
    piece = { id: `${runId}:${uiIdOf(answer)}`, role: 'assistant', parts: [], metadata: { ...metadata, runId } };
  }
  textTo(reply.text.length);
  // (The first piece always shows, as a reply without text did; a later one only with something in it.)
  if (pieces.length === 0 && piece.parts.length === 0) piece.parts.push({ type: 'text', text: '' });
  if (pieces.length === 0 || piece.parts.length > 0) pieces.push(piece);
  return pieces;
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
