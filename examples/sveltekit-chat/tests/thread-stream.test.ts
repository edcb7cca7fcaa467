// Unit tests of the browser's stream reader: events are framed and retry hints are read; the
// thread follower reconnects as soon as the server asks (a stream that ended at its time budget),
// never sooner than its own backoff otherwise; a read of a range of seqs stops at its end; a
// stream that goes silent (no keep-alive either) is given up and connected again, and a message
// whose answer does not come is sent again.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readSse, StreamSilentError, streamSilentMs } from '../src/lib/sse';
import { followThread, readEventRange, sendAnswerMs, sendMessage } from '../src/lib/thread-stream';
import type { WireEvent } from '../src/lib/thread-view';

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
    for await (const batch of readSse(body(text), undefined, (ms) => hints.push(ms))) events.push(...batch);
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
    const batches = [];
    for await (const batch of readSse(stream)) batches.push(batch);
    // The first chunk ends mid-event: nothing to yield for it.
    expect(batches).toEqual([
      [{ id: '7', event: 'text-delta', data: '{"a":\n1}' }],
      [{ id: undefined, event: 'message', data: 'plain' }],
    ]);
  });

  it('yields the events of one read together', async () => {
    const text = Array.from({ length: 5 }, (_, i) => `id: ${i + 1}\ndata: ${i + 1}\n\n`).join('');
    const batches = [];
    for await (const batch of readSse(body(text))) batches.push(batch.map((event) => event.data));
    expect(batches).toEqual([['1', '2', '3', '4', '5']]);
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

  it('applies the events of one read before the page can render any of them', async () => {
    // A renderer (Svelte) flushes in a microtask after a change. An await between two events of
    // a replay let it lay the page out once per event: a 1,000-turn thread took 20 s to open.
    const events = Array.from({ length: 200 }, (_, i) => ({
      seq: i + 1, runId: null, fence: 0, type: 'message', data: { text: `m${i + 1}` }, createdAt: '',
    }));
    vi.stubGlobal('fetch', async () => new Response(
      events.map((event) => `id: ${event.seq}\ndata: ${JSON.stringify(event)}\n\n`).join(''),
      { headers: { 'content-type': 'text/event-stream' } },
    ));
    const stop = new AbortController();
    const appliedAtFlush: number[] = [];
    let applied = 0;
    let flushPending = false;
    const following = followThread({
      threadId: 't', cursor: () => applied, signal: stop.signal,
      onEvent: () => {
        applied++;
        if (!flushPending) {
          flushPending = true;
          queueMicrotask(() => {
            flushPending = false;
            appliedAtFlush.push(applied);
          });
        }
        if (applied === events.length) stop.abort();
      },
    });
    await following;
    expect(appliedAtFlush).toEqual([events.length]);
  });

  it('stops, saying so, when the log is behind its cursor (409), and when the thread is gone (404)', async () => {
    for (const [status, said] of [[409, 'behind'], [404, 'gone']] as const) {
      let fetches = 0;
      vi.stubGlobal('fetch', async () => {
        fetches += 1;
        return new Response(JSON.stringify({ error: { code: 'CONFLICT', message: 'past the end' } }), { status });
      });
      const states: string[] = [];
      await followThread({ threadId: 't', cursor: () => 99, onEvent: () => {}, onState: (s) => states.push(s), signal: new AbortController().signal });
      expect([fetches, states]).toEqual([1, [said]]);
    }
  });

  it('reconnects after the hint when a stream ends at its budget', async () => {
    expect(await reconnectsAfter('retry: 100\n\n', 110)).toBe(2);
  });

  it('keeps its own minimum delay when the server asks for a longer one', async () => {
    expect(await reconnectsAfter('', 110)).toBe(1); // 2 s asked, 250 ms backoff: not yet
    expect(await reconnectsAfter('', 260)).toBe(2);
  });
});

describe('readEventRange', () => {
  const sse = (seqs: number[]) => seqs.map((seq) => `id: ${seq}\ndata: ${JSON.stringify({ seq, type: 'text-delta' })}\n\n`).join('');

  /** A live stream: `first` at once, then nothing until it is aborted. Records the abort. */
  function liveStream(first: number[]) {
    const state = { aborted: false, url: '' };
    vi.stubGlobal('fetch', async (url: string, init: RequestInit) => {
      state.url = url;
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(sse(first)));
          init.signal?.addEventListener('abort', () => {
            state.aborted = true;
            controller.error(new DOMException('aborted', 'AbortError'));
          });
        },
      });
      return new Response(stream, { headers: { 'content-type': 'text/event-stream' } });
    });
    return state;
  }

  it('delivers the range, nothing past it, and stops the live stream at its end', async () => {
    const state = liveStream([5, 6, 7, 8, 9]);
    const seen: number[] = [];
    await readEventRange('t1', 4, 7, (event: WireEvent) => seen.push(event.seq), new AbortController().signal);
    expect(seen).toEqual([5, 6, 7]);
    expect(state.url).toBe('/api/threads/t1/events?after=4');
    expect(state.aborted).toBe(true);
  });

  it('fails when the stream stops short of the range, or the page aborts it first', async () => {
    liveStream([5]);
    const page = new AbortController();
    const reading = readEventRange('t1', 4, 7, () => {}, page.signal);
    setTimeout(() => page.abort(), 10);
    await expect(reading).rejects.toThrow(/ended at seq 5, before 7/);
    vi.stubGlobal('fetch', async () => new Response(sse([5, 6]), { headers: { 'content-type': 'text/event-stream' } }));
    await expect(readEventRange('t1', 4, 7, () => {}, new AbortController().signal)).rejects.toThrow(/ended at seq 6/);
  });

  it('reads nothing for an empty range', async () => {
    const fetched = vi.fn();
    vi.stubGlobal('fetch', fetched);
    await readEventRange('t1', 4, 4, () => {}, new AbortController().signal);
    expect(fetched).not.toHaveBeenCalled();
  });
});

