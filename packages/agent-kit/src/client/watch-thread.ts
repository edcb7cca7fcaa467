// A `useChat` page hears only its own turns' streams, so what another page (a second tab, another
// device) does to the thread stayed out of it until a reload: a message sent, a reply asked again,
// an earlier answer put back. watchThread follows the thread's event log (agent-kit's own SSE
// format) from a seq on and reports those events; when one is news to the chat (`isNewToChat`),
// the page reads the thread again, shows it when it shows something else (`showsConversation`),
// and resumes a turn under way (ADR-0097).
import type { UIMessage } from 'ai';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import type { AgentKitMessageMetadata } from './metadata.js';
import { toUIMessages, type ThreadRead } from './thread-read.js';

/** The events that change what a thread's conversation holds. */
export const conversationEventTypes: ReadonlySet<string> = new Set(['message', 'turn-regenerated', 'turn-restored']);

/** One event that changed the conversation, as the events route sends it. */
export interface ThreadChange {
  seq: number;
  type: string;
  runId: string | null;
  data: Record<string, unknown>;
}

export interface WatchThreadOptions {
  threadId: string;
  /** The thread's last event the page shows (a thread read's `lastSeq`): the watch reads after it. */
  after: number;
  /** Each event that changed the conversation, in order, once. */
  onChange: (change: ThreadChange) => void;
  /**
   * The watch ended because the route refused it: 401 or 403 (the session ended or changed), 404
   * (no such thread, or not this user's) or 409 (`after` is past the thread's last event: a seq
   * of another thread, or a database restored from a backup; read the thread again). It does not
   * read again.
   */
  onEnd?: (status: number) => void;
  /** Where the routes are ('' for the page's own origin), as for `agentKitTransport`. */
  origin?: string;
  headers?: Record<string, string> | Headers;
  credentials?: RequestCredentials;
  fetch?: typeof globalThis.fetch;
  /** The wait before reading again after a failed read, doubled after each failure up to 30 s. Default 1 s. */
  retryMs?: number;
}

export interface ThreadWatch {
  /** Stops reading; no more calls come. */
  close(): void;
  /** The last event read. */
  readonly seq: number;
}

const refusals = new Set([401, 403, 404, 409]);
const maxRetryMs = 30_000;

/**
 * Follow the thread's events after `after`: each that changed the conversation goes to
 * `onChange`. A stream that ends (its budget, a deploy) or breaks is read again from the last
 * event read, at once after a clean end and after a growing wait after a failure.
 */
export function watchThread(options: WatchThreadOptions): ThreadWatch {
  const fetchEvents = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const url = (after: number) =>
    `${options.origin ?? ''}/api/threads/${encodeURIComponent(options.threadId)}/events?after=${after}`;
  const aborts = new AbortController();
  let seq = options.after;
  let failures = 0;

  /** One stream: 'ended' on a refusal, else whether it brought any event. */
  async function readOnce(): Promise<'ended' | 'read' | 'nothing'> {
    const response = await fetchEvents(url(seq), {
      headers: options.headers, credentials: options.credentials, signal: aborts.signal,
    });
    if (refusals.has(response.status)) {
      options.onEnd?.(response.status);
      return 'ended';
    }
    if (!response.ok || !response.body) throw new Error(`the events route answered ${response.status}`);
    const from = seq;
    const reader = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
    try {
      for (let next = await reader.read(); !next.done; next = await reader.read()) {
        if (next.value.event === 'error') throw new Error(`the events stream failed: ${next.value.data}`);
        const event = JSON.parse(next.value.data) as ThreadChange;
        if (!(event.seq > seq)) continue;
        seq = event.seq;
        failures = 0;
        if (conversationEventTypes.has(event.type) && !aborts.signal.aborted) {
          options.onChange({ seq: event.seq, type: event.type, runId: event.runId ?? null, data: event.data ?? {} });
        }
      }
    } finally {
      await reader.cancel().catch(() => undefined); // (a stream left on an error is not left open)
    }
    return seq > from ? 'read' : 'nothing';
  }

  const wait = (ms: number) => new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    aborts.signal.addEventListener('abort', () => (clearTimeout(timer), resolve(undefined)), { once: true });
  });

  void (async () => {
    const retryMs = options.retryMs ?? 1_000;
    while (!aborts.signal.aborted) {
      try {
        const outcome = await readOnce();
        if (outcome === 'ended') return;
        // (A stream that ended with nothing new is read again after a pause, never in a tight loop.)
        if (outcome === 'nothing') await wait(retryMs);
      } catch {
        if (aborts.signal.aborted) return;
        await wait(Math.min(retryMs * 2 ** failures, maxRetryMs));
        failures += 1;
      }
    }
  })();

  return {
    close: () => aborts.abort(),
    get seq() {
      return seq;
    },
  };
}

/**
 * Whether a change is news to the chat: a run it shows no reply of (another page's message, a
 * regeneration, a restore), or a message to a reply it shows waiting for an answer that came
 * after the last event the reply's stream went through (another page answered it). The chat's
 * own turns are not: it shows their replies, streamed past the messages that began them. Nor is
 * its own answer typed to a question: the rest of the reply it shows, in a message of its own
 * after the answer (ADR-0087), streamed past it.
 */
export function isNewToChat(messages: readonly UIMessage[], change: ThreadChange): boolean {
  if (change.runId === null) return false;
  if (!messages.some((message) => message.role === 'assistant' && message.id === change.runId)) return true;
  // The reply as far as the chat shows it: its last piece (a typed answer starts another).
  const last = messages.findLast((message) => message.role === 'assistant'
    && (message.id === change.runId || (message.metadata as Partial<AgentKitMessageMetadata> | undefined)?.runId === change.runId))!;
  const { status, seq } = (last.metadata ?? {}) as Partial<AgentKitMessageMetadata>;
  return change.type === 'message' && status === 'waiting_input' && change.seq > (seq ?? 0);
}

/**
 * Whether the chat shows the thread's conversation as read: the same messages, in order, under
 * the same ids. When it does not, `setMessages(toUIMessages(read))` brings it up to date.
 */
export function showsConversation(messages: readonly UIMessage[], read: ThreadRead): boolean {
  const expected = toUIMessages(read);
  return expected.length === messages.length && expected.every((message, index) => message.id === messages[index]!.id);
}
