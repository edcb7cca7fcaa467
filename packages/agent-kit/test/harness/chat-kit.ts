// What the agent-kit/client tests drive: the AI SDK's own chat (what `useChat` runs) with its
// messages in an array, agentKitTransport() over route handlers called in-process, a thread's
// read, and a poll until a condition holds.
import { AbstractChat, type ChatInit, type ChatState, type UIMessage } from 'ai';
import { agentKitTransport, type AgentKitTransportOptions, type ThreadRead } from '../../src/client/index.js';
import type { Handlers } from '../../src/http/handlers.js';
import { makeRequest } from './http-harness.js';

/** The AI SDK's chat with its messages in an array: what useChat (React) keeps in React state. */
export class TestChat extends AbstractChat<UIMessage> {
  constructor(init: ChatInit<UIMessage>) {
    const messages = [...(init.messages ?? [])];
    const state: ChatState<UIMessage> = {
      status: 'ready', error: undefined, messages,
      pushMessage: (message) => void state.messages.push(message),
      popMessage: () => void state.messages.pop(),
      replaceMessage: (index, message) => void (state.messages[index] = message),
      snapshot: (thing) => structuredClone(thing),
    };
    super({ ...init, state });
  }
}

/** The run status a reply's metadata gives (`completed`, `waiting_input`, `streaming`, …). */
export const statusOf = (message: UIMessage) => (message.metadata as { status?: string } | undefined)?.status;

export async function until(condition: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await condition()); await new Promise((resolve) => setTimeout(resolve, 5))) {
    if (Date.now() > deadline) throw new Error(`still not so after ${ms} ms: ${condition.toString()}`);
  }
}

/**
 * The transport of user `fay`'s page, its requests served by `served()` (called per request, so
 * a test can change servers, as a deploy does) through `fetch`, when given, which may see and
 * change them.
 */
export function transportTo(
  served: () => Handlers,
  options: Omit<AgentKitTransportOptions, 'fetch'> & { fetch?: (request: Request, serve: (request: Request) => Promise<Response>) => Promise<Response> } = {},
) {
  const { fetch: around, ...rest } = options;
  const serve = (request: Request) => served().handle(request);
  return agentKitTransport({
    origin: 'http://agent-kit.test',
    headers: { 'x-user': 'fay' },
    ...rest,
    fetch: (input, init) => {
      const request = new Request(input as string, init);
      return around ? around(request, serve) : serve(request);
    },
  });
}

export type ThreadReadWithRuns = Omit<ThreadRead, 'runs'> & { runs: Array<{ id: string; status: string; turnNo: number }> };

/** `GET /api/threads/:id` as `fay`. */
export async function readThread(handlers: Handlers, threadId: string): Promise<ThreadReadWithRuns> {
  return (await handlers.handle(makeRequest('GET', `/api/threads/${threadId}`, { user: 'fay' }))).json();
}
