// The browser's side of agent-kit's streams: follow a thread's event log with reconnects from
// the last applied seq (Last-Event-ID), and send a chat message whose POST answers with the
// same events. Both feed one ThreadView, which applies each seq once (see thread-view.ts).
import { readSse } from './sse';
import type { WireEvent } from './thread-view';

/** `gone`: the stream was refused (401, 404). `behind`: the log is behind the page (409, ADR-0119). */
export type FollowState = 'connecting' | 'live' | 'reconnecting' | 'gone' | 'behind';

export interface FollowThreadOptions {
  threadId: string;
  /** The seq to resume after: read on every (re)connect, so a reconnect never replays twice. */
  cursor: () => number;
  onEvent: (event: WireEvent) => void;
  onState?: (state: FollowState) => void;
  signal: AbortSignal;
}

const reconnectMinMs = 250;
const reconnectMaxMs = 5_000; // a restarting server is back in ~1 s; never hammer a dead one

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}

/** GET the thread's events after `after`: a replay, then live. */
function fetchEvents(threadId: string, after: number, signal: AbortSignal): Promise<Response> {
  return fetch(`/api/threads/${threadId}/events?after=${after}`, {
    headers: { accept: 'text/event-stream', 'last-event-id': String(after) },
    signal,
    cache: 'no-store',
  });
}

/** Feed the SSE events of `response` to `onEvent`; false when the server sent an error event. */
async function pumpEvents(
  response: Response, onEvent: (event: WireEvent) => void, signal: AbortSignal, onRetry?: (ms: number) => void,
): Promise<boolean> {
  if (!response.body) return true;
  for await (const batch of readSse(response.body, signal, onRetry)) {
    // One batch without an await: the page renders once for all of it.
    for (const message of batch) {
      if (message.event === 'error') return false;
      onEvent(JSON.parse(message.data) as WireEvent);
    }
  }
  return true;
}

/**
 * Follow a thread until `signal` aborts, the thread is gone (401/404) or its log is behind the
 * page's cursor (409). A stream that ends
 * (the server restarted, a time limit, a proxy) is resumed after the last applied seq.
 */
export async function followThread(options: FollowThreadOptions): Promise<void> {
  const { signal } = options;
  let delayMs = reconnectMinMs;
  while (!signal.aborted) {
    const after = options.cursor();
    // The server's last retry hint: a stream that ends at its time budget asks for a quick
    // reconnect (ADR-0035), which the backoff's minimum would otherwise slow down.
    let hintMs: number | undefined;
    try {
      const response = await fetchEvents(options.threadId, after, signal);
      if (response.status === 401 || response.status === 404) {
        options.onState?.('gone');
        return;
      }
      // The page has seen more of the thread than its log holds (a database restored from a
      // backup): reading on would be refused again; a reload reads the thread as it is.
      if (response.status === 409) {
        options.onState?.('behind');
        return;
      }
      if (response.ok) {
        options.onState?.('live');
        // The backoff starts again once the stream brought something: a server whose every
        // stream is cut before its first event is not asked four times a second.
        await pumpEvents(response, (event) => {
          delayMs = reconnectMinMs;
          options.onEvent(event);
        }, signal, (ms) => {
          hintMs = ms;
        });
      }
    } catch {
      // A dropped connection or a server that is down: retry below.
    }
    if (signal.aborted) return;
    options.onState?.('reconnecting');
    await sleep(Math.min(delayMs, hintMs ?? delayMs), signal);
    delayMs = Math.min(delayMs * 2, reconnectMaxMs);
  }
}

/**
 * Read the thread's events after `afterSeq` through `throughSeq` (earlier turns of a thread
 * opened at its latest ones) and stop.
 * @throws ApiError when the server refuses, Error when the stream ends before `throughSeq` or
 * `signal` aborts first.
 */
