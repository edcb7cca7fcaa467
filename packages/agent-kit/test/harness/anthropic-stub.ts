// A local Anthropic Messages API (node:http on 127.0.0.1, SSE): each request is answered by the
// next of the test's replies: optional thinking (with a signature), text pieces, an optional
// tool_use, ended either by the message's end or, as Anthropic does when overloaded mid-stream,
// by an `error` event. With `thinking` enabled in the request it applies the API's rule: in a
// tool loop or a prefill, the last assistant message must start with a thinking block this
// server signed; it refuses a message with no content before the last, and, given a context
// window, a longer prompt, as the API does. The real
// anthropic provider is tested against it.
import type { ServerResponse } from 'node:http';
import { serveStub } from './provider-stub.js';

type Block = { type?: string; text?: unknown; signature?: unknown };
export type AnthropicBody = {
  model: string; stream: boolean; messages: { role: string; content: unknown }[]; thinking?: { type: string };
};

/**
 * One reply: thinking first when given, its text pieces, a tool_use when given (then the stop
 * reason is `tool_use`, else `end_turn`); or, after the pieces, the error event `{ type, message }`;
 * or, with `drop`, the connection closed after the pieces, as a network cut does; or, with
 * `endEarly`, the response ended cleanly after the pieces, without the message's end (a proxy or
 * load balancer that closes a long response).
 */
export type AnthropicReply = {
  thinking?: string; text: readonly string[]; toolUse?: { name: string; input: unknown };
  /** Stop at the output limit (`max_tokens`) after the text pieces, as a reply longer than it does. */
  maxTokens?: true;
  error?: { type: string; message: string }; drop?: true; endEarly?: true;
};

export interface AnthropicStub {
  /** The base URL to give the provider (ANTHROPIC_BASE_URL): `http://127.0.0.1:PORT/v1`. */
  baseURL: string;
  /** Every request's body, in order. */
  received: AnthropicBody[];
  close(): Promise<void>;
}

const sse = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

/** The signature of reply `n`'s thinking block. */
export const stubSignature = (n: number) => `sig_stub_${n}`;

