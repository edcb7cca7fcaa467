// A reply longer than one stream, through agent-kit/client, with the real turn engine and the
// scripted model, on both stores: when a stream ends before its run (the route's stream budget,
// the run parked for its next segment), the transport reads the rest from the events route, so
// the chat shows one message to the run's end, every word once, however many streams it took.
import { readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestChat, readThread, statusOf as status, transportTo, until } from '../../test/harness/chat-kit.js';
import { headerAuth, makeRequest } from '../../test/harness/http-harness.js';
import { closeRealEngine, openRealEngine, type RealEngine } from '../../test/harness/real-engine.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { textOf } from '../../test/harness/ui-messages.js';
import { uiMessageStreamHeaders } from '../http/ai-sdk-stream.js';
import { createHandlers, type Handlers } from '../http/handlers.js';
import { scriptedReplyText } from '../model/index.js';
import type { Db } from '../store/db.js';
import { threadIdOf, toUIMessages } from './index.js';
import { chunksOf, oneAfterAnother, readOn } from './read-on.js';

let db: Db;
let engine: RealEngine | undefined;
beforeAll(async () => {
  engine = await openRealEngine(8);
  ({ db } = engine);
});
afterAll(() => closeRealEngine(engine));

/** Handlers whose replies are 60 words, 30 ms apart (about 2 s), each stream at most `maxStreamMs`. */
const slowly = (maxStreamMs?: number) => createHandlers({
  rt: makeRuntime(db, { tokens: 60, delayMs: 30 }), authenticate: headerAuth, ...(maxStreamMs ? { maxStreamMs } : {}),
});

/** The transport over `served()`, and the events-route requests it made (the streams it read on with). */
function counted(served: () => Handlers) {
  const reads: string[] = [];
  const cancels: string[] = [];
  const transport = transportTo(served, {
    fetch: (request, serve) => {
      if (request.method === 'GET' && request.url.includes('/events?')) reads.push(new URL(request.url).search);
      if (request.method === 'POST' && request.url.endsWith('/cancel')) cancels.push(new URL(request.url).pathname);
      return serve(request);
    },
  });
  return { transport, reads, cancels };
}

/** The chat's last message once the chat is ready, and the thread's stored reply of that run. */
async function replyOf(chat: TestChat, served: Handlers) {
  await until(() => chat.status === 'ready', 20_000);
  const reply = chat.messages.at(-1)!;
  const { messages, runs } = await readThread(served, threadIdOf(chat.messages)!);
  return {
    reply,
    stored: messages.find((m) => m.role === 'assistant' && m.runId === reply.id),
    run: runs.find((r) => r.id === reply.id),
  };
}

