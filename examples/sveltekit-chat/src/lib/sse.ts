// A server-sent-events reader over fetch: the chat POST answers with SSE, which EventSource
// cannot send, so one small parser serves both the POST and the GET replay. It follows the
// WHATWG framing rules that matter here (CR/LF/CRLF lines, multi-line data, comments, ids,
// retry hints).

/** One dispatched event. `id` is the thread event's seq when the server sent one. */
export interface SseMessage {
  id: string | undefined;
  event: string;
  data: string;
}

/**
 * Yield the events of an SSE body until it ends or `signal` aborts (then it just returns).
 * `onRetry` receives each `retry:` hint (the reconnect delay the server asks for, in ms).
 */
export async function* readSse(
  body: ReadableStream<Uint8Array>, signal?: AbortSignal, onRetry?: (ms: number) => void,
): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const onAbort = () => void reader.cancel().catch(() => {});
  signal?.addEventListener('abort', onAbort, { once: true });
  let buffer = '';
  let fields: { id?: string; event?: string; data: string[] } = { data: [] };
  try {
    for (;;) {
      const { done, value } = await reader.read().catch((error: unknown) => {
        if (signal?.aborted) return { done: true as const, value: undefined };
        throw error;
      });
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      // A line ends at CRLF, LF or CR; a CR at the very end may be half of a CRLF, so wait.
      let match: RegExpExecArray | null;
      while ((match = /\r\n|\n|\r(?!$)/.exec(buffer)) !== null) {
        const line = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        if (line === '') {
          if (fields.data.length > 0) yield { id: fields.id, event: fields.event ?? 'message', data: fields.data.join('\n') };
          fields = { data: [] };
          continue;
        }
        if (line.startsWith(':')) continue; // a comment (keep-alive)
        const colon = line.indexOf(':');
        const name = colon === -1 ? line : line.slice(0, colon);
        const rawValue = colon === -1 ? '' : line.slice(colon + 1);
        const fieldValue = rawValue.startsWith(' ') ? rawValue.slice(1) : rawValue;
        if (name === 'data') fields.data.push(fieldValue);
        else if (name === 'event') fields.event = fieldValue;
        else if (name === 'id' && !fieldValue.includes('\0')) fields.id = fieldValue;
        else if (name === 'retry' && /^\d+$/.test(fieldValue)) onRetry?.(Number(fieldValue));
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    reader.releaseLock();
  }
}
