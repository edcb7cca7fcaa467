// Server-sent events from a thread's log: `id:` is the event's seq, so a browser that reconnects
// sends Last-Event-ID and resumes exactly after what it saw. The stream is pulled: each pull
// sends the rest of the page the follower holds as one chunk, or reads one page, so it reads the
// log only as fast as the client takes bytes; it sends a keep-alive comment while idle.
// Closing the connection closes the follower and nothing else: the turn goes on.
import { coerceError } from '../errors.js';
import type { EventFollower } from '../event-log/follow-events.js';
import { toEventJson, type ThreadEvent } from '../event-log/read-events.js';
import { describeError } from './http-error.js';

/** Headers that keep proxies and compressors from buffering the stream. */
export const sseHeaders: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
};

/** How a stream turns events into SSE text. */
export interface SseEncoder {
  /** Sent first. */
  open(retryMs: number): string;
  /** One event's SSE text ('' to send nothing for it). */
  encode(event: ThreadEvent): string;
  /** Sent last; `error` is set when reading the log failed. */
  close(error?: { code: string; message: string }): string;
}

/**
 * An event as a thread's viewer who is not an operator gets it: a segment's start without the
 * lease owner's name (a host name and a process id, ADR-0107), which says nothing to a user and
 * much about the servers.
 */
export function withoutLeaseOwner(event: ThreadEvent): ThreadEvent {
  if (event.type !== 'segment-started' || !('owner' in event.data)) return event;
  const { owner: _owner, ...data } = event.data;
  return { ...event, data };
}

/** The wire shape of one event's `data:` (the same as `agent-kit events` prints). */
export const eventPayload = toEventJson;

/** `id: <seq>`, `event: <type>`, `data: <json>`. JSON has no raw newlines, so one data line. */
export function formatSseEvent(event: ThreadEvent): string {
  const type = event.type.replace(/[\r\n]/g, '');
  return `id: ${event.seq}\nevent: ${type}\ndata: ${JSON.stringify(eventPayload(event))}\n\n`;
}

/** agent-kit's own event stream (the default format). */
export function createEventEncoder(): SseEncoder {
  return {
    open: (retryMs) => `retry: ${retryMs}\n\n`,
    encode: formatSseEvent,
    close: (error) => (error ? `event: error\ndata: ${JSON.stringify({ error })}\n\n` : ''),
  };
}

export interface EventStreamOptions {
  encoder: SseEncoder;
  /** A comment line this often while no event comes, so proxies keep the connection open. */
  keepAliveMs: number;
  /** The reconnect delay suggested to EventSource clients. */
  retryMs: number;
  /** End the stream after this long (the client reconnects with Last-Event-ID). */
  maxStreamMs: number;
  /** When the request arrived (default: now): the stream's time counts from then, as its invocation's does. */
  startedAtMs?: number;
  headers?: Record<string, string>;
  log?: (entry: Record<string, unknown>) => void;
  /** Called once the stream has ended, however it ended. */
  onClose?: () => void;
  /** Aborted: end the stream now, as at its budget (the client comes back at once). */
  endSignal?: AbortSignal;
}

const textEncoder = new TextEncoder();
// A stream that ends at its budget tells EventSource to come back at once (it would otherwise wait
// retryMs, 2 s by default, in the middle of a streaming answer); the next stream's opening hint
// puts retryMs back for unplanned drops.
const plannedEndRetryMs = 100;
// One chunk stops growing past this, which bounds the memory and the time one pull takes: a full
// page of text deltas (~150 B each, 1,000 a page) fits in one chunk, while a page of large events
// is spread over several pulls.
const maxChunkChars = 1_048_576;

/** A streaming SSE Response fed by `follower`; cancelling the body closes the follower. */
export function eventStreamResponse(follower: EventFollower, options: EventStreamOptions): Response {
  const { encoder } = options;
  const deadline = (options.startedAtMs ?? Date.now()) + options.maxStreamMs;
  let pending: Promise<IteratorResult<ThreadEvent, undefined>> | undefined;
  let timer: NodeJS.Timeout | undefined;
  // Set when the client went away: a pull still in flight then has nobody to report to.
  let cancelled = false;

  // The events the follower already holds, encoded together: no database round trip, no timer.
  const encodeBuffered = (text: string) => {
    while (text.length < maxChunkChars) {
      const event = follower.nextBuffered();
      if (!event) break;
      text += encoder.encode(event);
    }
    return text;
  };

  // Only here does the stream wait (a page read, or the log's end), so only here a timer is armed.
  const waitForEvent = () => {
    pending ??= follower.next();
    const waitMs = Math.max(0, Math.min(options.keepAliveMs, deadline - Date.now()));
    let onEnd: (() => void) | undefined;
    return Promise.race([
      pending.then((result) => ({ kind: 'event' as const, result })),
      new Promise<{ kind: 'idle' }>((resolve) => {
        timer = setTimeout(() => resolve({ kind: 'idle' }), waitMs);
        // (An end asked meanwhile wakes the wait: the loop's next turn ends the stream.)
        onEnd = () => resolve({ kind: 'idle' });
        options.endSignal?.addEventListener('abort', onEnd, { once: true });
      }),
    ]).finally(() => {
      clearTimeout(timer);
      if (onEnd) options.endSignal?.removeEventListener('abort', onEnd);
    });
  };

  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(textEncoder.encode(encoder.open(options.retryMs)));
    },
    // Loop until something is enqueued: a pull that enqueues nothing is not called again.
    async pull(controller) {
      try {
        for (;;) {
          // Checked on every pull, so a stream that never idles (a long replay) ends on time too.
          if (Date.now() >= deadline || options.endSignal?.aborted) return end(controller, undefined, 'budget');
          // A next() left pending by a keep-alive holds the event before the buffered ones.
          let text = pending ? '' : encodeBuffered('');
          if (!text) {
            const outcome = await waitForEvent();
            if (outcome.kind === 'idle') {
              if (Date.now() >= deadline || options.endSignal?.aborted) return end(controller, undefined, 'budget');
              controller.enqueue(textEncoder.encode(': keep-alive\n\n'));
              return;
            }
            pending = undefined;
            if (outcome.result.done) return end(controller);
            text = encodeBuffered(encoder.encode(outcome.result.value));
          }
          if (text) {
            controller.enqueue(textEncoder.encode(text));
            return;
          }
        }
      } catch (raw) {
        if (cancelled) return;
        const { code, status, message } = describeError(raw);
        options.log?.({ msg: 'event stream failed', code, status, error: coerceError(raw).message });
        end(controller, { code, message });
      }
    },
    cancel() {
      cancelled = true;
      clearTimeout(timer);
      follower.close();
      options.onClose?.();
    },
  });

  function end(
    controller: ReadableStreamDefaultController<Uint8Array>, error?: { code: string; message: string },
    why?: 'budget',
  ) {
    follower.close();
    options.onClose?.();
    let text = encoder.close(error);
    if (why === 'budget') text += `retry: ${Math.min(options.retryMs, plannedEndRetryMs)}\n\n`;
    if (text) controller.enqueue(textEncoder.encode(text));
    controller.close();
  }

  return new Response(body, { status: 200, headers: { ...sseHeaders, ...options.headers } });
}
