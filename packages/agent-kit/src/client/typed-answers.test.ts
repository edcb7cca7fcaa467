// A question or an approval answered by typing a message instead (ADR-0087), through the AI SDK's
// own chat and agentKitTransport(), with the real turn engine on both stores: the rest of the
// reply shows after the typed message, in a message of its own, and a chat reopened from the
// thread's read shows the same messages under the same ids, each question where it was asked.
import type { UIMessage, UIMessageChunk } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestChat, readThread as readThreadOf, transportTo, until } from '../../test/harness/chat-kit.js';
import { base, headerAuth } from '../../test/harness/http-harness.js';
import { stepsModel } from '../../test/harness/steps-model.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { effectsFile, makeRuntime } from '../../test/harness/turn-kit.js';
import { textOf } from '../../test/harness/ui-messages.js';
import { createHandlers, type Handlers } from '../http/handlers.js';
import type { Db } from '../store/db.js';
import { goesOnAfter } from './answers.js';
import { isNewToChat, threadIdOf, toUIMessages, watchThread, type ThreadChange } from './index.js';

const transfer = { amount: 5, to: 'Ann' };
let db: Db;
let handlers: Handlers;
let effects: ReturnType<typeof effectsFile>;
beforeAll(async () => {
  db = await openTestDb();
  effects = effectsFile();
  // A question, then an approval, each after some text; then the end of the turn. (A step is
  // chosen by the tool results in the prompt; each test's thread has one turn, so it starts at 0.)
  const model = stepsModel([
    { text: 'Let me ask. ', calls: [{ id: 'q1', name: 'ask_user', input: { question: 'Which colour?' } }] },
    { text: 'Blue it is. ', calls: [{ id: 't1', name: 'transfer_funds', input: transfer }] },
    { text: 'Paid.' },
  ]);
  handlers = createHandlers({ rt: makeRuntime(db, { model }), authenticate: headerAuth });
});
afterAll(async () => {
  await handlers?.segments.settle();
  effects?.restore();
  await db?.close();
});

const transport = transportTo(() => handlers);
/** What the chat shows: each message's role, id, text and the questions it shows. */
const shown = (messages: readonly UIMessage[]) => messages.map((m) => ({
  role: m.role, id: m.id, text: textOf(m),
  asks: m.parts.filter((p) => p.type === 'data-agent-kit-input').map((p) => (p as { id?: string }).id),
}));
/** Until the chat's last message is a reply that asked or ended. */
const answered = (chat: TestChat) => until(() => chat.status === 'ready' && chat.messages.at(-1)!.role === 'assistant');

