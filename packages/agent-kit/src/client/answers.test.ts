// Questions and approvals answered the AI SDK's way through agent-kit/client (ADR-0077), with
// the real turn engine and the scripted model, on both stores: addToolOutput and
// addToolApprovalResponse, sent by sendAutomaticallyWhen, go on in the same message; an answer
// sent again after its response was lost gets the rest of the reply; and a send with nothing to
// post ends the chat's automatic sends instead of starting them again and again.
import {
  lastAssistantMessageIsCompleteWithApprovalResponses, lastAssistantMessageIsCompleteWithToolCalls, type UIMessage,
} from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestChat, readThread as readThreadOf, statusOf as status, transportTo, until } from '../../test/harness/chat-kit.js';
import { closeRealEngine, openRealEngine, type RealEngine } from '../../test/harness/real-engine.js';
import { textOf } from '../../test/harness/ui-messages.js';
import type { Handlers } from '../http/handlers.js';
import type { Db } from '../store/db.js';
import { threadIdOf } from './index.js';

let db: Db;
let handlers: Handlers;
let engine: RealEngine | undefined;
beforeAll(async () => {
  engine = await openRealEngine(8);
  ({ db, handlers } = engine);
});
afterAll(() => closeRealEngine(engine));

const transport = transportTo(() => handlers);
const readThread = (threadId: string) => readThreadOf(handlers, threadId);

