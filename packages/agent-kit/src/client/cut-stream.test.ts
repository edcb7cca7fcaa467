// A reply's stream cut on its way (a killed function, a proxy that closed, a network that
// dropped) through agent-kit/client, with the real turn engine and the scripted model on both
// stores, and with hand-made streams where the cut must fall between two chunks of one event:
// the transport reads on after the stream's last whole event (ADR-0083), so the chat shows one
// message to the run's end with every word once, and it gives up with an error, not a loop, when
// the streams keep being cut. A stream that goes silent (no keep-alive either) is a cut too.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { UIMessage } from 'ai';
import { TestChat, readThread, statusOf as status, transportTo, until } from '../../test/harness/chat-kit.js';
import { headerAuth, makeRequest } from '../../test/harness/http-harness.js';
import { closeRealEngine, openRealEngine, type RealEngine } from '../../test/harness/real-engine.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { textOf } from '../../test/harness/ui-messages.js';
import { uiMessageStreamHeaders } from '../http/ai-sdk-stream.js';
import { createHandlers, type Handlers } from '../http/handlers.js';
import { scriptedReplyText } from '../model/index.js';
import { threadIdOf } from './index.js';
import { chunksOf, StreamCut, streamSilentMs } from './read-on.js';

let engine: RealEngine | undefined;
let served: Handlers;
beforeAll(async () => {
  engine = await openRealEngine(8);
  // Replies of 60 words, 30 ms apart (about 2 s).
  served = createHandlers({ rt: makeRuntime(engine.db, { tokens: 60, delayMs: 30 }), authenticate: headerAuth });
});
afterAll(() => closeRealEngine(engine));

/** `response` with its body cut after `bytes`: closed as a proxy closes it, or failed as a dropped connection. */
function cutAfter(response: Response, bytes: number, how: 'closed' | 'failed'): Response {
  const reader = response.body!.getReader();
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (sent >= bytes) {
        void reader.cancel().catch(() => {});
        return how === 'closed' ? controller.close() : controller.error(new TypeError('terminated'));
      }
      const { done, value } = await reader.read();
      if (done) return controller.close();
      const part = value.subarray(0, bytes - sent);
      sent += part.length;
      controller.enqueue(part);
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return new Response(body, { status: response.status, headers: response.headers });
}

/** The chat's requests, as `METHOD path?query`. */
function requestLine(request: Request): string {
  const url = new URL(request.url);
  return `${request.method} ${url.pathname}${url.search}`;
}

/** The text parts still open (shown as streaming) in `message`. */
const openTextParts = (message: UIMessage) => message.parts.filter((p) => (p.type === 'text' || p.type === 'reasoning') && p.state !== 'done');

