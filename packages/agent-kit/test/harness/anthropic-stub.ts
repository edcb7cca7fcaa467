// A local Anthropic Messages API (node:http on 127.0.0.1, SSE): each request is answered by the
// next of the test's replies, a list of text pieces, ended either by the message's end or, as
// Anthropic does when overloaded mid-stream, by an `error` event. The real anthropic provider is
// tested against it.
import { serveStub } from './provider-stub.js';

export type AnthropicBody = { model: string; stream: boolean; messages: { role: string; content: unknown }[] };

/**
 * One reply: its text pieces, then `end_turn`; or the error event `{ type, message }`; or, with
 * `drop`, the connection closed after the pieces, as a network cut does.
 */
export type AnthropicReply = { text: readonly string[]; error?: { type: string; message: string }; drop?: true };

export interface AnthropicStub {
  /** The base URL to give the provider (ANTHROPIC_BASE_URL): `http://127.0.0.1:PORT/v1`. */
  baseURL: string;
  /** Every request's body, in order. */
  received: AnthropicBody[];
  close(): Promise<void>;
}

const sse = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

function replyEvents(reply: AnthropicReply, n: number): string[] {
  const events = [
    sse('message_start', { message: {
      id: `msg_stub_${n}`, type: 'message', role: 'assistant', model: 'claude-stub', content: [],
      stop_reason: null, stop_sequence: null, usage: { input_tokens: 3, output_tokens: 1 },
    } }),
    sse('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    ...reply.text.map((text) => sse('content_block_delta', { index: 0, delta: { type: 'text_delta', text } })),
  ];
  if (reply.error) return [...events, sse('error', { error: reply.error })];
  return [
    ...events,
    sse('content_block_stop', { index: 0 }),
    sse('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: reply.text.length } }),
    sse('message_stop', {}),
  ];
}

/** A message's text: its content when a string, else its text parts joined. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  return Array.isArray(content) ? content.map((part: { text?: unknown }) => (typeof part.text === 'string' ? part.text : '')).join('') : '';
}

export async function startAnthropicStub(replies: AnthropicReply[]): Promise<AnthropicStub> {
  const received: AnthropicBody[] = [];
  const server = await serveStub<AnthropicBody>((request, body, response) => {
    received.push(body);
    const reply = replies[received.length - 1];
    if (request.method !== 'POST' || request.url !== '/v1/messages' || !body.stream || !reply) {
      response.writeHead(404, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: `stub has no ${request.url} reply ${received.length}` } }));
      return;
    }
    const last = body.messages.at(-1);
    if (last?.role === 'assistant' && /\s$/.test(textOf(last.content))) {
      // As the real API answers a prefill that ends in whitespace.
      response.writeHead(400, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error',
        message: 'messages: final assistant content cannot end with trailing whitespace' } }));
      return;
    }
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const events = replyEvents(reply, received.length);
    if (reply.drop) {
      response.write(events.slice(0, 2 + reply.text.length).join(''), () => response.socket?.destroy());
      return;
    }
    for (const event of events) response.write(event);
    response.end();
  });
  return { ...server, received };
}
