// Unit tests of the browser's stream reader: events are framed and retry hints are read; the
// thread follower reconnects as soon as the server asks (a stream that ended at its time budget),
// never sooner than its own backoff otherwise.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readSse } from '../src/lib/sse';
import { followThread } from '../src/lib/thread-stream';

function body(text: string): ReadableStream<Uint8Array> {
  return new Response(text).body!;
}

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

describe('readSse', () => {
  it('reports each retry hint and ignores one that is not a number', async () => {
    const hints: number[] = [];
    const events = [];
    const text = 'retry: 2000\n\nid: 1\nevent: note\ndata: {}\n\nretry: soon\n\nretry: 100\n\n';
    for await (const event of readSse(body(text), undefined, (ms) => hints.push(ms))) events.push(event);
    expect(hints).toEqual([2000, 100]);
    expect(events).toEqual([{ id: '1', event: 'note', data: '{}' }]);
  });

  it('frames events split across chunks, with CRLF lines, multi-line data and comments', async () => {
    const chunks = ['id: 7\r\nevent: text-delta\r\nda', 'ta: {"a":\r\ndata: 1}\r\n\r\n: keep-alive\n\n', 'data: plain\n\n'];
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(new TextEncoder().encode(chunk));
        controller.close();
      },
    });
    const events = [];
    for await (const event of readSse(stream)) events.push(event);
    expect(events).toEqual([
      { id: '7', event: 'text-delta', data: '{"a":\n1}' },
      { id: undefined, event: 'message', data: 'plain' },
    ]);
  });
});

describe('followThread', () => {
  /** Streams that each end at once with `ending`: how many were fetched `advanceMs` after the first ended. */
  async function reconnectsAfter(ending: string, advanceMs: number): Promise<number> {
    vi.useFakeTimers();
    let fetches = 0;
    vi.stubGlobal('fetch', async () => {
      fetches++;
      return new Response(`retry: 2000\n\n${ending}`, { headers: { 'content-type': 'text/event-stream' } });
    });
    const stop = new AbortController();
    const following = followThread({ threadId: 't', cursor: () => 0, onEvent: () => {}, signal: stop.signal });
    await vi.advanceTimersByTimeAsync(0); // the first stream is read to its end
    expect(fetches).toBe(1);
    await vi.advanceTimersByTimeAsync(advanceMs);
    const seen = fetches;
    stop.abort();
    await following;
    return seen;
  }

  it('reconnects after the hint when a stream ends at its budget', async () => {
    expect(await reconnectsAfter('retry: 100\n\n', 110)).toBe(2);
  });

  it('keeps its own minimum delay when the server asks for a longer one', async () => {
    expect(await reconnectsAfter('', 110)).toBe(1); // 2 s asked, 250 ms backoff: not yet
    expect(await reconnectsAfter('', 260)).toBe(2);
  });
});
