// Cuts around a question, through agent-kit/client with the real turn engine and the scripted
// model on both stores (ADR-0083): a stream cut just before the question still lets the AI SDK
// send the answer; one cut inside its `finish` shows the question at once, not after the next
// stream's budget; and the stream after an answer is read again when its first request fails.
import { lastAssistantMessageIsCompleteWithApprovalResponses, lastAssistantMessageIsCompleteWithToolCalls, type UIMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestChat, readThread, statusOf as status, transportTo, until } from '../../test/harness/chat-kit.js';
import { headerAuth } from '../../test/harness/http-harness.js';
import { closeRealEngine, openRealEngine, type RealEngine } from '../../test/harness/real-engine.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { textOf } from '../../test/harness/ui-messages.js';
import { createHandlers, type Handlers } from '../http/handlers.js';
import { threadIdOf } from './index.js';

let engine: RealEngine | undefined;
let served: Handlers;
beforeAll(async () => {
  engine = await openRealEngine(8);
  // Each stream lasts up to a minute, as a serverless invocation's does.
  served = createHandlers({ rt: makeRuntime(engine.db, { tokens: 8 }), authenticate: headerAuth, maxStreamMs: 60_000 });
});
afterAll(() => closeRealEngine(engine));

const asked = (message: UIMessage) =>
  (message.parts.find((p) => p.type === 'data-agent-kit-input') as { data: { id: string } } | undefined)?.data;

/** A body of `text`, then a failure, as a dropped connection gives. */
function failedAfter(text: string, headers: Headers): Response {
  let sent = false;
  return new Response(new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent) return controller.error(new TypeError('terminated'));
      sent = true;
      controller.enqueue(new TextEncoder().encode(text));
    },
  }), { headers });
}

/** A transport whose first chat stream is cut where `cutAt(text)` says, and the requests it made. */
function cutOnce(cutAt: (text: string) => number) {
  const requests: string[] = [];
  let cut = false;
  const transport = transportTo(() => served, {
    fetch: async (request, serve) => {
      requests.push(`${request.method} ${new URL(request.url).pathname}`);
      const response = await serve(request);
      if (cut || request.method !== 'POST' || !request.url.includes('/api/chat')) return response;
      cut = true;
      const text = await response.text(); // (the turn parks at its question: the stream ends)
      return failedAfter(text.slice(0, cutAt(text)), response.headers);
    },
  });
  return { transport, requests };
}

describe('a cut around a question', () => {
  it.each([
    ['a question, answered with addToolOutput', 'Pick a colour #ask'],
    ['an approval, answered with addToolApprovalResponse', 'Pay the invoice #approve'],
  ])('just before %s: the question stays in its tool call\'s step, and the answer is sent', async (_, text) => {
    // Cut where the question's frame begins: its tool call came whole, the question did not.
    const { transport, requests } = cutOnce((whole) => whole.lastIndexOf('\n\n', whole.indexOf('"type":"data-agent-kit-input"')) + 2);
    let sends = 0;
    const chat = new TestChat({
      transport,
      sendAutomaticallyWhen: (c) => ++sends <= 10 && (text.includes('#ask')
        ? lastAssistantMessageIsCompleteWithToolCalls(c) : lastAssistantMessageIsCompleteWithApprovalResponses(c)),
    });
    await chat.sendMessage({ text });
    await until(() => chat.status === 'ready' && status(chat.messages.at(-1)!) === 'waiting_input');
    const reply = chat.messages.at(-1)!;
    expect(reply.parts.filter((p) => p.type === 'step-start')).toHaveLength(1);
    expect(requests.filter((line) => line.startsWith('GET '))).toHaveLength(1); // read on once
    const { id } = asked(reply)!;
    if (text.includes('#ask')) await chat.addToolOutput({ tool: 'ask_user', toolCallId: id, output: { answer: 'blue' } });
    else await chat.addToolApprovalResponse({ id: (reply.parts.find((p) => (p as { toolCallId?: string }).toolCallId === id) as { approval: { id: string } }).approval.id, approved: true });
    await until(() => chat.status === 'ready' && status(chat.messages.at(-1)!) === 'completed');
    expect(requests.filter((line) => line.endsWith('/input'))).toHaveLength(1);
    const { messages } = await readThread(served, threadIdOf(chat.messages)!);
    expect(textOf(chat.messages.at(-1)!)).toBe(messages.find((m) => m.role === 'assistant')!.text);
    await served.segments.settle();
  });

  it('inside the finish after a question: the chat shows the question at once, not after a whole stream', async () => {
    // Cut in the middle of the `finish` frame: every event came whole, the question's park too.
    const { transport, requests } = cutOnce((whole) => whole.indexOf('data: {"type":"finish"') + 30);
    const chat = new TestChat({ transport });
    await chat.sendMessage({ text: 'Pick a colour #ask' });
    // The read on after the park ends at once with its status (a minute's stream otherwise).
    await until(() => chat.status === 'ready', 10_000);
    expect(chat.error).toBeUndefined();
    expect(status(chat.messages.at(-1)!)).toBe('waiting_input');
    expect(asked(chat.messages.at(-1)!)).toBeDefined();
    expect(requests.filter((line) => line.startsWith('GET '))).toHaveLength(1);
  });

  it('after an answer: a first request for the rest that fails is made again', async () => {
    const requests: string[] = [];
    let failOne = true;
    let sends = 0;
    const chat = new TestChat({
      transport: transportTo(() => served, {
        fetch: async (request, serve) => {
          requests.push(`${request.method} ${new URL(request.url).pathname}`);
          if (request.method === 'GET' && failOne) {
            failOne = false;
            throw new TypeError('network blip');
          }
          return serve(request);
        },
      }),
      sendAutomaticallyWhen: (c) => ++sends <= 10 && lastAssistantMessageIsCompleteWithToolCalls(c),
    });
    await chat.sendMessage({ text: 'Pick a colour #ask' });
    await chat.addToolOutput({ tool: 'ask_user', toolCallId: asked(chat.messages.at(-1)!)!.id, output: { answer: 'blue' } });
    await until(() => chat.status === 'error' || (chat.status === 'ready' && status(chat.messages.at(-1)!) === 'completed'));
    expect(chat.error).toBeUndefined();
    expect(requests.filter((line) => line.startsWith('GET '))).toHaveLength(2);
    await served.segments.settle();
  });
});
