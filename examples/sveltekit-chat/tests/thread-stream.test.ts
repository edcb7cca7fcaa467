// Unit tests of the browser's stream reader: retry hints are read, and the thread follower
// reconnects as soon as the server asks (a stream that ended at its time budget), never sooner
// than its own backoff otherwise.
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
});

describe('followThread', () => {
  /** Streams that each end at once with `ending`; resolves the times of the first two fetches. */
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
