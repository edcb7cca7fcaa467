// agent-kit/client: what a browser needs to talk to agent-kit's routes through the AI SDK's
// `useChat` (ADR-0075). It imports only the `ai` package and the SSE parser `ai` uses itself
// (`eventsource-parser`), never the server side (no pg, no PGlite), so a bundler can ship it to
// the page.
import { DefaultChatTransport, type UIMessage, type UIMessageChunk } from 'ai';
import { goesOnAfter, heldAnswer, inOwnMessage, type HeldAnswer } from './answers.js';
import { chunksOf, oneAfterAnother, readOn, type Cut, type Origin } from './read-on.js';
import { threadIdOf } from './metadata.js';
import { RepliesSeen, uuidShaped } from './replies.js';

export { isApproval } from '../approval.js';
export { isBlank } from '../blank.js';
export { hasTurnUnderWay, toUIMessages, type ThreadRead } from './thread-read.js';
export { withoutReplacedText } from './replaced-text.js';
export { threadIdOf, type AgentKitMessageMetadata, type Regenerates } from './metadata.js';
export {
  watchThread, isNewToChat, showsConversation, conversationEventTypes, type WatchThreadOptions, type ThreadWatch, type ThreadChange,
} from './watch-thread.js';

export interface AgentKitTransportOptions {
  /** Where the routes are: '' (the default) for the page's own origin, else e.g. `https://chat.example.com`. */
  origin?: string;
  /** Sent with every request (your session's header, say). */
  headers?: Record<string, string> | Headers;
  credentials?: RequestCredentials;
  /** A fetch of your own (tests, a proxy). */
  fetch?: typeof globalThis.fetch;
  /**
   * `useChat`'s `stop()` cancels the reply's run (`POST /api/runs/:id/cancel`): it ends as
   * `aborted` with the text it had. Default true. False: `stop()` only stops reading, and the
   * turn goes on to its end on the server, as it does when the page closes.
   */
  cancelOnStop?: boolean;
}

/** A message's text: its text parts, joined. */
function textOf(message: UIMessage): string {
  return message.parts.map((part) => (part.type === 'text' ? part.text : '')).join('');
}

/**
 * The transport for `useChat`: each message goes to `POST /api/chat?format=ai-sdk` with the
 * chat's thread (so a chat stays one agent-kit thread) and its id as `clientMessageId` (a resent
 * message is stored once). With `resume: true`, the chat's id must be its thread's: the thread's
 * turn under way (else its latest) streams again from its start, live while it goes on.
 * `stop()` cancels the reply's run (see `cancelOnStop`); a page that closes or reloads does not.
 */
