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
 * Yield the events of an SSE body until it ends or `signal` aborts (then it just returns), the
 * events of one network read together: a caller that applies a batch without awaiting in
 * between changes the page once per read, not once per event (a replay of thousands of events
 * laid the page out after each one). `onRetry` receives each `retry:` hint (the reconnect delay
 * the server asks for, in ms).
 */
export async function* readSse(
  body: ReadableStream<Uint8Array>, signal?: AbortSignal, onRetry?: (ms: number) => void,
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
      const { done, value } = await reader.read().catch((error: unknown) => {
        if (signal?.aborted) return { done: true as const, value: undefined };
        throw error;
      });
      if (done) return;
      parser.feed(decoder.decode(value, { stream: true }));
      if (parsed.length > 0) yield parsed.splice(0);
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    reader.releaseLock();
  }
}