describe('a stream cut on its way', () => {
  it('is read on after its last whole event, however often it is cut: one message to the end, every word once', async () => {
    const requests: string[] = [];
    const cuts: Array<[number, 'closed' | 'failed']> = [[700, 'closed'], [500, 'failed'], [900, 'closed']];
    const chat = new TestChat({
      transport: transportTo(() => served, {
        fetch: async (request, serve) => {
          requests.push(requestLine(request));
          const response = await serve(request);
          const cut = request.url.includes('/cancel') ? undefined : cuts.shift();
          return cut ? cutAfter(response, ...cut) : response;
        },
      }),
    });
    await chat.sendMessage({ text: 'a reply cut three times' });
    await until(() => chat.status === 'ready', 20_000);
    const reply = chat.messages.at(-1)!;
    const { messages, runs } = await readThread(served, threadIdOf(chat.messages)!);
    expect(runs.find((r) => r.id === reply.id)?.status).toBe('completed');
    expect(chat.error).toBeUndefined();
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(textOf(reply)).toBe(scriptedReplyText(['a reply cut three times'], 60));
    expect(textOf(reply)).toBe(messages.find((m) => m.role === 'assistant' && m.runId === reply.id)!.text);
    expect(status(reply)).toBe('completed');
    expect(openTextParts(reply)).toEqual([]);
    expect(reply.parts.filter((p) => p.type === 'text')).toHaveLength(1);
    // Three cuts, three reads on, each after the event the stream before it ended with.
    const readsOn = requests.filter((line) => line.startsWith('GET '));
    expect(readsOn.length).toBeGreaterThanOrEqual(3);
    const afters = readsOn.map((line) => Number(/after=(\d+)/.exec(line)?.[1]));
    expect(afters.every((after) => after > 0)).toBe(true);
    expect(afters.slice(0, 3)).toEqual([...afters.slice(0, 3)].sort((a, b) => a - b));
    await served.segments.settle();
  });

  it('cut before its first event, is read again from the run\'s start (the response named the run)', async () => {
    const requests: string[] = [];
    let cutOne = true;
    const chat = new TestChat({
      transport: transportTo(() => served, {
        fetch: async (request, serve) => {
          requests.push(requestLine(request));
          const response = await serve(request);
          if (!cutOne) return response;
          cutOne = false;
          return cutAfter(response, 0, 'failed');
        },
      }),
    });
    await chat.sendMessage({ text: 'cut at once' });
    await until(() => chat.status === 'ready', 20_000);
    const reply = chat.messages.at(-1)!;
    expect(chat.error).toBeUndefined();
    expect(textOf(reply)).toBe(scriptedReplyText(['cut at once'], 60));
    expect(status(reply)).toBe('completed');
    expect(requests[1]).toMatch(new RegExp(`^GET /api/threads/${threadIdOf(chat.messages)}/events\\?format=ai-sdk&runId=${reply.id}&after=0$`));
    await served.segments.settle();
  });

  it('shows nothing of an event that came only in part, and ends the part it left open', async () => {
    const ids = { runId: 'r-1', threadId: 't-1' };
    const frame = (chunk: object, id?: number) => `${id === undefined ? '' : `id: ${id}\n`}data: ${JSON.stringify(chunk)}\n\n`;
    const sse = (text: string, cut: boolean) => {
      let sent = false;
      return new Response(new ReadableStream<Uint8Array>({
        pull(controller) {
          if (!sent) controller.enqueue(new TextEncoder().encode(text));
          else if (cut) controller.error(new TypeError('terminated'));
          else controller.close();
          sent = true;
        },
      }), { headers: { 'content-type': 'text/event-stream', ...uiMessageStreamHeaders } });
    };
    const requests: string[] = [];
    const chat = new TestChat({
      transport: transportTo(() => engine!.handlers, {
        fetch: async (request) => {
          requests.push(requestLine(request));
          if (requests.length === 1) {
            return sse(frame({ type: 'start', messageId: 'r-1', messageMetadata: ids }) + frame({ type: 'start-step' })
              + frame({ type: 'text-start', id: 'a' }) + frame({ type: 'text-delta', id: 'a', delta: 'Hel' }, 3)
              // Event 4 ends the text and calls a tool; only its first chunk comes.
              + frame({ type: 'text-end', id: 'a' }), true);
          }
          if (requests.length === 2) {
            return sse(frame({ type: 'start', messageId: 'r-1', messageMetadata: ids }) + frame({ type: 'start-step' })
              + frame({ type: 'text-start', id: 'b' }) + frame({ type: 'text-delta', id: 'b', delta: 'lo' }) + frame({ type: 'text-end', id: 'b' })
              + frame({ type: 'tool-input-available', toolCallId: 'c', toolName: 'lookup', input: {} }, 4)
              + frame({ type: 'finish-step' }) + frame({ type: 'finish', messageMetadata: { ...ids, status: 'completed', seq: 4 } })
              + 'data: [DONE]\n\n', false);
          }
          throw new Error('read on once too often');
        },
      }),
    });
    await chat.sendMessage({ text: 'hello' });
    await until(() => chat.status !== 'streaming' && chat.status !== 'submitted');
    expect(chat.error).toBeUndefined();
    expect(requests).toEqual(['POST /api/chat?format=ai-sdk', 'GET /api/threads/t-1/events?format=ai-sdk&runId=r-1&after=3']);
    const reply = chat.messages.at(-1)!;
    expect(textOf(reply)).toBe('Hello');
    // One text part, as a reload shows it: the text the cut left open goes on in it (ADR-0089).
    expect(reply.parts.filter((p) => p.type === 'text').map((p) => p.type === 'text' && [p.text, p.state])).toEqual([['Hello', 'done']]);
    // One step, as the stream had it: the step the cut left open goes on in the next stream.
    expect(reply.parts.filter((p) => p.type === 'step-start')).toHaveLength(1);
    expect(reply.parts.filter((p) => p.type === 'tool-lookup')).toHaveLength(1);
  });

  it('stop() while the transport waits to read on cancels the run, once', async () => {
    const requests: string[] = [];
    const chat = new TestChat({
      transport: transportTo(() => served, {
        fetch: async (request, serve) => {
          requests.push(requestLine(request));
          if (request.method === 'GET') throw new TypeError('network down');
          return request.url.endsWith('/cancel') ? serve(request) : cutAfter(await serve(request), 2_500, 'closed');
        },
      }),
    });
    void chat.sendMessage({ text: 'stop me between two requests' });
    await until(() => requests.filter((line) => line.startsWith('GET ')).length === 2); // then a pause of 0.5 s
    await chat.stop();
    const runId = chat.messages.at(-1)!.id;
    const threadId = threadIdOf(chat.messages)!;
    await until(async () => (await readThread(served, threadId)).runs.some((r) => r.id === runId && r.status === 'aborted'));
    expect(requests.filter((line) => line.endsWith('/cancel'))).toEqual([`POST /api/runs/${runId}/cancel`]);
    expect(requests.filter((line) => line.startsWith('GET '))).toHaveLength(2); // and no read on after the stop
    expect(chat.status).toBe('ready');
    await served.segments.settle();
  });

  it('reads on for as long as a run is held when a proxy closes each stream after a while', async () => {
    // A proxy that ends every response after 1.2 s: while an operator holds the run, no stream
    // carries an event, and each is cut. The server is fine: the chat must not give up on it.
    const capped = createHandlers({ rt: makeRuntime(engine!.db, { tokens: 60, delayMs: 30 }), authenticate: headerAuth, keepAliveMs: 200 });
    const closedAfter = (response: Response, ms: number) => {
      const reader = response.body!.getReader();
      const deadline = Date.now() + ms;
      return new Response(new ReadableStream<Uint8Array>({
        async pull(controller) {
          const read = await Promise.race([reader.read(), new Promise<undefined>((r) => setTimeout(r, Math.max(0, deadline - Date.now())))]);
          if (read && !read.done) return controller.enqueue(read.value);
          void reader.cancel().catch(() => {});
          controller.close();
        },
        cancel: (reason) => reader.cancel(reason),
      }), { status: response.status, headers: response.headers });
    };
    const reads: string[] = [];
    const chat = new TestChat({
      transport: transportTo(() => capped, {
        fetch: async (request, serve) => {
          if (request.method === 'GET') reads.push(requestLine(request));
          const response = await serve(request);
          return request.url.includes('/events') ? closedAfter(response, 1_200) : response;
        },
      }),
    });
    const sending = chat.sendMessage({ text: 'an operator holds this' });
    await until(() => chat.messages.length === 2 && textOf(chat.messages[1]!).length > 0);
    const runId = chat.messages[1]!.id;
    const operator = (action: string) => capped.handle(makeRequest('POST', `/api/runs/${runId}/${action}`, { user: 'ops', operator: true }));
    expect((await operator('takeover')).status).toBe(200);
    await capped.segments.settle();
    const readsAtHold = reads.length;
    await until(() => reads.length >= readsAtHold + 6, 15_000); // more than the four reads on a failing server gets
    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('streaming');
    expect((await operator('release')).status).toBe(200);
    capped.segments.start(runId);
    await sending;
    await until(() => chat.status === 'ready' && status(chat.messages.at(-1)!) === 'completed', 20_000);
    const { messages } = await readThread(capped, threadIdOf(chat.messages)!);
    expect(textOf(chat.messages.at(-1)!)).toBe(messages.find((m) => m.role === 'assistant' && m.runId === runId)!.text);
    await capped.segments.settle();
  });

  it('gives up with the error after a few reads on that fail, a little later each time', async () => {
    const requests: Array<{ line: string; at: number }> = [];
    const started = Date.now();
    const chat = new TestChat({
      transport: transportTo(() => served, {
        fetch: async (request, serve) => {
          requests.push({ line: requestLine(request), at: Date.now() - started });
          if (request.method === 'GET') throw new TypeError('network down');
          return cutAfter(await serve(request), 2_500, 'closed');
        },
      }),
    });
    await chat.sendMessage({ text: 'the network is gone' });
    await until(() => chat.status === 'error', 15_000);
    expect(chat.error?.message).toMatch(/network down/);
    const gets = requests.filter((r) => r.line.startsWith('GET '));
    expect(gets).toHaveLength(4);
    // At once, then about 0.5 s, 1 s and 2 s apart.
    const gaps = gets.slice(1).map((r, i) => r.at - gets[i]!.at);
    expect(gaps.every((gap, i) => gap >= 450 * 2 ** i)).toBe(true);
    const shown = textOf(chat.messages.at(-1)!);
    expect(shown.length).toBeGreaterThan(0);
    expect(scriptedReplyText(['the network is gone'], 60).startsWith(shown)).toBe(true);
    expect(openTextParts(chat.messages.at(-1)!)).toEqual([]);
    await served.segments.settle();
  });
});

