// watchThread (ADR-0097), with the real turn engine on both stores: a page hears what another page
// does to its thread (a message, a regeneration, a restore), once each and in order; it reads on
// after a stream's budget ends; a refusal ends it and close() stops it; and a useChat chat that
// reads the thread again on a change shows the other page's turn, live when it is under way.
import type { UIMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestChat, readThread as readThreadOf, transportTo, until } from '../../test/harness/chat-kit.js';
import { base, headerAuth, makeRequest } from '../../test/harness/http-harness.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { closeRealEngine, openRealEngine, type RealEngine } from '../../test/harness/real-engine.js';
import { textOf } from '../../test/harness/ui-messages.js';
import { createHandlers, type Handlers } from '../http/handlers.js';
import { scriptedReplyText } from '../model/index.js';
import { hasTurnUnderWay, isNewToChat, showsConversation, threadIdOf, toUIMessages, watchThread, type ThreadChange } from './index.js';

const tokens = 6;
let engine: RealEngine | undefined;
let handlers: Handlers;
beforeAll(async () => {
  engine = await openRealEngine(tokens);
  handlers = engine.handlers;
});
afterAll(() => closeRealEngine(engine));

/** A page of `user`, its requests served by `served`; counts them. */
function page(served: () => Handlers, user = 'fay') {
  const requests: string[] = [];
  return {
    requests,
    options: {
      origin: base,
      headers: { 'x-user': user },
      fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
        const request = new Request(input as string, init);
        requests.push(new URL(request.url).pathname + new URL(request.url).search);
        return served().handle(request);
      }) as typeof globalThis.fetch,
    },
  };
}

/** A message sent by another page, its reply read to its end: its id, and the reply's run. */
async function sendElsewhere(served: Handlers, threadId: string | undefined, text: string) {
  const chat = new TestChat({ id: threadId, transport: transportTo(() => served), messages: threadId ? toUIMessages(await readThreadOf(served, threadId)) : [] });
  await chat.sendMessage({ text });
  return { threadId: threadIdOf(chat.messages)!, messageId: chat.messages.at(-2)!.id, runId: chat.messages.at(-1)!.id };
}

async function post(served: Handlers, path: string, body: unknown): Promise<Response> {
  const response = await served.handle(makeRequest('POST', path, { user: 'fay', body }));
  await response.text(); // (a chat request streams its turn to its end)
  return response;
}

describe('isNewToChat', () => {
  const reply = (id: string, status: string): UIMessage => ({ id, role: 'assistant', parts: [], metadata: { status, seq: 8 } });
  const change = (type: string, runId: string | null, seq = 9): ThreadChange => ({ seq, type, runId, data: {} });
  const chat: UIMessage[] = [{ id: 'u1', role: 'user', parts: [] }, reply('r1', 'completed'), reply('r2', 'waiting_input')];

  it("takes another page's turns for news, and the chat's own for none", () => {
    expect(isNewToChat(chat, change('message', 'r3'))).toBe(true); // another page's message
    expect(isNewToChat(chat, change('turn-regenerated', 'r3'))).toBe(true);
    expect(isNewToChat(chat, change('turn-restored', 'r0'))).toBe(true);
    expect(isNewToChat(chat, change('message', 'r1'))).toBe(false); // its own turn, whose reply it shows
    expect(isNewToChat(chat, change('message', 'r2'))).toBe(true); // an answer to the question it shows
    expect(isNewToChat(chat, change('message', 'r2', 5))).toBe(false); // the message that began that turn, streamed past
    expect(isNewToChat(chat, change('turn-restored', 'r1'))).toBe(false); // it shows that answer already
    expect(isNewToChat(chat, change('message', 'u1'))).toBe(true); // a user message's id is not a reply's
    expect(isNewToChat(chat, change('message', null))).toBe(false);
  });

  it('judges a reply split by a typed answer by its last piece (ADR-0087)', () => {
    const piece = (id: string, status: string, seq: number): UIMessage => ({ id, role: 'assistant', parts: [], metadata: { runId: 'r2', status, seq } });
    const asked: UIMessage[] = [{ id: 'u1', role: 'user', parts: [] }, reply('r2', 'waiting_input')];
    const answered = [...asked, { id: 'u2', role: 'user', parts: [], metadata: { runId: 'r2' } } as UIMessage];
    // Its own answer (seq 9), the rest of the reply streamed past it: no news.
    expect(isNewToChat([...answered, piece('r2:u2', 'completed', 14)], change('message', 'r2'))).toBe(false);
    // The rest asked again (seq 14) and another page answered that (seq 15): news.
    expect(isNewToChat([...answered, piece('r2:u2', 'waiting_input', 14)], change('message', 'r2', 15))).toBe(true);
    // Its answer's stream failed before the rest showed: the reply still waits as shown, so news.
    expect(isNewToChat(answered, change('message', 'r2'))).toBe(true);
  });
});