describe('a question answered by typing a message', () => {
  it('shows the rest of the reply after the message, live and reopened, under the same ids', async () => {
    const chat = new TestChat({ transport });
    await chat.sendMessage({ text: 'Paint it, then pay Ann' });
    await answered(chat);
    await chat.sendMessage({ text: 'blue' }); // the question's answer, typed
    await answered(chat);
    const before = effects.lines().length;
    await chat.sendMessage({ text: 'yes' }); // the approval, typed
    await answered(chat);

    const runId = chat.messages[1]!.id;
    const [, , blue, , yes] = chat.messages.map((m) => m.id);
    const live = shown(chat.messages);
    expect(live).toEqual([
      { role: 'user', id: chat.messages[0]!.id, text: 'Paint it, then pay Ann', asks: [] },
      { role: 'assistant', id: runId, text: 'Let me ask. ', asks: ['q1'] },
      { role: 'user', id: blue, text: 'blue', asks: [] },
      { role: 'assistant', id: `${runId}:${blue}`, text: 'Blue it is. ', asks: ['t1'] },
      { role: 'user', id: yes, text: 'yes', asks: [] },
      { role: 'assistant', id: `${runId}:${yes}`, text: 'Paid.', asks: [] },
    ]);
    expect(effects.lines().length - before).toBe(1); // the typed yes approved it: the transfer ran once

    const read = await readThreadOf(handlers, threadIdOf(chat.messages)!);
    expect(read.messages.filter((m) => m.role === 'assistant').map((m) => m.text)).toEqual(['Let me ask. Blue it is. Paid.']);
    const reopened = toUIMessages(read);
    expect(shown(reopened)).toEqual(live);
    // Each question as the live chat had it (without the seq that was for answering it), with its answer.
    const asks = reopened.flatMap((m) => m.parts.filter((p) => p.type === 'data-agent-kit-input').map((p) => (p as { data: unknown }).data));
    expect(asks).toEqual([
      { id: 'q1', kind: 'question', toolName: 'ask_user', question: 'Which colour?', answer: 'blue', runId },
      { id: 't1', kind: 'approval', toolName: 'transfer_funds', input: transfer, approved: true, runId },
    ]);

    // The reopened chat goes on in the thread: a new turn, a reply of its own.
    const next = new TestChat({ id: read.thread.id, messages: reopened, transport });
    await next.sendMessage({ text: 'Thanks' });
    await answered(next);
    const runs = (await readThreadOf(handlers, read.thread.id)).runs;
    expect(runs).toHaveLength(2);
    expect(next.messages.at(-1)!.id).toBe(runs.find((r) => r.id !== runId)!.id);
    expect(shown(next.messages.slice(0, 6))).toEqual(live);
  });

  it('reopened while the turn goes on after the typed answer, shows the same messages, the rest streamed after the answer', async () => {
    const chat = new TestChat({ transport });
    await chat.sendMessage({ text: 'Paint it, then pay Cy' });
    await answered(chat);
    await chat.sendMessage({ text: 'green' }); // typed: the turn goes on, and now waits for the approval
    await answered(chat);
    const live = shown(chat.messages);
    const runId = chat.messages[1]!.id;
    const green = chat.messages[2]!.id;
    expect(live.map((m) => [m.role, m.id, m.text])).toEqual([
      ['user', chat.messages[0]!.id, 'Paint it, then pay Cy'], ['assistant', runId, 'Let me ask. '],
      ['user', green, 'green'], ['assistant', `${runId}:${green}`, 'Blue it is. '],
    ]);

    // A reload (or another tab) now: the turn is under way, its reply not in the read.
    const read = await readThreadOf(handlers, threadIdOf(chat.messages)!);
    expect(read.runs.map((r) => r.status)).toEqual(['waiting_input']);
    const reopened = new TestChat({ id: read.thread.id, messages: toUIMessages(read), transport });
    // (was: the answer, then the whole reply after it, question and all)
    expect(shown(reopened.messages)).toEqual([...live.slice(0, 3), { ...live[3], text: '', asks: [] }]);
    await reopened.resumeStream();
    await until(() => reopened.status === 'ready' && textOf(reopened.messages.at(-1)!) !== '');
    expect(shown(reopened.messages)).toEqual(live);

    // It goes on from there as the live chat would: the typed yes approves, and the turn ends.
    await reopened.sendMessage({ text: 'yes' });
    await answered(reopened);
    expect(shown(reopened.messages).map((m) => m.text)).toEqual(['Paint it, then pay Cy', 'Let me ask. ', 'green', 'Blue it is. ', 'yes', 'Paid.']);
  });

  it('regenerated from its first piece (the run id), the whole reply goes, answers and all, and the chat is the read', async () => {
    const chat = new TestChat({ transport });
    await chat.sendMessage({ text: 'Paint it, then pay Bo' });
    await answered(chat);
    for (const text of ['red', 'yes']) {
      await chat.sendMessage({ text });
      await answered(chat);
    }
    const runId = chat.messages[1]!.id;
    expect(chat.messages).toHaveLength(6);
    await chat.regenerate({ messageId: runId }); // (regenerate() would name the last answer: the new reply would show after it)
    await answered(chat);
    expect(chat.messages.map((m) => [m.role, textOf(m)])).toEqual([['user', 'Paint it, then pay Bo'], ['assistant', 'Let me ask. ']]);
    expect(chat.messages[1]!.id).not.toBe(runId);
    const read = await readThreadOf(handlers, threadIdOf(chat.messages)!);
    expect(read.runs.map((r) => [r.id, r.status])).toEqual([[chat.messages[1]!.id, 'waiting_input']]);
    // (A reply waiting for its answer reads as an empty message that a resume streams.)
    expect(toUIMessages(read).map((m) => [m.role, m.id])).toEqual(chat.messages.map((m) => [m.role, m.id]));
  });

  it('answered the AI SDK\'s way instead, the reply stays one message, and reopens as one with its questions', async () => {
    const chat = new TestChat({ transport });
    await chat.sendMessage({ text: 'Paint it and pay, by the book' });
    await answered(chat);
    await chat.addToolOutput({ tool: 'ask_user', toolCallId: 'q1', output: { answer: 'green' } });
    await chat.sendMessage();
    await answered(chat);
    await until(() => chat.messages.at(-1)!.parts.some((p) => (p as { toolCallId?: string }).toolCallId === 't1'));
    const approval = chat.messages.at(-1)!.parts.find((p) => (p as { toolCallId?: string }).toolCallId === 't1') as { approval: { id: string } };
    await chat.addToolApprovalResponse({ id: approval.approval.id, approved: false });
    await chat.sendMessage();
    await until(() => chat.status === 'ready' && textOf(chat.messages.at(-1)!).endsWith('Paid.'));
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);

    const reopened = toUIMessages(await readThreadOf(handlers, threadIdOf(chat.messages)!));
    expect(shown(reopened)).toEqual([
      { role: 'user', id: chat.messages[0]!.id, text: 'Paint it and pay, by the book', asks: [] },
      { role: 'assistant', id: chat.messages[1]!.id, text: 'Let me ask. Blue it is. Paid.', asks: ['q1', 't1'] },
    ]);
    // The text between the questions, in its place.
    expect(reopened[1]!.parts.map((p) => (p.type === 'text' ? p.text : p.type))).toEqual([
      'Let me ask. ', 'data-agent-kit-input', 'Blue it is. ', 'data-agent-kit-input', 'Paid.',
    ]);
    const data = reopened[1]!.parts.filter((p) => p.type === 'data-agent-kit-input').map((p) => (p as { data: object }).data);
    expect(data).toMatchObject([{ answer: 'green' }, { approved: false }]);
  });

  it("is no news to the chat that typed it, and news to another chat showing the question (ADR-0097)", async () => {
    const chat = new TestChat({ transport });
    await chat.sendMessage({ text: 'Paint it, then pay Cy' });
    await answered(chat);
    const threadId = threadIdOf(chat.messages)!;
    // Another page opens the thread: the question waiting, its reply streams in as far as it goes (resume).
    const other = new TestChat({ id: threadId, messages: toUIMessages(await readThreadOf(handlers, threadId)), transport });
    await other.resumeStream();
    await answered(other);
    const changes: ThreadChange[] = [];
    const watch = watchThread({
      threadId, after: (await readThreadOf(handlers, threadId)).thread.lastSeq!, onChange: (change) => changes.push(change),
      origin: base, headers: { 'x-user': 'fay' }, fetch: (input, init) => handlers.handle(new Request(input as string, init)),
    });
    try {
      await chat.sendMessage({ text: 'blue' }); // the question's answer, typed here
      await answered(chat);
      await until(() => changes.some((change) => change.type === 'message'));
      const typed = changes.filter((change) => change.type === 'message');
      expect(typed.map((change) => [change.runId, change.data.text])).toEqual([[chat.messages[1]!.id, 'blue']]);
      expect(isNewToChat(chat.messages, typed[0]!)).toBe(false); // it shows the rest of the reply, after the answer
      expect(isNewToChat(other.messages, typed[0]!)).toBe(true); // it shows the question still waiting
    } finally {
      watch.close();
    }
  });
});