export function agentKitTransport(options: AgentKitTransportOptions = {}): DefaultChatTransport<UIMessage> {
  const origin = options.origin ?? '';
  const givenFetch: typeof globalThis.fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  // The thread each message posted went to, from its response's header: a first reply stopped
  // before it began names no thread in the chat, and the next message would start another.
  const sentTo = new Map<string, Promise<string | undefined>>();
  const replies = new RepliesSeen();
  const baseFetch: typeof globalThis.fetch = (input, init) => {
    const posting = givenFetch(input, init);
    const clientMessageId = chatPostOf(input, init);
    if (clientMessageId !== undefined) {
      sentTo.set(clientMessageId, posting.then((response) => {
        if (response.ok) replies.answered(clientMessageId, response.headers.get('x-agent-kit-run-id'));
        return response.headers.get('x-agent-kit-thread-id') ?? undefined;
      }, () => undefined));
    }
    return posting;
  };
  // How far the chat was given each run's reply: a stop's cancel says so, and the run keeps that text (ADR-0090).
  const shownSeqs = new Map<string, number>();
  const shown = (runId: string, seq: number) => shownSeqs.set(runId, Math.max(seq, shownSeqs.get(runId) ?? 0));
  const stops = options.cancelOnStop === false ? undefined : new StopCanceller(origin, baseFetch, options, shownSeqs);
  // Each stream's run and thread, from its response: a stream cut before its first event is read
  // again from the run's start (ADR-0083).
  const origins = new WeakMap<ReadableStream<Uint8Array>, Origin>();
  // A resume's turns under way after the one it streams, from its response (ADR-0088).
  const queuedBehind = new WeakMap<ReadableStream<Uint8Array> | ReadableStream<UIMessageChunk>, string[]>();
  // A resume that goes on after an answer typed to its run's question: the answer's id (ADR-0087).
  const goesOnAfterAnswer = new WeakMap<ReadableStream<Uint8Array> | ReadableStream<UIMessageChunk>, string>();
  const streamFetch: typeof globalThis.fetch = async (input, init) => {
    const response = await (stops ? stops.fetch(input, init) : baseFetch(input, init));
    const runId = response.headers.get('x-agent-kit-run-id');
    const threadId = response.headers.get('x-agent-kit-thread-id') ?? chatOfEventsUrl(String(input instanceof Request ? input.url : input));
    if (response.body && runId && threadId) origins.set(response.body, { runId, threadId });
    const underWay = response.headers.get('x-agent-kit-runs-under-way')?.split(',');
    if (response.body && runId && underWay?.[0] === runId) queuedBehind.set(response.body, underWay.slice(1));
    const after = response.headers.get('x-agent-kit-goes-on-after');
    if (response.body && after) goesOnAfterAnswer.set(response.body, after);
    return response;
  };
  return new (class extends DefaultChatTransport<UIMessage> {
    override async reconnectToStream(reconnect: Parameters<DefaultChatTransport<UIMessage>['reconnectToStream']>[0]) {
      stops?.resumeStarted(reconnect.chatId, reconnect.abortSignal);
      const resumed = await super.reconnectToStream(reconnect);
      if (!resumed) return null;
      // Then each turn queued behind it when the resume began, in its own message (ADR-0088).
      const { chatId: threadId, abortSignal: signal } = reconnect;
      // A turn the chat shows up to an answer typed to its question goes on in the message after
      // that answer, which the thread's read gave it (ADR-0087).
      const answer = goesOnAfterAnswer.get(resumed);
      const reply = answer === undefined ? this.readOn(resumed, signal) : inOwnMessage(this.readOn(resumed, signal), answer);
      return oneAfterAnother(reply, queuedBehind.get(resumed) ?? [],
        (runId) => this.readOn({ runId, threadId, seq: 0 }, signal));
    }

    override async sendMessages(send: Parameters<DefaultChatTransport<UIMessage>['sendMessages']>[0]) {
      const last = send.messages.at(-1);
      if (last?.role !== 'assistant') {
        const reply = this.readOn(await super.sendMessages(send), send.abortSignal);
        return last ? goesOnAfter(reply, send.messages, last.id) : reply;
      }
      const held = heldAnswer(last);
      // A reply that holds no answer (sendAutomaticallyWhen after a reply whose last step ran its
      // tools, say) has nothing to send: agent-kit runs its tools itself.
      return held ? this.answer(held, send.abortSignal) : emptyStep();
    }

    /**
     * `stream`, and after it, while its run goes on by itself (the stream ended at the route's
     * budget, the run parked for its next segment or a retry, or an operator holds it), the rest
     * from the events route: one message to the run's end or its next question.
     */
    private readOn(from: ReadableStream<UIMessageChunk> | Cut, signal: AbortSignal | undefined): ReadableStream<UIMessageChunk> {
      return readOn(from, (cut) => this.rest(cut, signal), signal, stops && signal ? (cut) => stops.between(signal, cut) : undefined, shown);
    }

    /** The chunks of a response, as the AI SDK parses them, each event's last one marked with its seq. */
    protected override processResponseStream(body: ReadableStream<Uint8Array>): ReadableStream<UIMessageChunk> {
      const chunks = chunksOf(body, origins.get(body));
      const answer = goesOnAfterAnswer.get(body);
      if (answer !== undefined) goesOnAfterAnswer.set(chunks, answer);
      const behind = queuedBehind.get(body);
      if (behind) queuedBehind.set(chunks, behind);
      return chunks;
    }

    /** The rest of a run's reply, after the thread's event `seq`. */
    private async rest(cut: Cut, signal: AbortSignal | undefined): Promise<ReadableStream<UIMessageChunk>> {
      const query = `format=ai-sdk&runId=${encodeURIComponent(cut.runId)}&after=${cut.seq}`;
      const rest = await streamFetch(`${origin}/api/threads/${encodeURIComponent(cut.threadId)}/events?${query}`,
        withSession(options, { method: 'GET', ...(signal ? { signal } : {}) }));
      if (!rest.ok || !rest.body) throw new Error(`agent-kit could not stream the reply (${rest.status}): ${await rest.text()}`);
      return this.processResponseStream(rest.body);
    }

    /** Post the answer the reply holds, then stream the rest of the reply, after the event that asked. */
    private async answer(held: HeldAnswer, signal: AbortSignal | undefined): Promise<ReadableStream<UIMessageChunk>> {
      const posted = await baseFetch(`${origin}/api/runs/${encodeURIComponent(held.runId)}/input`, withSession(options, {
        method: 'POST', body: JSON.stringify(held.body),
      }, true));
      // 409: the run no longer waits for it: the answer went in already (this one, whose response
      // was lost, or another tab's), or the run ended. The reply goes on after the question all the
      // same, unless the chat shows some of that already (a send again once the reply went on).
      if (posted.status === 409 && held.goneOn) return emptyStep();
      if (!posted.ok && posted.status !== 409) throw new Error(`agent-kit refused the answer (${posted.status}): ${await posted.text()}`);
      return this.readOn({ runId: held.runId, threadId: held.threadId, seq: held.seq }, signal);
    }
  })({
    api: `${origin}/api/chat?format=ai-sdk`,
    ...(options.headers ? { headers: options.headers } : {}),
    ...(options.credentials ? { credentials: options.credentials } : {}),
    fetch: streamFetch,
    prepareSendMessagesRequest: async ({ id, messages, trigger, messageId }) => {
      const last = messages.at(-1);
      if (!last || last.role !== 'user') throw new Error('agent-kit takes the chat\'s last message as the user\'s next one');
      // regenerate(), or sendMessage({ text, messageId }) (an edit): the last message's turn asked
      // again, a new reply in place of the old (ADR-0091), in the thread the chat (its id) is of.
      // It names the reply it replaces, as the page saw it: sent again, it is the same one (ADR-0092).
      const again = trigger === 'regenerate-message' || (messageId !== undefined && messageId === last.id);
      replies.learn(messages);
      const threadId = threadIdOf(messages) ?? await threadSentTo(again ? messages : messages.slice(0, -1), sentTo)
        ?? (again && uuidShaped.test(id) ? id : undefined);
      const replaces = again ? replies.replacedBy(last, messageId) : undefined;
      return { body: { threadId, message: textOf(last), clientMessageId: last.id, ...(again ? { regenerate: true } : {}), ...(replaces ? { replaces } : {}) } };
    },
    prepareReconnectToStreamRequest: ({ id }) => ({
      api: `${origin}/api/threads/${encodeURIComponent(id)}/events?format=ai-sdk`,
    }),
  });
}