describe('watchThread', () => {
  it("reports another page's message, regeneration and restore, once each and in order, and none of a turn's own events", async () => {
    const { threadId, runId: first } = await sendElsewhere(handlers, undefined, 'watch me');
    const read = await readThreadOf(handlers, threadId);
    const changes: ThreadChange[] = [];
    const watch = watchThread({ threadId, after: read.thread.lastSeq!, onChange: (change) => changes.push(change), ...page(() => handlers).options });
    try {
      const { runId: second, messageId } = await sendElsewhere(handlers, threadId, 'and me');
      expect((await post(handlers, '/api/chat', { threadId, clientMessageId: messageId, regenerate: true })).status).toBe(200);
      expect((await post(handlers, `/api/runs/${second}/restore`, {})).status).toBe(200);
      await until(() => changes.length >= 3);
      const lastSeq = (await readThreadOf(handlers, threadId)).thread.lastSeq!;
      await until(() => watch.seq === lastSeq);
      expect(changes.map((c) => [c.type, c.runId])).toEqual([
        ['message', second], ['turn-regenerated', expect.not.stringMatching(second)], ['turn-restored', second],
      ]);
      expect(changes.map((c) => c.seq)).toEqual([...changes.map((c) => c.seq)].sort((a, b) => a - b));
      expect(changes[0]!.seq).toBeGreaterThan(read.thread.lastSeq!);
      expect(changes[2]!.data).toMatchObject({ runId: second, replaces: changes[1]!.runId });
      expect(first).not.toBe(second);
    } finally {
      watch.close();
    }
  });

  it("reads on after a stream's budget ends, from the last event it read", async () => {
    const shortStreams = createHandlers({ rt: makeRuntime(engine!.db, { tokens }), authenticate: headerAuth, maxStreamMs: 150 });
    const { threadId } = await sendElsewhere(shortStreams, undefined, 'budget');
    const changes: ThreadChange[] = [];
    const watching = page(() => shortStreams);
    const watch = watchThread({
      threadId, after: (await readThreadOf(shortStreams, threadId)).thread.lastSeq!, onChange: (c) => changes.push(c), retryMs: 50, ...watching.options,
    });
    try {
      await until(() => watching.requests.length >= 3); // streams that ended with nothing new
      const { runId } = await sendElsewhere(shortStreams, threadId, 'after the budget');
      await until(() => changes.length === 1);
      expect(changes[0]).toMatchObject({ type: 'message', runId });
      const after = watching.requests.map((path) => Number(new URL(path, base).searchParams.get('after')));
      expect(after).toEqual([...after].sort((a, b) => a - b)); // never read back
    } finally {
      await shortStreams.segments.settle();
      watch.close();
    }
  });

  it('reads again after a failed request or a failed stream, from the last event it read', async () => {
    const { threadId } = await sendElsewhere(handlers, undefined, 'fail first');
    const owner = page(() => handlers);
    let calls = 0;
    const failing = (async (input: RequestInfo | URL, init?: RequestInit) => {
      calls += 1;
      if (calls === 1) throw new TypeError('network down');
      if (calls === 2) return new Response('busy', { status: 503 });
      return owner.options.fetch(input, init);
    }) as typeof globalThis.fetch;
    const changes: ThreadChange[] = [];
    const watch = watchThread({ threadId, after: 0, onChange: (c) => changes.push(c), retryMs: 20, ...owner.options, fetch: failing });
    try {
      await until(() => changes.length === 1);
      const { runId } = await sendElsewhere(handlers, threadId, 'after the failures');
      await until(() => changes.length === 2);
      expect(changes.map((c) => c.type)).toEqual(['message', 'message']);
      expect(changes[1]!.runId).toBe(runId);
      expect(calls).toBe(3); // one stream since, still open
    } finally {
      watch.close();
    }
  });

  it("ends on a refusal (another user's thread), and close() stops it", async () => {
    const { threadId } = await sendElsewhere(handlers, undefined, 'not yours');
    const ended: number[] = [];
    const stranger = page(() => handlers, 'gus');
    watchThread({ threadId, after: 0, onChange: () => expect.unreachable(), onEnd: (status) => ended.push(status), retryMs: 10, ...stranger.options });
    await until(() => ended.length === 1);
    expect(ended).toEqual([404]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(stranger.requests).toHaveLength(1);

    // A cursor past the thread's log (a database restored from a backup) ends it too: it read
    // on with backoff for ever before, or, before the route refused one, waited silent.
    const ahead = page(() => handlers);
    watchThread({ threadId, after: 9_999, onChange: () => expect.unreachable(), onEnd: (status) => ended.push(status), retryMs: 10, ...ahead.options });
    await until(() => ended.length === 2);
    expect(ended).toEqual([404, 409]);
    expect(ahead.requests).toHaveLength(1);

    const changes: ThreadChange[] = [];
    const owner = page(() => handlers);
    const watch = watchThread({ threadId, after: 0, onChange: (c) => changes.push(c), ...owner.options });
    await until(() => changes.length === 1); // the first message, read from the start
    watch.close();
    await sendElsewhere(handlers, threadId, 'after the close');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(changes).toHaveLength(1);
    expect(owner.requests).toHaveLength(1);
  });

  it("lets a useChat chat show another page's turn: read again on a change, resumed while under way", async () => {
    const slow = createHandlers({ rt: makeRuntime(engine!.db, { tokens: 40, delayMs: 20 }), authenticate: headerAuth });
    const { threadId } = await sendElsewhere(slow, undefined, 'two pages');
    const read = await readThreadOf(slow, threadId);
    const chat = new TestChat({ id: threadId, transport: transportTo(() => slow), messages: toUIMessages(read) });
    // The page's part: on a change, once the chat is ready, read the thread; show it when the
    // chat shows something else, and resume a turn under way.
    let refreshing = Promise.resolve();
    const refresh = (change: ThreadChange) => (refreshing = refreshing.then(async () => {
      await until(() => chat.status === 'ready');
      if (!isNewToChat(chat.messages, change)) return;
      const now = await readThreadOf(slow, threadId);
      if (!showsConversation(chat.messages, now)) chat.messages = toUIMessages(now);
      if (hasTurnUnderWay(now)) await chat.resumeStream();
    }));
    const watch = watchThread({ threadId, after: read.thread.lastSeq!, onChange: (change) => void refresh(change), ...page(() => slow).options });
    try {
      const other = new TestChat({ id: threadId, transport: transportTo(() => slow), messages: toUIMessages(read) });
      const sending = other.sendMessage({ text: 'from the other page' });
      await until(() => other.messages.length === 4);
      const runId = other.messages[3]!.id;
      // This chat shows the other page's reply while it streams, under its run's id.
      const streaming = (messages: UIMessage[]) => messages[3]?.id === runId && textOf(messages[3]).length > 0
        && textOf(messages[3]).length < scriptedReplyText(['two pages', 'from the other page'], 40).length;
      await until(() => streaming(chat.messages), 15_000);
      await sending;
      await refreshing;
      await until(() => textOf(chat.messages.at(-1)!) === scriptedReplyText(['two pages', 'from the other page'], 40), 15_000);
      expect(chat.messages.map((m) => m.id)).toEqual(other.messages.map((m) => m.id));
      expect(showsConversation(chat.messages, await readThreadOf(slow, threadId))).toBe(true);

      // Its own turn is no news: stopped, it stays as it stopped, not resumed (ADR-0090's text).
      const mine = chat.sendMessage({ text: 'stop me here' });
      await until(() => chat.messages.length === 6 && textOf(chat.messages[5]!).length > 0, 15_000);
      await chat.stop();
      await mine;
      const stopped = chat.messages[5]!.id;
      const stored = async () => (await readThreadOf(slow, threadId)).messages.find((m) => m.runId === stopped && m.role === 'assistant');
      await until(async () => (await stored()) !== undefined, 15_000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await refreshing;
      expect(chat.status).toBe('ready');
      expect(textOf(chat.messages[5]!)).toBe((await stored())!.text);
    } finally {
      watch.close();
      await slow.segments.settle();
    }
  });
});
