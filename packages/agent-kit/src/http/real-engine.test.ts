// The handlers with the real turn engine (imported lazily, as an app gets it) and the scripted
// model, on both stores: a chat turn streams to completion, a question parks the stream and the
// answer route resumes the run in the background, and the AI SDK reads both the live turn and
// the replay of a run that asked a question as one assistant message (agent-kit/client's side:
// src/client/use-chat.test.ts).
import { DefaultChatTransport, type UIMessage, type UIMessageChunk } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headerAuth, makeRequest, payload, readSse } from '../../test/harness/http-harness.js';
import { closeRealEngine, openRealEngine, type RealEngine } from '../../test/harness/real-engine.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { lastMessage, textOf } from '../../test/harness/ui-messages.js';
import { scriptedReasoningText, scriptedReplyText } from '../model/index.js';
import { createHandlers, type Handlers } from './handlers.js';

const tokens = 8;
let handlers: Handlers;
let engine: RealEngine | undefined;
beforeAll(async () => {
  engine = await openRealEngine(tokens);
  ({ handlers } = engine);
});
afterAll(() => closeRealEngine(engine));

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
    const sent = { message: 'help #ask', clientMessageId: 'ask-1' };
    const response = await handlers.handle(makeRequest('POST', '/api/chat', { user: 'fay', body: sent }));
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

    // The message sent again (a lost response, useChat's regenerate()): the same turn, past the
    // question it asked then, to its end; not stopped at the old question.
    for (const format of ['ai-sdk', 'sse']) {
      const again = await handlers.handle(makeRequest('POST', `/api/chat?format=${format}`, { user: 'fay', body: { ...sent, threadId } }));
      expect(again.headers.get('x-agent-kit-run-id')).toBe(runId);
      const events = (await readSse(again)).events;
      if (format === 'sse') {
        expect(payload(events.at(-1)!)).toMatchObject({ type: 'run-closed', data: { status: 'completed' } });
        continue;
      }
      const resent = await lastMessage(streamOf(chunksOf(events).map((c) => c.chunk)));
      expect(textOf(resent)).toBe(finalText);
      expect(resent.metadata).toMatchObject({ status: 'completed' });
    }
  });

  it('an answer must fit its question: an approval takes approved, a question an answer, a running run only what it asked', async () => {
    const post = (runId: string, body: object) =>
      handlers.handle(makeRequest('POST', `/api/runs/${runId}/input`, { user: 'fay', body }));
    const park = async (message: string) => {
      const response = await handlers.handle(makeRequest('POST', '/api/chat', { user: 'fay', body: { message } }));
      const asked = (await readSse(response)).events.map(payload).find((e) => e.type === 'input-requested')!;
      return { runId: response.headers.get('x-agent-kit-run-id')!, questionId: String(asked.data.id) };
    };
    const inputsOf = async (runId: string) =>
      (await engine!.db.query<{ n: number }>('select count(*)::int as n from agent_kit_inputs where run_id = $1', [runId]))[0]!.n;

    const approval = await park('pay them #approve');
    const wordy = await post(approval.runId, { questionId: approval.questionId, answer: 'yes' });
    expect(wordy.status).toBe(400); // (was stored, and read as a no)
    expect((await wordy.json()).error.message).toMatch(/approval.*approved/);
    const question = await park('which one #ask');
    const yesNo = await post(question.runId, { questionId: question.questionId, approved: true });
    expect(yesNo.status).toBe(400); // (was stored, and the model read the JSON with the user's id)
    expect((await yesNo.json()).error.message).toMatch(/question.*answer/);
    expect([await inputsOf(approval.runId), await inputsOf(question.runId)]).toEqual([0, 0]);
    expect((await post(approval.runId, { questionId: approval.questionId, approved: true })).status).toBe(200);
    expect((await post(question.runId, { questionId: question.questionId, answer: 'the blue one' })).status).toBe(200);
    await handlers.segments.settle();

    // A run under way: a question it never asked, or a tool call that asks nothing, is a 409.
    const slow = createHandlers({ rt: makeRuntime(engine!.db, { tokens: 60, delayMs: 30 }), authenticate: headerAuth });
    const running = await slow.handle(makeRequest('POST', '/api/chat', { user: 'fay', body: { message: 'note it #effect' } }));
    const effect = (await readSse(running, { until: (e) => payload(e).type === 'tool-result' })).events.map(payload)
      .find((e) => e.type === 'tool-result')!;
    const runId = running.headers.get('x-agent-kit-run-id')!;
    for (const questionId of ['never-asked', String(effect.data.toolCallId)]) {
      const refused = await slow.handle(makeRequest('POST', `/api/runs/${runId}/input`, { user: 'fay', body: { questionId, answer: 'x' } }));
      expect(refused.status, questionId).toBe(409);
    }
    expect(await inputsOf(runId)).toBe(0);
    await slow.segments.settle();
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