describe("questions and approvals answered the AI SDK's way", () => {
  const toolPart = (message: UIMessage, toolCallId: string) =>
    message.parts.find((p) => (p as { toolCallId?: string }).toolCallId === toolCallId) as
      { state: string; output?: unknown; approval?: { id: string } } | undefined;
  const asked = (message: UIMessage) =>
    (message.parts.find((p) => p.type === 'data-agent-kit-input') as { data: { id: string; kind: string } } | undefined)?.data;
  /** The chat's reply, once it is over: the stored message's text, and how the chat shows it. */
  async function settled(chat: TestChat) {
    await until(() => chat.status === 'ready' && status(chat.messages.at(-1)!) === 'completed');
    const reply = chat.messages.at(-1)!;
    const { messages } = await readThread(threadIdOf(chat.messages)!);
    return { reply, stored: messages.find((m) => m.role === 'assistant' && m.runId === reply.id)! };
  }

  it('a question: addToolOutput answers it, and the reply goes on in the same message', async () => {
    const chat = new TestChat({ transport, sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await chat.sendMessage({ text: 'Pick a colour #ask' });
    const question = asked(chat.messages.at(-1)!)!;
    expect([status(chat.messages.at(-1)!), question.kind]).toEqual(['waiting_input', 'question']);
    expect(toolPart(chat.messages.at(-1)!, question.id)!.state).toBe('input-available');
    await chat.addToolOutput({ tool: 'ask_user', toolCallId: question.id, output: { answer: 'blue' } });
    const { reply, stored } = await settled(chat);
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(toolPart(reply, question.id)).toMatchObject({ state: 'output-available', output: { answer: 'blue' } });
    expect(textOf(reply)).toBe(stored.text); // the reply's text once: nothing sent again
    // Sent again (a second send of the same answer): the run waits for nothing, nothing is added.
    await chat.sendMessage();
    expect(textOf(chat.messages.at(-1)!)).toBe(stored.text);
  });

  it('an answer whose response was lost: sent again, it is a 409, and the reply goes on all the same', async () => {
    let lose = true;
    const losing = transportTo(() => handlers, {
      fetch: async (request, serve) => {
        const response = await serve(request);
        if (lose && request.method === 'POST' && request.url.endsWith('/input')) {
          lose = false; // the answer went in; the page never hears so
          throw new TypeError('network error');
        }
        return response;
      },
    });
    let sends = 0; // (held back after 10: a chat that sends again and again still ends)
    const chat = new TestChat({
      transport: losing, sendAutomaticallyWhen: (c) => ++sends <= 10 && lastAssistantMessageIsCompleteWithApprovalResponses(c),
    });
    await chat.sendMessage({ text: 'Pay the invoice #approve true' });
    const approval = asked(chat.messages.at(-1)!)!;
    const call = toolPart(chat.messages.at(-1)!, approval.id)!;
    await chat.addToolApprovalResponse({ id: call.approval!.id, approved: true });
    await until(() => chat.status === 'error');
    expect(status(chat.messages.at(-1)!)).toBe('waiting_input'); // nothing of the rest shown
    const runId = chat.messages.at(-1)!.id;
    await until(async () => (await readThread(threadIdOf(chat.messages)!)).runs.some((r) => r.id === runId && r.status === 'completed'));

    await chat.sendMessage(); // the app's "try again": the same answer, sent again
    const { reply, stored } = await settled(chat);
    expect(toolPart(reply, approval.id)!.state).toBe('output-available');
    expect(textOf(reply)).toBe(stored.text); // the rest once, after the question
    await chat.sendMessage(); // and again: the chat shows the rest, nothing is added
    expect(textOf(chat.messages.at(-1)!)).toBe(stored.text);
    expect(sends).toBeLessThan(10);
    const effects = await db.query<{ n: number }>('select count(*)::int as n from agent_kit_effects where run_id = $1', [runId]);
    expect(effects[0]!.n).toBe(1);
  });

  for (const approved of [true, false]) {
    it(`an approval: addToolApprovalResponse ${approved ? 'grants' : 'denies'} it, and the reply goes on`, async () => {
      const chat = new TestChat({ transport, sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });
      await chat.sendMessage({ text: `Pay the invoice #approve ${approved}` });
      const approval = asked(chat.messages.at(-1)!)!;
      expect(approval.kind).toBe('approval');
      const call = toolPart(chat.messages.at(-1)!, approval.id)!;
      expect(call.state).toBe('approval-requested');
      await chat.addToolApprovalResponse({ id: call.approval!.id, approved });
      const { reply, stored } = await settled(chat);
      expect(toolPart(reply, approval.id)!.state).toBe(approved ? 'output-available' : 'output-denied');
      expect(textOf(reply)).toBe(stored.text);
      const effects = await db.query<{ n: number }>(
        'select count(*)::int as n from agent_kit_effects where run_id = $1', [reply.id]);
      expect(effects[0]!.n).toBe(approved ? 1 : 0); // the tool ran once, or not at all
    });
  }
});

describe('a send with nothing to post', () => {
  const ask: UIMessage = { id: 'u', role: 'user', parts: [{ type: 'text', text: 'look it up' }] };
  /** A reply whose last step ran its tool (agent-kit's, run on the server): nothing to answer. */
  const ranItsTool: UIMessage = {
    id: 'a', role: 'assistant', metadata: { runId: 'a', status: 'completed' },
    parts: [{ type: 'step-start' }, { type: 'tool-lookup', toolCallId: 't1', state: 'output-available', input: {}, output: 'found' }],
  };

  it('ends the chat\'s automatic sends: the reply gains an empty step, and nothing goes to the server', async () => {
    const requests: string[] = [];
    let sends = 0;
    const chat = new TestChat({
      transport: transportTo(() => handlers, { fetch: (request, serve) => (requests.push(request.url), serve(request)) }),
      messages: [ask, ranItsTool],
      // Counted, and held back after 10 so that a chat that sends again and again still ends.
      sendAutomaticallyWhen: (c) => ++sends <= 10 && lastAssistantMessageIsCompleteWithToolCalls(c),
    });
    await chat.sendMessage(); // the app sends the chat as it is (a "try again")
    await until(() => chat.status === 'ready');
    expect(sends).toBe(1); // asked once, after the app's send, and no: the reply's last step is empty now
    expect(chat.messages.at(-1)!.parts.map((p) => p.type)).toEqual(['step-start', 'tool-lookup', 'step-start']);
    expect(requests).toEqual([]);
  });

  it('refuses a chat with no message', async () => {
    await expect(transport.sendMessages({
      chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: undefined, messages: [],
    })).rejects.toThrow(/last message as the user's next one/);
  });
});
