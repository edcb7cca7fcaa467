// The handlers with the real turn engine (imported lazily, as an app gets it) and the scripted
// model, on both stores: a chat turn streams to completion, a question parks the stream and the
// answer route resumes the run in the background, and the AI SDK reads both the live turn and
// the replay of a run that asked a question as one assistant message. And agent-kit/client
// (ADR-0075): useChat's transport keeps a chat in one thread, a chat reopened from its thread's
// read goes on in it, a reply whose reader went away mid-turn is resumed from its start to its
// end under the same id, and the module imports nothing but the `ai` package.
import fs from 'node:fs';
import path from 'node:path';
import { DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headerAuth, makeRequest, payload, readSse } from '../../test/harness/http-harness.js';
import { freezingModel, gate, makeRuntime } from '../../test/harness/turn-kit.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { agentKitTransport, hasTurnUnderWay, threadIdOf, toUIMessages, type ThreadRead } from '../client/index.js';
import { createScriptedModel, scriptedReasoningText, scriptedReplyText } from '../model/index.js';
import type { Db } from '../store/db.js';
import { createHandlers, type Handlers } from './handlers.js';

const tokens = 8;
let db: Db;
let handlers: Handlers;
beforeAll(async () => {
  db = await openTestDb();
  handlers = createHandlers({ rt: makeRuntime(db, { tokens }), authenticate: headerAuth });
});
afterAll(async () => {
  await handlers.segments.settle();
  await db.close();
});

function textOf(message: UIMessage): string {
  return message.parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
}

async function lastMessage(stream: ReadableStream<UIMessageChunk>, start?: UIMessage): Promise<UIMessage> {
  let last: UIMessage | undefined = start;
  for await (const message of readUIMessageStream<UIMessage>({ message: start, stream, terminateOnError: true })) last = message;
  return last!;
}

function streamOf(chunks: readonly UIMessageChunk[]): ReadableStream<UIMessageChunk> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
}

/** The UI message chunks of an ai-sdk SSE read, each with the id (seq) of the event it ends, if any. */
function chunksOf(events: readonly { id?: string; data: string }[]): { chunk: UIMessageChunk; id?: number }[] {
  return events.filter((e) => e.data !== '[DONE]')
    .map((e) => ({ chunk: JSON.parse(e.data) as UIMessageChunk, id: e.id === undefined ? undefined : Number(e.id) }));
}

/** What a client shows of a message: its text, its tool calls' ids, states and outputs, its status. */
function shown(message: UIMessage | undefined) {
  if (!message) return undefined;
  const tools = message.parts.filter((p) => p.type.startsWith('tool-'))
    .map((p) => { const { toolCallId, state, output } = p as { toolCallId: string; state: string; output?: unknown }; return { toolCallId, state, output }; });
  const reasoning = message.parts.flatMap((p) => (p.type === 'reasoning' ? [p.text] : []));
  return { id: message.id, text: textOf(message), reasoning, tools, metadata: message.metadata };
}

