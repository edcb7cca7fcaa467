// Server-sent events over fetch: the chat POST answers with SSE, which EventSource cannot send,
// so one reader serves both the POST and the GET replay. The framing (CR/LF/CRLF lines,
// multi-line data, comments, ids, retry hints) is eventsource-parser's.
import { createParser } from 'eventsource-parser';

/** One dispatched event. `id` is the thread event's seq when the server sent one. */
export interface SseMessage {
  id: string | undefined;
  event: string;
  data: string;
}

/**
 * How long a stream may send nothing, not even the server's keep-alive (every 15 s), before it
 * is taken for a connection that died without a word (a phone that changed networks, a NAT that
 * forgot it): its reader gives up, and the caller connects again.
 */
export const streamSilentMs = 35_000;

/** The stream sent nothing for `streamSilentMs`. */
export class StreamSilentError extends Error {
  constructor(ms: number) {
    super(`the stream sent nothing for ${ms / 1000} s`);
    this.name = 'StreamSilentError';
  }
}

/**
 * Yield the events of an SSE body until it ends or `signal` aborts (then it just returns), the
 * events of one network read together: a caller that applies a batch without awaiting in
 * between changes the page once per read, not once per event (a replay of thousands of events
 * laid the page out after each one). `onRetry` receives each `retry:` hint (the reconnect delay
 * the server asks for, in ms). A body silent for `silentMs` is cancelled: StreamSilentError.
 */
export async function* readSse(
  body: ReadableStream<Uint8Array>, signal?: AbortSignal, onRetry?: (ms: number) => void, silentMs = streamSilentMs,
): AsyncGenerator<SseMessage[]> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const onAbort = () => void reader.cancel().catch(() => {});
  signal?.addEventListener('abort', onAbort, { once: true });
  const parsed: SseMessage[] = [];
  const parser = createParser({
    onEvent: (message) => parsed.push({ id: message.id, event: message.event ?? 'message', data: message.data }),
    onRetry: (ms) => onRetry?.(ms),
  });
  try {
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const silent = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new StreamSilentError(silentMs)), silentMs);
      });
      const { done, value } = await Promise.race([reader.read(), silent]).catch((error: unknown) => {
        if (signal?.aborted) return { done: true as const, value: undefined };
        if (error instanceof StreamSilentError) void reader.cancel().catch(() => {});
        throw error;
      }).finally(() => clearTimeout(timer));
      if (done) return;
      parser.feed(decoder.decode(value, { stream: true }));
      if (parsed.length > 0) yield parsed.splice(0);
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    reader.releaseLock();
  }
}