/** The `clientMessageId` of a `POST /api/chat`, or undefined for any other request. */
function chatPostOf(input: RequestInfo | URL, init: RequestInit | undefined): string | undefined {
  const url = String(input instanceof Request ? input.url : input);
  if ((init?.method ?? 'GET').toUpperCase() !== 'POST' || !/\/api\/chat(\?|$)/.test(url) || typeof init?.body !== 'string') return undefined;
  try {
    const { clientMessageId } = JSON.parse(init.body) as { clientMessageId?: unknown };
    return typeof clientMessageId === 'string' ? clientMessageId : undefined;
  } catch {
    return undefined;
  }
}

/** The thread one of these messages went to, when no reply names it (its response, awaited). */
async function threadSentTo(messages: readonly UIMessage[], sentTo: ReadonlyMap<string, Promise<string | undefined>>) {
  for (const message of messages) {
    const answer = message.role === 'user' ? sentTo.get(message.id) : undefined;
    const threadId = answer && await within(answer, 5_000); // a response that never comes names nothing
    if (threadId) return threadId;
  }
  return undefined;
}

/** `promise`'s value, or undefined once `ms` passed first. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    void promise.then((value) => {
      clearTimeout(timer);
      resolve(value);
    });
  });
}

/**
 * A send with nothing to stream: an empty step at the end of the reply. The chat would otherwise
 * send again at once, and again: its `sendAutomaticallyWhen` helpers look at the reply's last
 * step, and they held when it sent.
 */