describe('a stream that goes silent', () => {
  it(`is taken for cut after ${streamSilentMs / 1000} s without a byte, and not while keep-alives come`, async () => {
    vi.useFakeTimers();
    try {
      const frames = (keepAliveEveryMs?: number) => {
        let timer: ReturnType<typeof setInterval> | undefined;
        const state = { cancelled: false };
        const body = new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(new TextEncoder().encode('id: 3\ndata: {"type":"start","messageId":"r-1"}\n\n'));
            if (keepAliveEveryMs) timer = setInterval(() => controller.enqueue(new TextEncoder().encode(': keep-alive\n\n')), keepAliveEveryMs);
          },
          cancel() {
            state.cancelled = true;
            clearInterval(timer);
          },
        });
        return { chunks: chunksOf(body).getReader(), state, stop: () => clearInterval(timer) };
      };
      const silent = frames();
      expect((await silent.chunks.read()).value?.type).toBe('start');
      const next = silent.chunks.read();
      const cut = expect(next).rejects.toThrow(StreamCut);
      await vi.advanceTimersByTimeAsync(streamSilentMs);
      await cut;
      expect(silent.state.cancelled).toBe(true);

      const kept = frames(15_000);
      expect((await kept.chunks.read()).value?.type).toBe('start');
      let settled = false;
      void kept.chunks.read().then(() => (settled = true), () => (settled = true));
      await vi.advanceTimersByTimeAsync(streamSilentMs * 3);
      expect(settled).toBe(false);
      expect(kept.state.cancelled).toBe(false);
      kept.stop();
      await kept.chunks.cancel();
    } finally {
      vi.useRealTimers();
    }
  });
});