describe('a reply longer than one stream', () => {
  it("reads on past the route's stream budget: one message to the run's end, every word once", async () => {
    const short = slowly(300); // each stream ends after 0.3 s; the reply takes about 2 s
    const { transport, reads } = counted(() => short);
    const chat = new TestChat({ transport });
    await chat.sendMessage({ text: 'a long answer please' });
    const { reply, stored, run } = await replyOf(chat, short);
    expect(run?.status).toBe('completed');
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(reply.id).toBe(run!.id);
    expect(status(reply)).toBe('completed');
    expect(textOf(reply)).toBe(scriptedReplyText(['a long answer please'], 60));
    expect(textOf(reply)).toBe(stored!.text);
    expect(reads.length).toBeGreaterThanOrEqual(2); // it took more than one stream
    // In one text part, as a reload shows it (ADR-0089).
    expect(reply.parts.filter((p) => p.type === 'text').map((p) => p.type === 'text' && p.state)).toEqual(['done']);
    expect(reads.every((query) => query.includes(`runId=${run!.id}`) && /after=\d+/.test(query))).toBe(true);

    // A chat reopened mid-reply (a reload) resumes it, and reads on the same way.
    const threadId = threadIdOf(chat.messages)!;
    const before = new TestChat({ id: threadId, transport: transportTo(() => short), messages: chat.messages });
    const sending = before.sendMessage({ text: 'and another' });
    await until(() => before.messages.length === 4 && textOf(before.messages.at(-1)!).length > 0);
    const reloaded = counted(() => short);
    const reopened = new TestChat({ id: threadId, transport: reloaded.transport, messages: toUIMessages(await readThread(short, threadId)) });
    await reopened.resumeStream();
    const resumed = await replyOf(reopened, short);
    expect(resumed.run?.status).toBe('completed');
    expect(status(resumed.reply)).toBe('completed');
    expect(textOf(resumed.reply)).toBe(resumed.stored!.text);
    expect(reloaded.reads.filter((query) => query.includes('after=')).length).toBeGreaterThanOrEqual(1); // read on
    await sending; // (the page before the reload read it to its end too)
    expect(textOf(before.messages.at(-1)!)).toBe(resumed.stored!.text);
  });

  it('stop() while it reads on cancels the run, as in the first stream', async () => {
    const short = slowly(300);
    const { transport, reads, cancels } = counted(() => short);
    const chat = new TestChat({ transport });
    void chat.sendMessage({ text: 'stop me in a later stream' });
    await until(() => reads.length >= 2); // in its third stream
    await chat.stop();
    const runId = chat.messages.at(-1)!.id;
    const threadId = threadIdOf(chat.messages)!;
    await until(async () => (await readThread(short, threadId)).runs.some((r) => r.id === runId && r.status === 'aborted'));
    await short.segments.settle();
    const { text } = (await readThread(short, threadId)).messages.find((m) => m.role === 'assistant' && m.runId === runId)!;
    expect(text.length).toBeLessThan(scriptedReplyText(['stop me in a later stream'], 60).length);
    expect(scriptedReplyText(['stop me in a later stream'], 60).startsWith(text)).toBe(true);
    // One cancel: the streams read before the one stopped no longer listen to the chat's signal.
    expect(cancels).toEqual([`/api/runs/${runId}/cancel`]);
  });

  it('does not read on after a stream that ended with an error: the chat shows the error', async () => {
    // What the route sends when it cannot read the log (the store went away mid-stream).
    const sse = (chunks: object[]) => new Response(`${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('')}data: [DONE]\n\n`,
      { headers: { 'content-type': 'text/event-stream', ...uiMessageStreamHeaders } });
    const ids = { runId: 'r-1', threadId: 't-1' };
    const requests: string[] = [];
    const chat = new TestChat({
      transport: transportTo(() => engine!.handlers, {
        fetch: async (request) => {
          requests.push(`${request.method} ${new URL(request.url).pathname}`);
          if (requests.length > 5) throw new Error('asked again and again'); // (so that a regression ends)
          return sse([
            { type: 'start', messageId: 'r-1', messageMetadata: ids }, { type: 'start-step' },
            { type: 'text-start', id: 'x' }, { type: 'text-delta', id: 'x', delta: 'So far' }, { type: 'text-end', id: 'x' },
            { type: 'finish-step' }, { type: 'finish', messageMetadata: { ...ids, status: 'streaming', seq: 7 } },
            { type: 'error', errorText: 'STORE_UNAVAILABLE: the database does not answer' },
          ]);
        },
      }),
    });
    await chat.sendMessage({ text: 'hello' });
    await until(() => chat.status === 'error');
    expect(chat.error?.message).toMatch(/STORE_UNAVAILABLE/);
    expect(textOf(chat.messages.at(-1)!)).toBe('So far');
    expect(status(chat.messages.at(-1)!)).toBe('streaming');
    expect(requests).toEqual(['POST /api/chat']); // not read on
  });

  it('reads on while an operator holds the run, and shows the rest once it is released', async () => {
    const short = slowly(300);
    const { transport, reads } = counted(() => short);
    const notes: Array<{ type: string; data: { status?: string } }> = [];
    const chat = new TestChat({ transport, onData: (part) => void notes.push(part.data as (typeof notes)[number]) });
    const sending = chat.sendMessage({ text: 'an operator looks at this' });
    await until(() => chat.messages.length === 2 && textOf(chat.messages[1]!).length > 0);
    const runId = chat.messages[1]!.id;
    const operator = (action: string) => short.handle(makeRequest('POST', `/api/runs/${runId}/${action}`, { user: 'ops', operator: true }));
    const statusOf = async () => (await db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [runId]))[0]!.status;
    expect((await operator('takeover')).status).toBe(200);
    await until(async () => (await statusOf()) === 'waiting_takeover');
    await short.segments.settle();
    // Held, the chat goes on reading, one stream per budget (not one request after another).
    const readsAtPark = reads.length;
    const heldFrom = Date.now();
    await until(() => reads.length >= readsAtPark + 2, 10_000);
    expect(chat.status).toBe('streaming');
    expect(notes.some((note) => note.type === 'run-parked' && note.data.status === 'waiting_takeover')).toBe(true);
    expect(reads.length - readsAtPark).toBeLessThanOrEqual(Math.ceil((Date.now() - heldFrom) / 300) + 2);
    const shownWhileHeld = textOf(chat.messages[1]!);
    expect(scriptedReplyText(['an operator looks at this'], 60).startsWith(shownWhileHeld)).toBe(true);

    expect((await operator('release')).status).toBe(200);
    short.segments.start(runId); // the drain takes the released run (here, at once)
    await sending;
    const { reply, stored, run } = await replyOf(chat, short);
    expect(run?.status).toBe('completed');
    expect(status(reply)).toBe('completed');
    expect(textOf(reply)).toBe(scriptedReplyText(['an operator looks at this'], 60));
    expect(textOf(reply)).toBe(stored!.text);
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    await short.segments.settle();
  });

  /** A server whose invocations last 1.2 s: a 2 s reply is cut mid-way and parked for its next segment. */
  const cutShort = (followersCarryOn: boolean) => createHandlers({
    rt: makeRuntime(db, { tokens: 60, delayMs: 30, config: { invocationBudgetMs: 1_200, leaseTtlMs: 1_200 } }),
    authenticate: headerAuth, followersCarryOn,
  });

  /**
   * A chat sent to `first` that a deploy moves to `second` mid-reply (the scripted model goes on
   * from the text it had, as a prefill): `deploy()` sends the next requests to `second`, and
   * `expectWhole()` checks the chat got the whole reply, read on, in one message.
   */
  async function chatAcrossADeploy(first: Handlers, second: Handlers) {
    let served = first;
    const { transport, reads } = counted(() => served);
    const chat = new TestChat({ transport });
    const sending = chat.sendMessage({ text: 'survive a deploy' });
    await until(() => chat.messages.length === 2 && textOf(chat.messages[1]!).length > 0);
    return {
      chat,
      runId: chat.messages[1]!.id,
      deploy: () => (served = second),
      async expectWhole() {
        await sending;
        const { reply, stored, run } = await replyOf(chat, second);
        expect(run?.status).toBe('completed');
        expect(status(reply)).toBe('completed');
        expect(textOf(reply)).toBe(scriptedReplyText(['survive a deploy'], 60));
        expect(textOf(reply)).toBe(stored!.text);
        expect(reads.length).toBeGreaterThanOrEqual(1);
        await first.segments.settle();
        await second.segments.settle();
      },
    };
  }

  it("reads on while the run waits for its next segment, which the reader's own request runs on the new server (ADR-0120)", async () => {
    const carried: string[] = [];
    const second = createHandlers({
      rt: { ...makeRuntime(db, { tokens: 60, delayMs: 30 }), log: (entry) => {
        if (entry.msg === 'http reader carries turn on') carried.push(String(entry.runId));
      } },
      authenticate: headerAuth,
    });
    const chat = await chatAcrossADeploy(cutShort(true), second);
    chat.deploy(); // before the park: the read-on goes to the new server, and no drain runs
    await chat.expectWhole();
    expect(carried).toContain(chat.runId); // the reader's events request ran the rest
  });

  it('reads on while the run waits for its next segment, which a drain runs where readers do not carry turns on', async () => {
    const first = cutShort(false);
    const second = createHandlers({ rt: makeRuntime(db, { tokens: 60, delayMs: 30 }), authenticate: headerAuth, followersCarryOn: false });
    const chat = await chatAcrossADeploy(first, second);
    const statusOf = async () => (await db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [chat.runId]))[0]!.status;
    await until(async () => (await statusOf()) === 'queued');
    await first.segments.settle();
    expect(chat.chat.status).toBe('streaming'); // the chat reads on, as nothing ended for it
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await statusOf()).toBe('queued'); // its reader's requests ran nothing
    chat.deploy();
    second.segments.start(chat.runId); // the new server's drain (here, at once) takes the run
    await chat.expectWhole();
  });
});