function emptyStep(): ReadableStream<UIMessageChunk> {
  return new ReadableStream<UIMessageChunk>({
    start(controller) {
      controller.enqueue({ type: 'start-step' });
      controller.enqueue({ type: 'finish-step' });
      controller.enqueue({ type: 'finish', messageMetadata: {} }); // (metadata: the chat keeps the step)
      controller.close();
    },
  });
}

/**
 * Turns `useChat`'s `stop()` into a cancel of the reply's run. The chat aborts a request's signal
 * on `stop()`, and also when a second resume of the chat replaces the first (React's strict mode
 * runs the resume twice): an abort followed at once by a resume of the same chat is the latter,
 * and cancels nothing. A request goes without the chat's signal, so that its response (which
 * names the run) still comes when `stop()` came first; the chat's request ends at the abort all
 * the same, and the signal ends the response's body.
 */
class StopCanceller {
  /** Chat id → how many resumes of it began (a stopped request compares before and after). */
  private readonly resumes = new Map<string, number>();
  /** A resume's signal → its number among its chat's resumes (its fetch may come a few turns later). */
  private readonly resumeNumbers = new WeakMap<AbortSignal, number>();

  constructor(
    private readonly origin: string,
    private readonly baseFetch: typeof globalThis.fetch,
    private readonly options: AgentKitTransportOptions,
    private readonly shownSeqs: ReadonlyMap<string, number>,
  ) {}

  resumeStarted(chatId: string, signal: AbortSignal | undefined): void {
    const number = (this.resumes.get(chatId) ?? 0) + 1;
    this.resumes.set(chatId, number);
    if (signal) this.resumeNumbers.set(signal, number);
  }

  async fetch(input: RequestInfo | URL, init: RequestInit = {}): Promise<Response> {
    const { signal, ...rest } = init;
    if (!signal) return this.baseFetch(input, init);
    // A GET reads the events route: a resume, or the rest of a reply after its answer.
    const reading = (rest.method ?? 'GET').toUpperCase() === 'GET';
    const chatId = reading ? chatOfEventsUrl(String(input instanceof Request ? input.url : input)) : undefined;
    const cancel = this.stopOf(signal, chatId);
    const stopped = (response: Response) => {
      const runId = response.headers.get('x-agent-kit-run-id');
      if (runId) cancel(runId);
    };
    const responding = this.baseFetch(input, rest);
    const response = await untilAborted(responding, signal);
    if (!response) {
      // Stopped before the response: it still names the run to cancel when it comes.
      responding.then((late) => {
        void late.body?.cancel().catch(() => {});
        stopped(late);
      }, () => {});
      throw abortError(signal);
    }
    if (!response.body) {
      signal.addEventListener('abort', () => stopped(response), { once: true });
      return response;
    }
    // Each stream of a reply read on listens while it is read: the chat's one signal outlives many.
    return new Response(endsOnAbort(response.body, signal, () => stopped(response)), {
      status: response.status, statusText: response.statusText, headers: response.headers,
    });
  }