describe('with the real turn engine', () => {
  it('the AI SDK transport streams a scripted turn to its final text', async () => {
    const transport = new DefaultChatTransport<UIMessage>({
      api: 'http://agent-kit.test/api/chat?format=ai-sdk',
      headers: { 'x-user': 'fay' },
      fetch: (input, init) => handlers.handle(new Request(input as string, init)),
      prepareSendMessagesRequest: ({ messages }) => ({ body: { message: textOf(messages.at(-1)!) } }),
    });
    const stream = await transport.sendMessages({
      chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
      messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hello engine' }] }],
    });
    const message = await lastMessage(stream);
    expect(textOf(message)).toBe(scriptedReplyText(['hello engine'], tokens));
    expect(message.metadata).toMatchObject({ status: 'completed', partial: false });
  });

  it('what the model thinks reaches the AI SDK as reasoning parts, one a step, apart from the text (ADR-0070)', async () => {
    const text = 'look first #think #effect';
    const response = await handlers.handle(makeRequest('POST', '/api/chat?format=ai-sdk', { user: 'fay', body: { message: text } }));
    const live = shown(await lastMessage(streamOf(chunksOf((await readSse(response)).events).map((c) => c.chunk))));
    expect(live).toMatchObject({
      text: scriptedReplyText([text], tokens),
      reasoning: [scriptedReasoningText([text], 0, tokens), scriptedReasoningText([text], 1, tokens)],
      tools: [expect.objectContaining({ state: 'output-available' })],
      metadata: { status: 'completed' },
    });
    const threadId = response.headers.get('x-agent-kit-thread-id')!;
    const replay = await handlers.handle(makeRequest('GET', `/api/threads/${threadId}/events?format=ai-sdk`, { user: 'fay' }));
    expect(shown(await lastMessage(streamOf(chunksOf((await readSse(replay)).events).map((c) => c.chunk))))).toEqual(live);
  });

  it('a question ends the chat stream; the answer route resumes the run; the replay is one message', async () => {
    const response = await handlers.handle(makeRequest('POST', '/api/chat', { user: 'fay', body: { message: 'help #ask' } }));
    const threadId = response.headers.get('x-agent-kit-thread-id')!;
    const runId = response.headers.get('x-agent-kit-run-id')!;
    const first = await readSse(response);
    expect(first.ended).toBe(true);
    expect(payload(first.events.at(-1)!)).toMatchObject({ type: 'run-parked', data: { status: 'waiting_input' } });
    const asked = first.events.map(payload).find((e) => e.type === 'input-requested')!;
    expect(asked.data).toMatchObject({ kind: 'question' });

    const answer = await handlers.handle(makeRequest('POST', `/api/runs/${runId}/input`, {
      user: 'fay', body: { questionId: String(asked.data.id), answer: 'blue' },
    }));
    expect(await answer.json()).toEqual({ runId, status: 'queued' });
    await handlers.segments.settle();
    const finalText = scriptedReplyText(['help #ask'], tokens);
    const thread = await (await handlers.handle(makeRequest('GET', `/api/threads/${threadId}`, { user: 'fay' }))).json();
    expect(thread.runs).toEqual([expect.objectContaining({ id: runId, status: 'completed' })]);
    expect(thread.messages.map((m: { role: string; text: string }) => [m.role, m.text])).toEqual([
      ['user', 'help #ask'], ['assistant', finalText],
    ]);

    const replay = await handlers.handle(makeRequest('GET', `/api/threads/${threadId}/events?format=ai-sdk`, { user: 'fay' }));
    const read = await readSse(replay);
    expect(read.ended).toBe(true);
    const chunks = read.events.filter((e) => e.data !== '[DONE]').map((e) => JSON.parse(e.data) as UIMessageChunk);
    const message = await lastMessage(new ReadableStream({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(chunk);
        controller.close();
      },
    }));
    expect(textOf(message)).toBe(finalText);
    const tool = message.parts.find((p) => p.type === 'tool-ask_user') as { state: string; output: unknown } | undefined;
    expect(tool).toMatchObject({ state: 'output-available', output: { answer: 'blue' } });
    expect(message.parts.some((p) => p.type === 'data-agent-kit-input')).toBe(true);
    expect(message.metadata).toMatchObject({ status: 'completed' });
  });

  it('an ai-sdk stream resumed with Last-Event-ID goes on where it stopped, for every cut', async () => {
    const response = await handlers.handle(makeRequest('POST', '/api/chat', { user: 'fay', body: { message: 'cut me #ask #think' } }));
    const threadId = response.headers.get('x-agent-kit-thread-id')!;
    const runId = response.headers.get('x-agent-kit-run-id')!;
    const asked = (await readSse(response)).events.map(payload).find((e) => e.type === 'input-requested')!;
    await handlers.handle(makeRequest('POST', `/api/runs/${runId}/input`, {
      user: 'fay', body: { questionId: String(asked.data.id), answer: 'green' },
    }));
    await handlers.segments.settle();
    const replay = (path: string, lastEventId?: number) => handlers.handle(makeRequest('GET', path, {
      user: 'fay', headers: lastEventId === undefined ? {} : { 'last-event-id': String(lastEventId) },
    }));
    const path = `/api/threads/${threadId}/events?format=ai-sdk&runId=${runId}`;
    const full = chunksOf((await readSse(await replay(path))).events);
    const whole = shown(await lastMessage(streamOf(full.map((c) => c.chunk))));
    expect(whole).toMatchObject({
      text: scriptedReplyText(['cut me #ask #think'], tokens), metadata: { status: 'completed' },
      reasoning: [0, 1].map((stepNo) => scriptedReasoningText(['cut me #ask #think'], stepNo, tokens)),
    });

    const cuts = full.flatMap((c, i) => (c.id === undefined ? [] : [i]));
    expect(cuts.length).toBeGreaterThan(5);
    for (const cut of cuts) {
      // The client had every chunk through the one carrying this id, then lost the connection.
      const before = full.slice(0, cut + 1).map((c) => c.chunk);
      const partial = await lastMessage(streamOf(before));
      const resumed = await readSse(await replay(path, full[cut]!.id));
      expect(resumed.ended).toBe(true);
      const after = chunksOf(resumed.events).map((c) => c.chunk);
      expect(after.filter((c) => c.type === 'start').length, `cut after seq ${full[cut]!.id}`).toBeLessThanOrEqual(1);
      expect(shown(await lastMessage(streamOf(after), partial)), `cut after seq ${full[cut]!.id}`).toEqual(whole);
    }
    // A client that has the whole message gets only the stream's end.
    const last = await readSse(await replay(path, full[cuts.at(-1)!]!.id));
    expect(last.events.map((e) => e.data)).toEqual(['[DONE]']);
  });
});

const transportTo = (served: () => Handlers) => agentKitTransport({
  origin: 'http://agent-kit.test',
  headers: { 'x-user': 'fay' },
  fetch: (input, init) => served().handle(new Request(input as string, init)),
});
const transport = transportTo(() => handlers);

