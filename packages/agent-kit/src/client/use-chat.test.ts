// agent-kit/client with the real turn engine and the scripted model, on both stores (ADR-0075,
// ADR-0076): useChat's transport keeps a chat in one thread, a chat reopened from its thread's
// read goes on in it, a reply whose reader went away mid-turn is resumed from its start to its
// end under the same id, hasTurnUnderWay says when to resume, stop() cancels the run (and a
// resume replaced by another does not), and the module imports nothing but the `ai` package.
import fs from 'node:fs';
import path from 'node:path';
import type { UIMessage, UIMessageChunk } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestChat, readThread as readThreadOf, transportTo, until } from '../../test/harness/chat-kit.js';
import { headerAuth, makeRequest } from '../../test/harness/http-harness.js';
import { freezingModel, gate, makeRuntime } from '../../test/harness/turn-kit.js';
import { closeRealEngine, openRealEngine, type RealEngine } from '../../test/harness/real-engine.js';
import { lastMessage, textOf } from '../../test/harness/ui-messages.js';
import { createHandlers, type Handlers } from '../http/handlers.js';
import { createScriptedModel, scriptedReplyText } from '../model/index.js';
import type { Db } from '../store/db.js';
import { hasTurnUnderWay, threadIdOf, toUIMessages } from './index.js';

const tokens = 8;
let db: Db;
let handlers: Handlers;
let engine: RealEngine | undefined;
beforeAll(async () => {
  engine = await openRealEngine(tokens);
  ({ db, handlers } = engine);
});
afterAll(() => closeRealEngine(engine));

const transport = transportTo(() => handlers);
const readThread = (threadId: string) => readThreadOf(handlers, threadId);

/** `messages` with a user message of `text`, then the reply the transport streams for it. */
async function send(messages: UIMessage[], id: string, text: string): Promise<UIMessage[]> {
  const sent: UIMessage[] = [...messages, { id, role: 'user', parts: [{ type: 'text', text }] }];
  const stream = await transport.sendMessages({ chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: undefined, messages: sent });
  return [...sent, await lastMessage(stream)];
}