  /**
   * Before a wait between two of a reply's requests (the transport reading on after a cut): the
   * cancel of the run for a stop during it, unless a resume of the chat replaced this one.
   */
  between(signal: AbortSignal, cut: Cut): () => void {
    const cancel = this.stopOf(signal, cut.threadId);
    return () => cancel(cut.runId);
  }

  /**
   * What a stop of `signal`'s request does: cancel the run, unless a resume of chat `chatId`
   * began after the request (counted now) and replaced it, as it does in the same turn.
   */
  private stopOf(signal: AbortSignal, chatId: string | undefined): (runId: string) => void {
    const resumesBefore = this.resumeNumbers.get(signal) ?? (chatId === undefined ? 0 : this.resumes.get(chatId) ?? 0);
    return (runId) => queueMicrotask(() => {
      if (chatId !== undefined && (this.resumes.get(chatId) ?? 0) > resumesBefore) return;
      void this.cancel(runId);
    });
  }

  private async cancel(runId: string): Promise<void> {
    try {
      // The text the page had is the one the run keeps: the last event it was given (ADR-0090).
      const shownSeq = this.shownSeqs.get(runId);
      await this.baseFetch(`${this.origin}/api/runs/${encodeURIComponent(runId)}/cancel`, shownSeq === undefined
        ? withSession(this.options, { method: 'POST' })
        : withSession(this.options, { method: 'POST', body: JSON.stringify({ shownSeq }) }, true));
    } catch {
      // A cancel that does not arrive leaves the turn to finish, as a closed page does.
    }
  }
}

/**
 * `init` with the transport's headers and credentials (and a JSON body's content type). The
 * headers go as a plain object, as the AI SDK's own requests carry them: an app's fetch may
 * spread them.
 */
function withSession(options: AgentKitTransportOptions, init: RequestInit, json = false): RequestInit {
  const headers: Record<string, string> = {};
  new Headers(options.headers).forEach((value, name) => {
    headers[name] = value;
  });
  if (json) headers['content-type'] = 'application/json';
  return {
    ...init, headers,
    ...(options.credentials ? { credentials: options.credentials } : {}),
  };
}

/** The chat (thread) id of an events route's URL, e.g. `/api/threads/<id>/events?format=ai-sdk`. */
function chatOfEventsUrl(url: string): string | undefined {
  const match = /\/api\/threads\/([^/?#]+)\/events/.exec(url);
  return match ? decodeURIComponent(match[1]!) : undefined;
}

/** `promise`'s value, or undefined once `signal` aborts first. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise<T | undefined>((resolve, reject) => {
    const aborted = () => resolve(undefined);
    signal.addEventListener('abort', aborted, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', aborted));
  });
}

function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted.', 'AbortError');
}

/**
 * `body`, ended with the signal's abort as a fetch given the signal would end it, and `aborted`
 * called, if the abort comes before the body ended. Once it ended, the signal has no listener of it.
 */
function endsOnAbort(body: ReadableStream<Uint8Array>, signal: AbortSignal, aborted: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let listener: (() => void) | undefined;
  const ended = () => {
    if (listener) signal.removeEventListener('abort', listener);
    listener = undefined;
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      listener = () => {
        listener = undefined;
        aborted();
        controller.error(abortError(signal));
        reader.cancel().catch(() => {});
      };
      signal.addEventListener('abort', listener, { once: true });
    },
    async pull(controller) {
      const read = await reader.read().catch((error: unknown) => {
        ended();
        throw error;
      });
      if (signal.aborted) return;
      if (read.done) {
        ended();
        controller.close();
      } else controller.enqueue(read.value);
    },
    cancel(reason) {
      ended();
      return reader.cancel(reason);
    },
  });
}