/** The reply's events up to its last text piece, then the rest (empty after an error). */
function replyEvents(reply: AnthropicReply, n: number): { head: string[]; tail: string[] } {
  const head = [sse('message_start', { message: {
    id: `msg_stub_${n}`, type: 'message', role: 'assistant', model: 'claude-stub', content: [],
    stop_reason: null, stop_sequence: null, usage: { input_tokens: 3, output_tokens: 1 },
  } })];
  let index = 0;
  if (reply.thinking !== undefined) {
    head.push(
      sse('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } }),
      sse('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: reply.thinking } }),
      sse('content_block_delta', { index, delta: { type: 'signature_delta', signature: stubSignature(n) } }),
      sse('content_block_stop', { index }),
    );
    index++;
  }
  const text = index;
  head.push(
    sse('content_block_start', { index: text, content_block: { type: 'text', text: '' } }),
    ...reply.text.map((piece) => sse('content_block_delta', { index: text, delta: { type: 'text_delta', text: piece } })),
  );
  if (reply.error) return { head: [...head, sse('error', { error: reply.error })], tail: [] };
  const tail = [sse('content_block_stop', { index: text })];
  if (reply.toolUse) {
    const at = text + 1;
    tail.push(
      sse('content_block_start', { index: at, content_block: { type: 'tool_use', id: `toolu_stub_${n}`, name: reply.toolUse.name, input: {} } }),
      sse('content_block_delta', { index: at, delta: { type: 'input_json_delta', partial_json: JSON.stringify(reply.toolUse.input) } }),
      sse('content_block_stop', { index: at }),
    );
  }
  const stop = reply.toolUse ? 'tool_use' : reply.maxTokens ? 'max_tokens' : 'end_turn';
  tail.push(
    sse('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: reply.text.length } }),
    sse('message_stop', {}),
  );
  return { head, tail };
}

/** A message's text: its content when a string, else its text parts joined. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  return Array.isArray(content) ? content.map((part: { text?: unknown }) => (typeof part.text === 'string' ? part.text : '')).join('') : '';
}

const blocksOf = (content: unknown): Block[] => (Array.isArray(content) ? content as Block[] : [{ type: 'text', text: content }]);

/**
 * What the API says of a request with thinking on whose tool loop or prefill does not start with
 * a thinking block it signed; undefined when the request is fine.
 */
function thinkingRefusal(body: AnthropicBody, signed: Set<string>): string | undefined {
  if (body.thinking?.type !== 'enabled') return undefined;
  const last = body.messages.at(-1);
  const inLoop = last?.role === 'assistant' || blocksOf(last?.content).some((block) => block.type === 'tool_result');
  const at = body.messages.findLastIndex((message) => message.role === 'assistant');
  if (!inLoop || at === -1) return undefined;
  const first = blocksOf(body.messages[at]!.content)[0];
  if (first?.type !== 'thinking' && first?.type !== 'redacted_thinking') {
    return `messages.${at}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${first?.type}\`. ` +
      'When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost ' +
      'set of `tool_use` and `tool_result` blocks).';
  }
  if (first.type === 'thinking' && !signed.has(String(first.signature))) return `messages.${at}.content.0: Invalid \`signature\` in \`thinking\` block`;
  return undefined;
}

function refuse(response: ServerResponse, status: number, type: string, message: string) {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify({ type: 'error', error: { type, message } }));
}

/**
 * `contextChars`: the model's context window, in characters of the request's messages (four to a
 * token); a longer prompt is refused with the API's 400 "prompt is too long".
 */
export async function startAnthropicStub(replies: AnthropicReply[], options: { contextChars?: number } = {}): Promise<AnthropicStub> {
  const received: AnthropicBody[] = [];
  const signed = new Set<string>();
  let answered = 0;
  const server = await serveStub<AnthropicBody>((request, body, response) => {
    received.push(body);
    if (request.method !== 'POST' || request.url !== '/v1/messages' || !body.stream) {
      refuse(response, 404, 'not_found_error', `stub has no ${request.method} ${request.url} without stream`);
      return;
    }
    const last = body.messages.at(-1);
    if (last?.role === 'assistant' && /\s$/.test(textOf(last.content))) {
      // As the real API answers a prefill that ends in whitespace.
      refuse(response, 400, 'invalid_request_error', 'messages: final assistant content cannot end with trailing whitespace');
      return;
    }
    const empty = body.messages.findIndex((message, at) =>
      !(at === body.messages.length - 1 && message.role === 'assistant') && blocksOf(message.content).every((block) => block.type === 'text' && textOf([block]) === ''));
    if (empty !== -1) {
      // As the real API answers a conversation with an empty message before its end.
      refuse(response, 400, 'invalid_request_error', `messages.${empty}: all messages must have non-empty content except for the optional final assistant message`);
      return;
    }
    const chars = JSON.stringify(body.messages).length;
    if (options.contextChars !== undefined && chars > options.contextChars) {
      const [used, limit] = [Math.ceil(chars / 4), Math.floor(options.contextChars / 4)];
      refuse(response, 400, 'invalid_request_error', `prompt is too long: ${used} tokens > ${limit} maximum`);
      return;
    }
    const thinking = thinkingRefusal(body, signed);
    if (thinking) {
      refuse(response, 400, 'invalid_request_error', thinking);
      return;
    }
    // A refused request does not use up a reply: the next request gets it.
    const reply = replies[answered];
    if (!reply) {
      refuse(response, 404, 'not_found_error', `stub has no reply ${answered + 1}`);
      return;
    }
    const n = ++answered;
    if (reply.thinking !== undefined) signed.add(stubSignature(n));
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const { head, tail } = replyEvents(reply, n);
    if (reply.drop) {
      response.write(head.join(''), () => response.socket?.destroy());
      return;
    }
    for (const event of reply.endEarly ? head : [...head, ...tail]) response.write(event);
    response.end();
  });
  return { ...server, received };
}
