// agent-kit/client: what a browser needs to talk to agent-kit's routes through the AI SDK's
// `useChat` (ADR-0075). It imports only the `ai` package, never the server side (no pg, no
// PGlite), so a bundler can ship it to the page.
import { DefaultChatTransport, type UIMessage } from 'ai';

/** What agent-kit puts in a reply's `metadata` (the UI message stream's `start` and `finish`). */
export interface AgentKitMessageMetadata {
  runId: string;
  threadId?: string;
  /** Once the stream ends: the run's status (`completed`, `waiting_input`, `streaming`, …). */
  status?: string;
  /** Once the run closed: the stored message's id, and whether it is a salvaged partial. */
  messageId?: string | null;
  partial?: boolean;
}

export interface AgentKitTransportOptions {
  /** Where the routes are: '' (the default) for the page's own origin, else e.g. `https://chat.example.com`. */
  origin?: string;
  /** Sent with every request (your session's header, say). */
  headers?: Record<string, string> | Headers;
  credentials?: RequestCredentials;
  /** A fetch of your own (tests, a proxy). */
  fetch?: typeof globalThis.fetch;
}

/** The thread of a chat's replies: the last reply's `metadata.threadId`; none before the first. */
export function threadIdOf(messages: readonly UIMessage[]): string | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const threadId = (messages[i]!.metadata as Partial<AgentKitMessageMetadata> | undefined)?.threadId;
    if (typeof threadId === 'string') return threadId;
  }
  return undefined;
}

/** A message's text: its text parts, joined. */
function textOf(message: UIMessage): string {
  return message.parts.map((part) => (part.type === 'text' ? part.text : '')).join('');
}

/**
 * The transport for `useChat`: each message goes to `POST /api/chat?format=ai-sdk` with the
 * chat's thread (so a chat stays one agent-kit thread) and its id as `clientMessageId` (a resent
 * message is stored once). With `resume: true`, the chat's id must be its thread's: the thread's
 * turn under way (else its latest) streams again from its start, live if it is still going.
 */
export function agentKitTransport(options: AgentKitTransportOptions = {}): DefaultChatTransport<UIMessage> {
  const origin = options.origin ?? '';
  return new DefaultChatTransport<UIMessage>({
    api: `${origin}/api/chat?format=ai-sdk`,
    ...(options.headers ? { headers: options.headers } : {}),
    ...(options.credentials ? { credentials: options.credentials } : {}),
    ...(options.fetch ? { fetch: options.fetch } : {}),
    prepareSendMessagesRequest: ({ messages }) => {
      const last = messages.at(-1);
      if (!last || last.role !== 'user') throw new Error('agent-kit takes the chat\'s last message as the user\'s next one');
      return { body: { threadId: threadIdOf(messages), message: textOf(last), clientMessageId: last.id } };
    },
    prepareReconnectToStreamRequest: ({ id }) => ({
      api: `${origin}/api/threads/${encodeURIComponent(id)}/events?format=ai-sdk`,
    }),
  });
}

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
  return read.messages.map((m) => ({
    id: m.role === 'assistant' && m.runId ? m.runId : (m.clientMessageId ?? m.id),
    role: m.role === 'assistant' ? 'assistant' : 'user',
    parts: [{ type: 'text', text: m.text }],
    metadata: m.role === 'assistant' && m.runId ? { ...metadata, runId: m.runId } : metadata,
  }));
}
