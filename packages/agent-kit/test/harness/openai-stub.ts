// A local OpenAI-compatible chat-completions server (node:http on 127.0.0.1, SSE): it records
// each request and streams three words, or a tool call to record_effect when the conversation
// says "use the tool"; the three words stop at the output limit (`length`) when the last message
// asks for "a long story". A conversation that says "server error" gets, the first time, the
// error OpenAI puts in a stream (`{ error: { type: 'server_error' } }`), after two words when it
// also says "mid-reply", else alone; one that says "too long for the model" gets OpenAI's 400 for
// a prompt past the context window (as does one past the window it was given), and one that says
// "out of credit" its 429 `insufficient_quota`. One that says "think it through" gets
// `stubReasoning` first, as `reasoning_content` deltas (DeepSeek's and vLLM's way). The real
// providers (openai, openai-compatible) are tested against it.
import { serveStub } from './provider-stub.js';

export type StubBody = { model: string; stream: boolean; messages: { role: string; content: unknown }[] };
export type StubRequest = { url: string; authorization: string | undefined; body: StubBody };

export interface OpenAiStub {
  /** The base URL to give the provider (OPENAI_BASE_URL): `http://127.0.0.1:PORT/v1`. */
  baseURL: string;
  /** Every request received, in order; clear it between tests. */
  received: StubRequest[];
  close(): Promise<void>;
}

function chunk(delta: Record<string, unknown>, finishReason: string | null = null): string {
  const body = { id: 'chatcmpl-stub', object: 'chat.completion.chunk', created: 1_700_000_000,
    model: 'stub-model', choices: [{ index: 0, delta, finish_reason: finishReason }] };
  return `data: ${JSON.stringify(body)}\n\n`;
}

/** What the stub thinks before it answers a conversation that says "think it through". */
export const stubReasoning = 'Weighing the words.';

/** SSE events for a reply: a streamed tool call when the user asks for one, else three words. */
function replyEvents(body: StubBody): string[] {
  const thinks = JSON.stringify(body.messages.at(-1)).includes('think it through');
  const thought = thinks ? [chunk({ role: 'assistant', reasoning_content: 'Weighing' }), chunk({ reasoning_content: ' the words.' })] : [];
  const wantsTool = JSON.stringify(body.messages.at(-1)).includes('use the tool');
  const wantsLong = JSON.stringify(body.messages.at(-1)).includes('a long story'); // cut at the output limit
  const events = wantsTool
    ? [chunk({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_stub_1', type: 'function',
      function: { name: 'record_effect', arguments: '' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '{"note":' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '"from stub"}' } }] }),
    chunk({}, 'tool_calls')]
    : [chunk({ role: 'assistant', content: 'Hello' }), chunk({ content: ' from' }),
      chunk({ content: ' stub' }), chunk({}, wantsLong ? 'length' : 'stop')];
  const usage = { id: 'chatcmpl-stub', object: 'chat.completion.chunk', created: 1_700_000_000,
    model: 'stub-model', choices: [],
    usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 } };
  return [...thought, ...events, `data: ${JSON.stringify(usage)}\n\n`, 'data: [DONE]\n\n'];
}

/** What OpenAI says of a prompt past the model's context window (a 400). */
export const contextLengthExceeded =
  "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens. Please reduce the length of the messages.";

/** What OpenAI says to an account out of credit (a 429 that no wait lifts). */
export const quotaExceeded = 'You exceeded your current quota, please check your plan and billing details.';

/** The error event OpenAI streams when it fails a request it had accepted. */
const serverError = `data: ${JSON.stringify({ error: {
  message: 'The server had an error while processing your request.', type: 'server_error', param: null, code: null,
} })}\n\n`;

/**
 * `holdRetryMs`: how long a conversation that got its server error waits for the reply when it is
 * asked again, so a test can watch the wait (a browser that subscribes late still sees it).
 */
/**
 * `contextChars`: the model's context window, in characters of the request's messages (four to a
 * token); a longer prompt gets OpenAI's 400 `context_length_exceeded` with both counts.
 */
export async function startOpenAiStub(options: { holdRetryMs?: number; contextChars?: number } = {}): Promise<OpenAiStub> {
  const received: StubRequest[] = [];
  const failed = new Set<string>();
  const server = await serveStub<StubBody>((request, body, response) => {
    received.push({ url: request.url ?? '', authorization: request.headers.authorization, body });
    if (request.method !== 'POST' || request.url !== '/v1/chat/completions' || !body.stream) {
      response.writeHead(404, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: `stub has no ${request.url}` } }));
      return;
    }
    const conversation = JSON.stringify(body.messages);
    if (conversation.includes('out of credit')) {
      response.writeHead(429, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: quotaExceeded, type: 'insufficient_quota', param: null, code: 'insufficient_quota' } }));
      return;
    }
    const pastWindow = options.contextChars !== undefined && conversation.length > options.contextChars;
    if (conversation.includes('too long for the model') || pastWindow) {
      const message = pastWindow
        ? `This model's maximum context length is ${Math.floor(options.contextChars! / 4)} tokens. However, your messages ` +
          `resulted in ${Math.ceil(conversation.length / 4)} tokens. Please reduce the length of the messages.`
        : contextLengthExceeded;
      response.writeHead(400, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message, type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } }));
      return;
    }
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    if (conversation.includes('server error') && !failed.has(conversation)) {
      failed.add(conversation);
      // "mid-reply": two of the three words first, as when OpenAI fails a reply under way.
      if (conversation.includes('mid-reply')) for (const event of replyEvents(body).slice(0, 2)) response.write(event);
      response.end(serverError);
      return;
    }
    const reply = () => {
      for (const event of replyEvents(body)) response.write(event);
      response.end();
    };
    if (failed.has(conversation) && options.holdRetryMs) setTimeout(reply, options.holdRetryMs);
    else reply();
  });
  return { ...server, received };
}