export async function readEventRange(
  threadId: string, afterSeq: number, throughSeq: number, onEvent: (event: WireEvent) => void, signal: AbortSignal,
): Promise<void> {
  if (throughSeq <= afterSeq) return;
  const controller = new AbortController(); // the stream follows the thread live: stop it here
  const stop = () => controller.abort();
  signal.addEventListener('abort', stop, { once: true });
  try {
    const response = await fetchEvents(threadId, afterSeq, controller.signal);
    if (!response.ok) throw await toApiError(response);
    let reached = afterSeq;
    await pumpEvents(response, (event) => {
      if (event.seq > throughSeq) return;
      onEvent(event);
      reached = event.seq;
      if (reached === throughSeq) controller.abort();
    }, controller.signal).catch((error: unknown) => {
      if (!controller.signal.aborted) throw error;
    });
    if (reached < throughSeq) throw new Error(`the stream ended at seq ${reached}, before ${throughSeq}`);
  } finally {
    signal.removeEventListener('abort', stop);
    controller.abort();
  }
}

export interface SendMessageOptions {
  threadId: string | null;
  message: string;
  clientMessageId: string;
  /** Ask the turn of the message `clientMessageId` names again, a new reply in place of its old (ADR-0091). */
  regenerate?: boolean;
  /** With regenerate: the run whose reply is asked again. Sent again, the request is the same one (ADR-0092). */
  replaces?: string;
  onEvent: (event: WireEvent) => void;
  /** Called as soon as the server names the thread (a new thread's id comes from here). */
  onThread: (threadId: string) => void;
  signal: AbortSignal;
}

/** An error the server answered with: `{ error: { code, message } }`. */
export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

/** The words a failed request shows: the API's message, or that the server was out of reach. */
export function requestErrorText(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  // What fetch throws when no response came (offline, the server down or restarting): "Failed
  // to fetch" in Chromium, other words elsewhere, none of them telling what to do.
  if (error instanceof TypeError) return 'The server could not be reached, so nothing was sent: try again.';
  return error instanceof Error ? error.message : String(error);
}

/** Read an API error body into an ApiError. */
export async function toApiError(response: Response): Promise<ApiError> {
  const body = (await response.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
  return new ApiError(response.status, body.error?.code ?? 'HTTP', body.error?.message ?? response.statusText);
}

/**
 * POST /api/chat and stream the turn's events until the run closes or parks. A dropped stream
 * is not an error: the turn goes on server-side and the thread follower picks it up.
 * @throws ApiError when the server refuses the message.
 */
export async function sendMessage(options: SendMessageOptions): Promise<void> {
  // A response that does not come (a connection that died without a word) is given up on after
  // `sendAnswerMs`, as one that could not be sent: the caller sends again, with the same client
  // message id, which stores the message once.
  const request = new AbortController();
  const abort = () => request.abort(options.signal.reason);
  options.signal.addEventListener('abort', abort, { once: true });
  const timer = setTimeout(() => request.abort(new TypeError(`no answer from the server in ${sendAnswerMs / 1000} s`)), sendAnswerMs);
  let response: Response;
  try {
    response = await fetch('/api/chat', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({
        message: options.message, clientMessageId: options.clientMessageId,
        ...(options.threadId ? { threadId: options.threadId } : {}),
        ...(options.regenerate ? { regenerate: true, ...(options.replaces ? { replaces: options.replaces } : {}) } : {}),
      }),
      signal: request.signal,
    });
  } catch (error) {
    throw request.signal.aborted && !options.signal.aborted ? request.signal.reason : error;
  } finally {
    clearTimeout(timer);
  }
  if (!response.ok) throw await toApiError(response);
  const threadId = response.headers.get('x-agent-kit-thread-id');
  if (threadId) options.onThread(threadId);
  try {
    await pumpEvents(response, options.onEvent, options.signal);
  } catch {
    // The stream broke off (or went silent); the follower resumes from the last applied seq.
  } finally {
    options.signal.removeEventListener('abort', abort);
  }
}

/** How long a message's POST waits for the server's answer (its headers) before it is sent again. */
export const sendAnswerMs = 20_000;

/** POST a JSON body to an API route; the parsed answer, or an ApiError. */
export async function postJson<T = unknown>(path: string, body: unknown = {}): Promise<T> {
  const response = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw await toApiError(response);
  return (await response.json()) as T;
}
