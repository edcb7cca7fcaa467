// useChat's regenerate() through agentKitTransport, with the real turn engine on both stores
// (ADR-0091): the reply is asked again as a new run, the model is not given the reply it
// replaces, the chat and a reload of the thread agree, an earlier reply takes the later turns
// with it, an edited message (sendMessage with its id) is answered anew, and a turn under way is
// not regenerated (the chat shows the error, nothing changes). A regenerate or an edit whose
// response was lost, done again, is the same one: it names the reply it replaces (ADR-0092).
import type { UIMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestChat, readThread as readThreadOf, statusOf, transportTo } from '../../test/harness/chat-kit.js';
import { headerAuth } from '../../test/harness/http-harness.js';
import { numberedRepliesModel, type PromptMessage } from '../../test/harness/steps-model.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { textOf } from '../../test/harness/ui-messages.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { createHandlers, type Handlers } from '../http/handlers.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { threadIdOf, toUIMessages } from './index.js';

let db: Db;
let handlers: Handlers;
/** Every prompt the model was given; its nth reply is "reply n". */
const prompts: PromptMessage[][] = [];
const model = numberedRepliesModel(prompts);
beforeAll(async () => {
  db = await openTestDb();
  handlers = createHandlers({ rt: makeRuntime(db, { model }), authenticate: headerAuth });
});
afterAll(async () => {
  await handlers.segments.settle();
  await db.close();
});

const readThread = (threadId: string) => readThreadOf(handlers, threadId);
/** The chat's messages as "id: text". */
const shown = (messages: readonly UIMessage[]) => messages.map((m) => `${m.id}: ${textOf(m)}`);
/** What the model was last given, as "role: text". */
const lastPrompt = () => prompts.at(-1)!.filter((m) => m.role !== 'system').map((m) =>
  `${m.role}: ${(m.content as Array<{ text?: string }>).map((p) => p.text ?? '').join('')}`);

async function chatOf(...texts: string[]): Promise<TestChat> {
  const chat = new TestChat({ transport: transportTo(() => handlers) });
  for (const text of texts) await chat.sendMessage({ text });
  return chat;
}