describe('one reply after another (ADR-0088)', () => {
  const reply = (runId: string, status: string): UIMessageChunk[] => [
    { type: 'start', messageId: runId }, { type: 'finish', messageMetadata: { runId, status } },
  ];
  const streamOf = (chunks: UIMessageChunk[]) => new ReadableStream<UIMessageChunk>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  async function messageIds(first: UIMessageChunk[], next: string[], statuses: Record<string, string>) {
    const opened: string[] = [];
    const stream = oneAfterAnother(streamOf(first), next, (runId) => (opened.push(runId), streamOf(reply(runId, statuses[runId]!))));
    const ids: string[] = [];
    for await (const chunk of stream as unknown as AsyncIterable<UIMessageChunk>) if (chunk.type === 'start') ids.push(chunk.messageId!);
    expect(opened).toEqual(ids.slice(1)); // a run's stream is opened only when its turn comes
    return ids;
  }

  it('reads each queued run once the one before it closed, and stops at one that waits for the user', async () => {
    expect(await messageIds(reply('r1', 'completed'), ['r2', 'r3'], { r2: 'aborted', r3: 'failed' })).toEqual(['r1', 'r2', 'r3']);
    expect(await messageIds(reply('r1', 'completed'), ['r2', 'r3'], { r2: 'waiting_input', r3: 'completed' })).toEqual(['r1', 'r2']);
    expect(await messageIds(reply('r1', 'waiting_takeover'), ['r2'], {})).toEqual(['r1']);
    expect(await messageIds([{ type: 'start', messageId: 'r1' }], ['r2'], {})).toEqual(['r1']); // no finish: no word of its end
  });
});