describe('agent-kit/client', () => {
  it('reopens a thread in the order the chat had it: each reply after the message that started its turn', () => {
    const m = (id: string, runId: string, role: 'user' | 'assistant') => ({ id, runId, role, text: id, clientMessageId: id });
    const read = (messages: ReturnType<typeof m>[]) => toUIMessages({ thread: { id: 't' }, messages }).map((x) => x.id);
    // A message sent while turn 1 ran is written before turn 1's reply (it read [u1, u2, a1, a2]).
    expect(read([m('u1', 'r1', 'user'), m('u2', 'r2', 'user'), m('a1', 'r1', 'assistant'), m('a2', 'r2', 'assistant')]))
      .toEqual(['u1', 'r1', 'u2', 'r2']);
    // A message that answered the run's question stays after the reply it answered, as live.
    expect(read([m('u1', 'r1', 'user'), m('u2', 'r1', 'user'), m('a1', 'r1', 'assistant')])).toEqual(['u1', 'r1', 'u2']);
  });

  it("reopens a reply at its questions (ADR-0087): split after one a sent message answered, in one piece when that message is not in the read", () => {
    const user = (id: string, runId: string) => ({ id, runId, role: 'user', text: id, clientMessageId: `c-${id}` });
    const reply = (asked: unknown) => ({ id: 'a1', runId: 'r1', role: 'assistant', text: 'Hello. Thanks.', clientMessageId: null, content: { asked } });
    const q = (at: number, answeredBy?: string) => ({ id: 'q1', kind: 'question', question: 'Name?', at, ...(answeredBy ? { answeredBy } : {}) });
    const view = (messages: Parameters<typeof toUIMessages>[0]['messages']) => toUIMessages({ thread: { id: 't' }, messages })
      .map((m) => `${m.id}: ${m.parts.map((p) => (p.type === 'text' ? p.text : `[${(p as { data: { question?: string } }).data.question}]`)).join('')}`);
    expect(view([user('u1', 'r1'), user('u2', 'r1'), reply([q(7, 'u2')])]))
      .toEqual(['c-u1: u1', 'r1: Hello. [Name?]', 'c-u2: u2', 'r1:c-u2: Thanks.']);
    // The answering message left out of the read (an older one than it holds): the reply stays whole.
    expect(view([user('u1', 'r1'), reply([q(7, 'u9')])])).toEqual(['c-u1: u1', 'r1: Hello. [Name?]Thanks.']);
    // Asked past the end of the text, or at its end with nothing after the answer: no empty message.
    expect(view([user('u1', 'r1'), user('u2', 'r1'), reply([q(99, 'u2')])]))
      .toEqual(['c-u1: u1', 'r1: Hello. Thanks.[Name?]', 'c-u2: u2']);
    // What it cannot read is left out, and the reply shows as its text.
    expect(view([user('u1', 'r1'), reply([{ id: 1 }, 'q', { id: 'q1', kind: 'question', at: 'x' }])])).toEqual(['c-u1: u1', 'r1: Hello. Thanks.']);
    expect(view([user('u1', 'r1'), reply('not a list')])).toEqual(['c-u1: u1', 'r1: Hello. Thanks.']);
  });

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
    // The first turn's segment looks for a turn queued behind it once its stream ended: let it
    // finish, or it could take the next turn itself, with a model that does not hold.
    await handlers.segments.settle();
    const threadId = threadIdOf(first)!;
    // The next reply's model stops after a few words until the page has reloaded.
    const reloaded = gate();
    const paused = gate();
    const model = freezingModel(createScriptedModel({ tokens }), 5, reloaded.wait(), paused.open);
    const holding = createHandlers({ rt: makeRuntime(db, { model }), authenticate: headerAuth });
    const stream = await transportTo(() => holding).sendMessages({
      chatId: threadId, trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
      messages: [...first, { id: 'r2', role: 'user', parts: [{ type: 'text', text: 'reload me halfway' }] }],
    });
    const reader = stream.getReader();
    for (let chunk = await reader.read(); !chunk.done && chunk.value.type !== 'text-delta'; chunk = await reader.read());
    await paused.wait();
    // The page reloads: some of the reply shown, the rest still to come. (A page that goes away
    // drops its reader; it does not call stop(), which would cancel the run.)
    await reader.cancel();
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

  it('reopens a chat with a turn queued behind the one under way: each reply in its place, as it runs (ADR-0088)', async () => {
    const reloaded = gate();
    const paused = gate();
    const model = freezingModel(createScriptedModel({ tokens }), 5, reloaded.wait(), paused.open);
    const holding = createHandlers({ rt: makeRuntime(db, { model }), authenticate: headerAuth });
    const reading = transportTo(() => holding);
    const first = await reading.sendMessages({
      chatId: 'new', trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
      messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'the first turn' }] }],
    });
    const reader = first.getReader();
    let threadId: string | undefined;
    for (let chunk = await reader.read(); !chunk.done && chunk.value.type !== 'text-delta'; chunk = await reader.read()) {
      if (chunk.value.type === 'start') threadId = (chunk.value.messageMetadata as { threadId?: string }).threadId;
    }
    await paused.wait();
    await reader.cancel(); // the page reloads
    // Meanwhile a second tab sends the next message: it queues behind the turn under way.
    const secondTab = (text: string) => holding.handle(makeRequest('POST', '/api/chat', {
      user: 'fay', body: { threadId, message: text, clientMessageId: text },
    })).then((response) => response.body?.cancel());
    await secondTab('the second turn');
    const read = await readThread(threadId!);
    const [r1, r2] = read.runs.map((run) => run.id);
    expect(read.runs.map((run) => run.status)).toEqual(['running', 'queued']);
    const reopened = toUIMessages(read);
    expect(reopened.map((m) => [m.id, m.role, m.parts.length])).toEqual([
      ['m1', 'user', 1], [r1, 'assistant', 0], ['the second turn', 'user', 1], [r2, 'assistant', 0],
    ]);

    const chat = new TestChat({ id: threadId, messages: reopened, transport: reading });
    const resuming = chat.resumeStream();
    await until(() => chat.status === 'streaming');
    await secondTab('a third turn, sent once the page had reopened'); // not in this page's read
    reloaded.open();
    await resuming;
    await until(async () => (await readThread(threadId!)).runs.every((run) => run.status === 'completed'));
    await holding.segments.settle();
    const stored = (await readThread(threadId!)).messages.filter((m) => m.role === 'assistant').map((m) => m.text);
    expect(chat.messages.map((m) => [m.id, textOf(m)])).toEqual([
      ['m1', 'the first turn'], [r1, stored[0]], ['the second turn', 'the second turn'], [r2, stored[1]],
    ]);
    expect(stored[1]).toBe(scriptedReplyText(['the first turn', 'the second turn'], tokens));
  });

  describe("useChat's stop()", () => {
    // Words 30 ms apart: a reply of 60 takes about 2 s, so a stop lands mid-reply.
    const slowly = () => createHandlers({ rt: makeRuntime(db, { tokens: 60, delayMs: 30 }), authenticate: headerAuth });
    const ask = (id: string, text: string): UIMessage[] => [{ id, role: 'user', parts: [{ type: 'text', text }] }];
    const fullReply = (text: string) => scriptedReplyText([text], 60);
    /** Read `stream` through its first text; the reply's run id (its message id). */
    async function untilText(reader: ReadableStreamDefaultReader<UIMessageChunk>): Promise<string> {
      let runId: string | undefined;
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
        if (chunk.value.type === 'start') runId = chunk.value.messageId;
        if (chunk.value.type === 'text-delta') return runId!;
      }
      throw new Error('the stream ended before any text');
    }
    async function ended(served: Handlers, runId: string) {
      await served.segments.settle();
      const [run] = await db.query<{ status: string; thread_id: string }>('select status, thread_id from agent_kit_runs where id = $1', [runId]);
      const { messages } = await readThread(run!.thread_id);
      return { status: run!.status, text: messages.find((m) => m.runId === runId && m.role === 'assistant')?.text };
    }

    it('cancels the reply it is sending: the run ends aborted with the text it had', async () => {
      const slow = slowly();
      const stopping = new AbortController();
      const stream = await transportTo(() => slow).sendMessages({
        chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: stopping.signal, messages: ask('s1', 'stop me'),
      });
      const reader = stream.getReader();
      const runId = await untilText(reader);
      stopping.abort();
      await expect(reader.read()).rejects.toThrow(/abort/i); // the stream ends as a fetch's does on abort
      const { status, text } = await ended(slow, runId);
      expect(status).toBe('aborted');
      expect(text!.length).toBeGreaterThan(0);
      expect(fullReply('stop me').startsWith(text!), text).toBe(true);
      expect(text!.length).toBeLessThan(fullReply('stop me').length);
    });

    it('cancels a reply stopped before its response came: the message is stored once, the run aborted', async () => {
      const slow = slowly();
      const stopping = new AbortController();
      stopping.abort();
      const chatTransport = transportTo(() => slow);
      await expect(chatTransport.sendMessages({
        chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: stopping.signal, messages: ask('s2', 'stop me at once'),
      })).rejects.toThrow(/abort/i);
      // The request ended at the stop; the response, when it comes, names the run to cancel.
      const runsOf = (clientMessageId: string) => db.query<{ id: string; status: string }>(
        `select r.id, r.status from agent_kit_messages m join agent_kit_runs r on r.thread_id = m.thread_id
          where m.client_message_id = $1`, [clientMessageId]);
      await until(async () => (await runsOf('s2')).some((r) => r.status === 'aborted'));
      await slow.segments.settle();
      expect((await runsOf('s2')).map((r) => r.status)).toEqual(['aborted']);

      // The chat shows no reply to name the thread; its next message goes to the same thread all
      // the same, from the stopped response's header (it started a second thread).
      const next = await chatTransport.sendMessages({
        chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
        messages: [...ask('s2', 'stop me at once'), ...ask('s2-next', 'and then this')],
      });
      expect(threadIdOf([await lastMessage(next)])).toBe((await db.query<{ thread_id: string }>(
        'select thread_id from agent_kit_messages where client_message_id = $1', ['s2']))[0]!.thread_id);
      await slow.segments.settle();
    });

    it('cancels a resumed reply, but not one whose resume a second resume replaced (strict mode)', async () => {
      const slow = slowly();
      const stopsOf = transportTo(() => slow);
      // A reply whose page went away: the turn goes on.
      const sent = (await stopsOf.sendMessages({
        chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: undefined, messages: ask('s3', 'resume me twice'),
      })).getReader();
      const runId = await untilText(sent);
      await sent.cancel();
      const threadId = (await db.query<{ thread_id: string }>('select thread_id from agent_kit_runs where id = $1', [runId]))[0]!.thread_id;
      // The chat aborts its first resume as it starts a second one, in the same turn.
      const first = new AbortController();
      await stopsOf.reconnectToStream({ chatId: threadId, abortSignal: first.signal });
      first.abort();
      const second = await stopsOf.reconnectToStream({ chatId: threadId, abortSignal: new AbortController().signal });
      const resumed = await lastMessage(second!);
      expect(resumed.metadata).toMatchObject({ runId, status: 'completed' });
      expect(textOf(resumed)).toBe(fullReply('resume me twice'));

      // stop() while a resumed reply streams cancels it.
      const next = (await stopsOf.sendMessages({
        chatId: threadId, trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
        messages: [...ask('s3', 'resume me twice'), resumed, ...ask('s4', 'then stop me')],
      })).getReader();
      const nextRun = await untilText(next);
      await next.cancel();
      const stopping = new AbortController();
      const watching = (await stopsOf.reconnectToStream({ chatId: threadId, abortSignal: stopping.signal }))!.getReader();
      expect(await untilText(watching)).toBe(nextRun);
      stopping.abort();
      const { status, text } = await ended(slow, nextRun);
      expect(status).toBe('aborted');
      expect(text!.length).toBeLessThan(scriptedReplyText(['resume me twice', 'then stop me'], 60).length);
    });

    it('cancels a resume stopped before its response came, unless a second resume replaced it', async () => {
      const slow = slowly();
      const stopsOf = transportTo(() => slow);
      const goneAway = async (messages: UIMessage[]) => {
        const reader = (await stopsOf.sendMessages({
          chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: undefined, messages,
        })).getReader();
        const runId = await untilText(reader);
        await reader.cancel(); // the page went away: the turn goes on
        return runId;
      };
      const runId = await goneAway(ask('p1', 'resume me before a response'));
      const threadId = (await db.query<{ thread_id: string }>('select thread_id from agent_kit_runs where id = $1', [runId]))[0]!.thread_id;
      // Strict mode before any response: the first resume aborted, a second begun, in one turn.
      const first = new AbortController();
      const firstResume = stopsOf.reconnectToStream({ chatId: threadId, abortSignal: first.signal });
      first.abort();
      const secondResume = stopsOf.reconnectToStream({ chatId: threadId, abortSignal: new AbortController().signal });
      await expect(firstResume).rejects.toThrow(/abort/i);
      const resumed = await lastMessage((await secondResume)!);
      expect(resumed.metadata).toMatchObject({ runId, status: 'completed' });
      expect(textOf(resumed)).toBe(fullReply('resume me before a response'));

      // A resume stopped before its response: its response still names the run, which is cancelled.
      const nextRun = await goneAway([...ask('p1', 'resume me before a response'), resumed, ...ask('p2', 'now stop me early')]);
      const stopping = new AbortController();
      stopping.abort();
      await expect(stopsOf.reconnectToStream({ chatId: threadId, abortSignal: stopping.signal })).rejects.toThrow(/abort/i);
      const statusOf = async (id: string) => (await db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [id]))[0]!.status;
      await until(async () => (await statusOf(nextRun)) === 'aborted');
      const { text } = await ended(slow, nextRun);
      expect(text!.length).toBeLessThan(scriptedReplyText(['resume me before a response', 'now stop me early'], 60).length);
    });

    it("through the AI SDK's own Chat (what useChat drives): stop() cancels, a resume replacing another does not", async () => {
      const slow = slowly();
      const chat = new TestChat({ transport: transportTo(() => slow) });
      const sending = chat.sendMessage({ text: 'stop me in a chat' });
      const replying = (messages: UIMessage[], id?: string) => {
        const last = messages.at(-1);
        return last?.role === 'assistant' && (id === undefined || last.id === id) && textOf(last).length > 0;
      };
      await until(() => replying(chat.messages));
      await chat.stop();
      await sending;
      const stoppedRun = (chat.messages.at(-1)!.metadata as { runId: string }).runId;
      const shown = textOf(chat.messages.at(-1)!);
      await new Promise((resolve) => setTimeout(resolve, 300)); // the run streams on until the cancel lands
      // The run keeps the text the page showed, not the words it streamed while the cancel travelled (ADR-0090).
      expect(await ended(slow, stoppedRun)).toEqual({ status: 'aborted', text: shown });
      expect(shown.length).toBeGreaterThan(0);

      // A reopened chat resumes its reply under way; the app resumes again while the first still
      // streams (as React's strict mode does on mount): the first is replaced, the turn goes on.
      const threadId = threadIdOf(chat.messages)!;
      const started = await transportTo(() => slow).sendMessages({
        chatId: threadId, trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
        messages: [...chat.messages, { id: 'c2', role: 'user', parts: [{ type: 'text', text: 'go on' }] }],
      });
      const runId = await untilText(started.getReader()); // this reader is dropped: the page went away
      const reopened = new TestChat({ id: threadId, transport: transportTo(() => slow), messages: toUIMessages(await readThread(threadId)) });
      const firstResume = reopened.resumeStream();
      await until(() => replying(reopened.messages, runId));
      await Promise.all([firstResume, reopened.resumeStream()]);
      expect(reopened.messages.at(-1)!.metadata).toMatchObject({ runId, status: 'completed' });
      expect(await ended(slow, runId)).toMatchObject({ status: 'completed' });
    });

    it('with cancelOnStop: false, stops reading only: the turn goes on to its end', async () => {
      const slow = slowly();
      const readingOnly = transportTo(() => slow, { cancelOnStop: false });
      const stopping = new AbortController();
      const reader = (await readingOnly.sendMessages({
        chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: stopping.signal, messages: ask('s5', 'do not stop me'),
      })).getReader();
      const runId = await untilText(reader);
      stopping.abort();
      await reader.cancel(); // (this test's fetch, not a browser's, leaves the body to its reader)
      expect(await ended(slow, runId)).toEqual({ status: 'completed', text: fullReply('do not stop me') });
    });
  });

  it('imports nothing but the ai package, the SSE parser it uses itself and modules that import nothing', () => {
    const dir = path.dirname(new URL(import.meta.url).pathname);
    const specifiersOf = (file: string) =>
      [...fs.readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)\b[^;]*?from\s+'([^']+)'/gm)].map((m) => m[1]!);
    const sources = fs.readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));
    expect(sources.length).toBeGreaterThan(0);
    for (const file of sources) {
      const outside = specifiersOf(path.join(dir, file)).filter((s) => s !== 'ai' && s !== 'eventsource-parser/stream' && !s.startsWith('./'));
      // A module of the server side may be shared only when it imports nothing itself (approval.ts).
      const leaves = outside.filter((s) => s.startsWith('../') && specifiersOf(path.join(dir, s.replace(/\.js$/, '.ts'))).length === 0);
      expect(outside.filter((s) => !leaves.includes(s)), file).toEqual([]);
    }
  });
});