describe('the rest of a reply after a typed answer, read on after a cut', () => {
  const ask: UIMessage = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'paint it' }] };
  const question: UIMessage = { id: 'r1', role: 'assistant', metadata: { runId: 'r1' }, parts: [{ type: 'text', text: 'Let me ask.' }] };
  const typed: UIMessage = { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'blue' }] };
  const chunks = async (stream: ReadableStream<UIMessageChunk>) => {
    const out: UIMessageChunk[] = [];
    for await (const chunk of stream as unknown as AsyncIterable<UIMessageChunk>) out.push(chunk);
    return out;
  };
  const from = (list: UIMessageChunk[]) => new ReadableStream<UIMessageChunk>({
    start(controller) {
      for (const chunk of list) controller.enqueue(chunk);
      controller.close();
    },
  });

  it('leaves out what it says of the calls the asking message shows; a new run is not renamed', async () => {
    // As a read on after a cut sends it: the question's result, then a call of the rest's own.
    const rest: UIMessageChunk[] = [
      { type: 'start', messageId: 'r1' },
      { type: 'tool-output-available', toolCallId: 'q1', output: { answer: 'blue' } },
      { type: 'tool-input-available', toolCallId: 't1', toolName: 'transfer_funds', input: {} },
      { type: 'tool-approval-request', approvalId: 't1', toolCallId: 't1' },
      { type: 'start', messageId: 'r1' }, // the next stream's
      { type: 'finish' },
    ];
    expect(await chunks(goesOnAfter(from(rest), [ask, question, typed], 'u2'))).toEqual([
      { type: 'start', messageId: 'r1:u2' },
      rest[2], rest[3],
      { type: 'start', messageId: 'r1:u2' },
      { type: 'finish' },
    ]);
    // A reply of a run the chat does not show (a new turn): as it came.
    const next: UIMessageChunk[] = [{ type: 'start', messageId: 'r2' }, rest[1]!, { type: 'finish' }];
    expect(await chunks(goesOnAfter(from(next), [ask, question, typed], 'u2'))).toEqual(next);
  });
});