describe('a part a stream leaves open goes on in the next stream (ADR-0089)', () => {
  const ids = { runId: 'r', threadId: 't' };
  /** An SSE body of `frames` ([chunk, seq of the event it ends]), ended as a stream budget ends one. */
  const body = (frames: Array<[object, number?]>, seq: number) => new Response(
    [...frames, [{ type: 'finish-step' }], [{ type: 'finish', messageMetadata: { ...ids, status: 'streaming', seq } }]]
      .map(([chunk, id]) => `${id === undefined ? '' : `id: ${id}\n`}data: ${JSON.stringify(chunk)}\n\n`).join('') + 'data: [DONE]\n\n',
  ).body!;
  const first = (open: 'text' | 'reasoning') => body([
    [{ type: 'start', messageId: 'r', messageMetadata: ids }], [{ type: 'start-step' }],
    [{ type: `${open}-start`, id: 'a' }], [{ type: `${open}-delta`, id: 'a', delta: 'Hel' }, 3], [{ type: `${open}-end`, id: 'a' }],
  ], 3);
  /** The message the AI SDK builds from the first stream and then the streams of `next`, and the cuts read on from. */
  async function shown(firstBody: ReadableStream<Uint8Array>, next: Array<ReadableStream<Uint8Array> | Error>) {
    const cuts: number[] = [];
    const stream = readOn(chunksOf(firstBody, ids), async (cut) => {
      cuts.push(cut.seq);
      const answer = next.shift();
      if (answer === undefined || answer instanceof Error) throw answer ?? new Error('read on once too often');
      return chunksOf(answer, ids);
    }, undefined);
    let message: UIMessage | undefined;
    let error: unknown;
    for await (const m of readUIMessageStream({ stream, onError: (e) => (error = e) })) message = m;
    return { parts: message!.parts.map((p) => ('text' in p ? [p.type, p.text, p.state] : [p.type])), cuts, error };
  }
  const rest = (frames: Array<[object, number?]>) => body([[{ type: 'start', messageId: 'r', messageMetadata: ids }], [{ type: 'start-step' }], ...frames], 9);
  const closing = (frames: Array<[object, number?]>) => new Response(
    [[{ type: 'start', messageId: 'r', messageMetadata: ids }], [{ type: 'start-step' }], ...frames, [{ type: 'finish-step' }],
      [{ type: 'finish', messageMetadata: { ...ids, status: 'completed', seq: 9 } }]]
      .map(([chunk, id]) => `${id === undefined ? '' : `id: ${id}\n`}data: ${JSON.stringify(chunk)}\n\n`).join('') + 'data: [DONE]\n\n',
  ).body!;

  it('goes on in the text part the stream before it left open, however many streams it takes', async () => {
    const { parts, cuts } = await shown(first('text'), [
      rest([[{ type: 'text-start', id: 'b' }], [{ type: 'text-delta', id: 'b', delta: 'lo, ' }, 5], [{ type: 'text-end', id: 'b' }]]),
      closing([[{ type: 'text-start', id: 'c' }], [{ type: 'text-delta', id: 'c', delta: 'you.' }, 9], [{ type: 'text-end', id: 'c' }]]),
    ]);
    expect(cuts).toEqual([3, 9]);
    expect(parts).toEqual([['step-start'], ['text', 'Hello, you.', 'done']]);
  });

  it('goes on in the text part across a park for the next segment (its note, then the stream\'s end)', async () => {
    const parkedFirst = new Response([
      [{ type: 'start', messageId: 'r', messageMetadata: ids }], [{ type: 'start-step' }],
      [{ type: 'text-start', id: 'a' }], [{ type: 'text-delta', id: 'a', delta: 'Hel' }, 3],
      [{ type: 'data-agent-kit-event', data: { type: 'run-parked', seq: 4 }, transient: true }, 4],
      [{ type: 'text-end', id: 'a' }], [{ type: 'finish-step' }], [{ type: 'finish', messageMetadata: { ...ids, status: 'queued', seq: 4 } }],
    ].map(([chunk, id]) => `${id === undefined ? '' : `id: ${id}\n`}data: ${JSON.stringify(chunk)}\n\n`).join('') + 'data: [DONE]\n\n').body!;
    const { parts, cuts } = await shown(parkedFirst, [
      closing([[{ type: 'text-start', id: 'c' }], [{ type: 'text-delta', id: 'c', delta: 'lo.' }, 9], [{ type: 'text-end', id: 'c' }]]),
    ]);
    expect(cuts).toEqual([4]);
    expect(parts).toEqual([['step-start'], ['text', 'Hello.', 'done']]);
  });

  it('goes on in an open reasoning part, and the text after it is a part of its own', async () => {
    const { parts } = await shown(first('reasoning'), [closing([
      [{ type: 'reasoning-start', id: 'b' }], [{ type: 'reasoning-delta', id: 'b', delta: 'lo' }, 5], [{ type: 'reasoning-end', id: 'b' }],
      [{ type: 'text-start', id: 'c' }], [{ type: 'text-delta', id: 'c', delta: 'Hi.' }, 9], [{ type: 'text-end', id: 'c' }],
    ])]);
    expect(parts).toEqual([['step-start'], ['reasoning', 'Hello', 'done'], ['text', 'Hi.', 'done']]);
  });

  it('ends the part when the next stream goes on with something else: a tool call, reasoning, the run\'s end', async () => {
    const call = { type: 'tool-input-available', toolCallId: 'c1', toolName: 'lookup', input: {} };
    expect((await shown(first('text'), [closing([[call, 9]])])).parts)
      .toEqual([['step-start'], ['text', 'Hel', 'done'], ['tool-lookup']]);
    expect((await shown(first('text'), [closing([[{ type: 'reasoning-start', id: 'b' }], [{ type: 'reasoning-delta', id: 'b', delta: 'hm' }], [{ type: 'reasoning-end', id: 'b' }, 9]])])).parts)
      .toEqual([['step-start'], ['text', 'Hel', 'done'], ['reasoning', 'hm', 'done']]);
    expect((await shown(first('text'), [closing([])])).parts).toEqual([['step-start'], ['text', 'Hel', 'done']]);
  });

  it('ends the part before the error when reading on fails for good', async () => {
    const { parts, error } = await shown(first('text'), [new Error('gone'), new Error('gone'), new Error('gone'), new Error('gone'), new Error('gone')]);
    expect(String(error)).toMatch(/gone/);
    expect(parts).toEqual([['step-start'], ['text', 'Hel', 'done']]);
  });
});