/** `messages` with a user message of `text`, then the reply the transport streams for it. */
async function send(messages: UIMessage[], id: string, text: string): Promise<UIMessage[]> {
  const sent: UIMessage[] = [...messages, { id, role: 'user', parts: [{ type: 'text', text }] }];
  const stream = await transport.sendMessages({ chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: undefined, messages: sent });
  return [...sent, await lastMessage(stream)];
}

async function readThread(threadId: string): Promise<Omit<ThreadRead, 'runs'> & { runs: Array<{ id: string; status: string; turnNo: number }> }> {
  return (await handlers.handle(makeRequest('GET', `/api/threads/${threadId}`, { user: 'fay' }))).json();
}

describe('agent-kit/client', () => {
  it('keeps a chat in one thread, and a chat reopened from its read goes on in it', async () => {
    const chat = await send(await send([], 'u1', 'first of three'), 'u2', 'second of three');
    const threadId = threadIdOf(chat)!;
    expect(threadId).toMatch(/^[0-9a-f-]{36}$/);
    expect(chat[3]!.metadata).toMatchObject({ threadId, runId: chat[3]!.id, status: 'completed' });
    expect(textOf(chat[3]!)).toBe(scriptedReplyText(['first of three', 'second of three'], tokens)); // the model saw turn 1

    const read = await readThread(threadId);
    expect(hasTurnUnderWay(read)).toBe(false); // every reply is in the read: nothing to resume
    const reopened = toUIMessages(read);
    // Under the ids the chat knew: the user's as sent, each reply's its run's.
    expect(reopened.map((m) => [m.id, m.role, textOf(m)])).toEqual(chat.map((m) => [m.id, m.role, textOf(m)]));
    expect(reopened.map((m) => m.id).slice(0, 2)).toEqual(['u1', chat[1]!.id]);
    const after = await send(reopened, 'u3', 'third of three');
    expect(threadIdOf(after)).toBe(threadId);
    const { runs } = await readThread(threadId);
    expect(runs.map((r) => [r.id, r.turnNo, r.status])).toEqual([
      [chat[1]!.id, 1, 'completed'], [chat[3]!.id, 2, 'completed'], [after[5]!.id, 3, 'completed'],
    ]);
  });

  it('resumes a reply whose reader left mid-turn, from its start to its end, under the same id', async () => {
    const first = await send([], 'r1', 'start a thread');
    const threadId = threadIdOf(first)!;
    // The next reply's model stops after a few words until the page has reloaded.
    const reloaded = gate();
    const paused = gate();
    const model = freezingModel(createScriptedModel({ tokens }), 5, reloaded.wait(), paused.open);
    const holding = createHandlers({ rt: makeRuntime(db, { model }), authenticate: headerAuth });
    const reading = new AbortController();
    const stream = await transportTo(() => holding).sendMessages({
      chatId: threadId, trigger: 'submit-message', messageId: undefined, abortSignal: reading.signal,
      messages: [...first, { id: 'r2', role: 'user', parts: [{ type: 'text', text: 'reload me halfway' }] }],
    });
    const reader = stream.getReader();
    for (let chunk = await reader.read(); !chunk.done && chunk.value.type !== 'text-delta'; chunk = await reader.read());
    await paused.wait();
    reading.abort(); // the page reloads: some of the reply shown, the rest still to come
    const midTurn = await readThread(threadId);
    const underWay = midTurn.runs.at(-1)!;
    expect(underWay.status).toBe('running');
    expect(hasTurnUnderWay(midTurn)).toBe(true);

    const resuming = transport.reconnectToStream({ chatId: threadId });
    reloaded.open();
    const resumed = await lastMessage((await resuming)!);
    expect(resumed.id).toBe(underWay.id);
    expect(textOf(resumed)).toBe(scriptedReplyText(['start a thread', 'reload me halfway'], tokens));
    expect(resumed.metadata).toMatchObject({ threadId, runId: underWay.id, status: 'completed' });
    await holding.segments.settle();
    expect(hasTurnUnderWay(await readThread(threadId))).toBe(false);
    expect(hasTurnUnderWay({ thread: { id: threadId }, messages: [] })).toBe(true); // no runs to go by: resume
  });

  it('refuses to send a chat whose last message is not the user\'s', async () => {
    await expect(transport.sendMessages({
      chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
      messages: [{ id: 'a', role: 'assistant', parts: [{ type: 'text', text: 'hi' }] }],
    })).rejects.toThrow(/last message as the user's next one/);
  });

  it('imports nothing but the ai package', () => {
    const dir = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'client');
    const sources = fs.readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));
    expect(sources.length).toBeGreaterThan(0);
    for (const file of sources) {
      const specifiers = [...fs.readFileSync(path.join(dir, file), 'utf8').matchAll(/^\s*(?:import|export)\b[^;]*?from\s+'([^']+)'/gm)].map((m) => m[1]);
      expect(specifiers.filter((s) => s !== 'ai' && !s!.startsWith('./')), file).toEqual([]);
    }
  });
});