describe("useChat's regenerate()", () => {
  it('asks the last reply again: a new run, a new answer, and the old one is out of the model and the read', async () => {
    const chat = await chatOf('one', 'two');
    const [u1, r1, u2, r2] = chat.messages.map((m) => m.id);
    expect(shown(chat.messages)).toEqual([`${u1}: one`, `${r1}: reply ${prompts.length - 1}`, `${u2}: two`, `${r2}: reply ${prompts.length}`]);
    const firstReply = textOf(chat.messages[1]!);

    await chat.regenerate();
    expect(chat.status).toBe('ready');
    const again = chat.messages.at(-1)!;
    expect(again.id).not.toBe(r2);
    expect(statusOf(again)).toBe('completed');
    expect(textOf(again)).toBe(`reply ${prompts.length}`);
    expect(lastPrompt()).toEqual(['user: one', `assistant: ${firstReply}`, 'user: two']);
    // Its metadata names the reply it replaced, live and read again: a page can show that one on request.
    expect(again.metadata).toMatchObject({ regenerates: { runId: r2, edited: false } });

    // A reload shows what the chat shows, under the same ids.
    const threadId = threadIdOf(chat.messages)!;
    const read = await readThread(threadId);
    expect(shown(toUIMessages(read))).toEqual(shown(chat.messages));
    expect(toUIMessages(read).at(-1)!.metadata).toMatchObject({ regenerates: { runId: r2, edited: false } });
    expect(toUIMessages(read)[1]!.metadata).not.toHaveProperty('regenerates');
    expect(read.runs.map((run) => run.id)).toEqual([r1, again.id]);

    // Again, from the reloaded chat: the message keeps its id, so the reply it has is the one replaced.
    const reopened = new TestChat({ id: threadId, messages: toUIMessages(read), transport: transportTo(() => handlers) });
    await reopened.regenerate();
    expect(reopened.messages.at(-1)!.id).not.toBe(again.id);
    expect(shown(toUIMessages(await readThread(threadId)))).toEqual(shown(reopened.messages));
  });

  it('an earlier reply takes the turns after it with it, in the chat and in the thread', async () => {
    const chat = await chatOf('first', 'second', 'third');
    const threadId = threadIdOf(chat.messages)!;
    await chat.regenerate({ messageId: chat.messages[1]!.id });
    expect(chat.messages).toHaveLength(2);
    expect(lastPrompt()).toEqual(['user: first']);
    expect(shown(toUIMessages(await readThread(threadId)))).toEqual(shown(chat.messages));
    // The next message goes on from the regenerated reply.
    await chat.sendMessage({ text: 'fourth' });
    expect(lastPrompt()).toEqual(['user: first', `assistant: ${textOf(chat.messages[1]!)}`, 'user: fourth']);
    expect(shown(toUIMessages(await readThread(threadId)))).toEqual(shown(chat.messages));
  });

  it("sendMessage({ text, messageId }) edits a message: the new reply answers the edit, and a reload shows the chat", async () => {
    const chat = await chatOf('alpha', 'beta', 'gamma');
    const threadId = threadIdOf(chat.messages)!;
    const beta = chat.messages[2]!.id;
    await chat.sendMessage({ text: 'beta, edited', messageId: beta });
    expect(chat.status).toBe('ready');
    expect(chat.messages.map((m) => m.role === 'user' ? `${m.id}: ${textOf(m)}` : m.role)).toEqual([
      `${chat.messages[0]!.id}: alpha`, 'assistant', `${beta}: beta, edited`, 'assistant',
    ]);
    expect(lastPrompt()).toEqual(['user: alpha', `assistant: ${textOf(chat.messages[1]!)}`, 'user: beta, edited']);
    expect(shown(toUIMessages(await readThread(threadId)))).toEqual(shown(chat.messages));
    // From a reopened chat, whose only message after an edit has no thread in its metadata: the chat's id names it.
    const reopened = new TestChat({ id: threadId, messages: toUIMessages(await readThread(threadId)).slice(0, 1), transport: transportTo(() => handlers) });
    await reopened.sendMessage({ text: 'alpha, edited', messageId: reopened.messages[0]!.id });
    expect(reopened.status).toBe('ready');
    expect(lastPrompt()).toEqual(['user: alpha, edited']);
    expect(shown(toUIMessages(await readThread(threadId)))).toEqual(shown(reopened.messages));
  });

  it('not while a turn from it on is under way: the chat shows the error, and the thread is as it was', async () => {
    const chat = await chatOf('busy');
    const threadId = threadIdOf(chat.messages)!;
    // The chat's answer can end before the segment that closed its run has looked for a next turn:
    // queued before that look, the other tab's message would be run here, and nothing be under way.
    await handlers.segments.settle();
    // A message of another tab's, queued (no drain runs here, so it stays queued).
    await startTurn(db, { threadId, ownerId: 'fay', text: 'from another tab' });
    const before = await readThread(threadId);
    await chat.regenerate();
    expect(chat.status).toBe('error');
    expect(chat.error?.message).toMatch(/409|under way|running|queued/);
    const after = await readThread(threadId);
    expect(after.runs.map((run) => [run.id, run.status])).toEqual(before.runs.map((run) => [run.id, run.status]));
    expect(after.messages).toEqual(before.messages);
  });

  it('a regenerate or an edit whose response was lost, done again, streams the run the first one made', async () => {
    let lose = false;
    const losing = async (request: Request, serve: (request: Request) => Promise<Response>) => {
      if (!lose || request.method !== 'POST') return serve(request);
      lose = false;
      const response = await serve(request); // the server did it; the page never hears
      await response.body?.cancel();
      await handlers.segments.settle();
      throw new TypeError('network connection lost');
    };
    const transport = transportTo(() => handlers, { fetch: losing });
    const chat = new TestChat({ transport });
    for (const text of ['one', 'two']) await chat.sendMessage({ text });
    const threadId = threadIdOf(chat.messages)!;
    const asked = prompts.length;

    lose = true;
    await chat.regenerate();
    expect(chat.status).toBe('error');
    expect(prompts.length).toBe(asked + 1);
    await chat.regenerate(); // the page tries again: the last message is the user's now
    expect(chat.status).toBe('ready');
    expect(prompts.length).toBe(asked + 1); // no third answer: the model was asked once
    const read = await readThread(threadId);
    expect(read.runs).toHaveLength(2);
    expect(chat.messages.at(-1)!.id).toBe(read.runs[1]!.id);
    expect(shown(toUIMessages(read))).toEqual(shown(chat.messages));

    lose = true;
    const two = chat.messages[2]!.id;
    await chat.sendMessage({ text: 'two, edited', messageId: two });
    expect(chat.status).toBe('error');
    await chat.sendMessage({ text: 'two, edited', messageId: two });
    expect(chat.status).toBe('ready');
    expect(prompts.length).toBe(asked + 2);
    expect(lastPrompt()).toEqual(['user: one', `assistant: ${textOf(chat.messages[1]!)}`, 'user: two, edited']);
    expect(shown(toUIMessages(await readThread(threadId)))).toEqual(shown(chat.messages));

    // From a chat reopened from the read, whose transport has seen no reply yet: the message's
    // own metadata names its run, so the lost regenerate done again is still the same one.
    const reopenedTransport = transportTo(() => handlers, { fetch: losing });
    const reopened = new TestChat({ id: threadId, messages: toUIMessages(await readThread(threadId)), transport: reopenedTransport });
    const before = prompts.length;
    lose = true;
    await reopened.regenerate();
    expect(reopened.status).toBe('error');
    await reopened.regenerate();
    expect(reopened.status).toBe('ready');
    expect(prompts.length).toBe(before + 1);
    expect(shown(toUIMessages(await readThread(threadId)))).toEqual(shown(reopened.messages));
    // And a regenerate after that one is a new answer: the response named the newer reply.
    await reopened.regenerate();
    expect(prompts.length).toBe(before + 2);
    expect(shown(toUIMessages(await readThread(threadId)))).toEqual(shown(reopened.messages));
  });
});