/** A stream that sends `first`, then `later` every `everyMs` (keep-alives), never ending; records its cancel. */
function silentAfter(first: string, later = '', everyMs = 0) {
  const state = { cancelled: false };
  let timer: ReturnType<typeof setInterval> | undefined;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(first));
      if (later) timer = setInterval(() => controller.enqueue(new TextEncoder().encode(later)), everyMs);
    },
    cancel() {
      state.cancelled = true;
      clearInterval(timer);
    },
  });
  return { stream, state, stop: () => clearInterval(timer) };
}

describe('a connection that dies without a word', () => {
  it('readSse gives a silent stream up after streamSilentMs, and not one that sends keep-alives', async () => {
    vi.useFakeTimers();
    const silent = silentAfter('id: 1\ndata: {}\n\n');
    const events: string[] = [];
    const reading = (async () => {
      for await (const batch of readSse(silent.stream)) events.push(...batch.map((event) => event.id!));
    })();
    const failed = expect(reading).rejects.toThrow(StreamSilentError);
    await vi.advanceTimersByTimeAsync(streamSilentMs - 1);
    expect(silent.state.cancelled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await failed;
    expect(events).toEqual(['1']);
    expect(silent.state.cancelled).toBe(true);

    const kept = silentAfter('id: 1\ndata: {}\n\n', ': keep-alive\n\n', 15_000);
    const stop = new AbortController();
    const keptReading = (async () => {
      for await (const _ of readSse(kept.stream, stop.signal)) { /* events */ }
    })();
    await vi.advanceTimersByTimeAsync(streamSilentMs * 3);
    expect(kept.state.cancelled).toBe(false);
    stop.abort();
    kept.stop();
    await keptReading;
  });

  it('followThread connects again after a silent stream, from the last applied seq', async () => {
    vi.useFakeTimers();
    const urls: string[] = [];
    vi.stubGlobal('fetch', async (url: string) => {
      urls.push(url);
      const event = { seq: urls.length, runId: null, fence: 0, type: 'message', data: {}, createdAt: '' };
      return new Response(silentAfter(`retry: 2000\n\nid: ${event.seq}\ndata: ${JSON.stringify(event)}\n\n`).stream,
        { headers: { 'content-type': 'text/event-stream' } });
    });
    const stop = new AbortController();
    let applied = 0;
    const following = followThread({ threadId: 't', cursor: () => applied, onEvent: (event) => void (applied = event.seq), signal: stop.signal });
    await vi.advanceTimersByTimeAsync(streamSilentMs + 300);
    stop.abort();
    await following;
    expect(urls).toEqual(['/api/threads/t/events?after=0', '/api/threads/t/events?after=1']);
  });
});

describe('sendMessage', () => {
  const send = (signal = new AbortController().signal) => sendMessage({
    threadId: 't', message: 'hello', clientMessageId: 'c1', onEvent: () => {}, onThread: () => {}, signal,
  });

  it('gives up on an answer that does not come, as on one that could not be sent (the caller sends again)', async () => {
    vi.useFakeTimers();
    vi.stubGlobal('fetch', (_: string, init: RequestInit) => new Promise((_resolve, reject) => {
      init.signal!.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')));
    }));
    const sending = send();
    const failed = expect(sending).rejects.toThrow(TypeError);
    await vi.advanceTimersByTimeAsync(sendAnswerMs);
    await failed;
  });

  it('does not end a stream that outlasts that wait', async () => {
    vi.useFakeTimers();
    const events: number[] = [];
    const open = silentAfter('id: 1\ndata: {"seq":1}\n\n', 'id: 2\ndata: {"seq":2}\n\n', sendAnswerMs + 1_000);
    vi.stubGlobal('fetch', async () => new Response(open.stream, { headers: { 'content-type': 'text/event-stream', 'x-agent-kit-thread-id': 't' } }));
    const page = new AbortController();
    const sending = sendMessage({
      threadId: 't', message: 'hello', clientMessageId: 'c1', onEvent: (event) => void events.push(event.seq), onThread: () => {}, signal: page.signal,
    });
    await vi.advanceTimersByTimeAsync(sendAnswerMs + 1_500);
    expect(events).toEqual([1, 2]);
    expect(open.state.cancelled).toBe(false);
    page.abort();
    open.stop();
    await sending;
  });

  it('asks a reply again naming the run it replaces, so that the same request sent again is one (ADR-0092)', async () => {
    const bodies: unknown[] = [];
    vi.stubGlobal('fetch', async (_: string, init: RequestInit) => {
      bodies.push(JSON.parse(String(init.body)));
      return new Response('id: 1\ndata: {"seq":1}\n\n', { headers: { 'content-type': 'text/event-stream' } });
    });
    const options = { threadId: 't', message: 'hello', clientMessageId: 'c1', onEvent: () => {}, onThread: () => {}, signal: new AbortController().signal };
    await sendMessage({ ...options, regenerate: true, replaces: 'r1' });
    await sendMessage({ ...options, replaces: 'r1' }); // (only a regenerate names one)
    expect(bodies).toEqual([
      { threadId: 't', message: 'hello', clientMessageId: 'c1', regenerate: true, replaces: 'r1' },
      { threadId: 't', message: 'hello', clientMessageId: 'c1' },
    ]);
  });
});
