// A local OpenAI Responses API (POST /v1/responses, SSE, node:http on 127.0.0.1): what
// createOpenAI(...)(model) calls without a base URL, the path real OpenAI users take. It records
// each request and streams a three-word reply; a record_effect function call when the user says
// "use the tool" (until the call's output is in the input); the first time a conversation says
// "server error mid-reply", two words and then the API's mid-stream `error` event; and, when it
// says "think", a reasoning item (a summary) before the answer. As the API does, it refuses a
// request whose `item_reference` names an item it never sent.
import type { ServerResponse } from 'node:http';
import { serveStub } from './provider-stub.js';

/** An item of a request's `input`: a message (role, content) or a function call or its output. */
export type ResponsesInputItem = {
  type?: string; id?: string; role?: string; content?: unknown; call_id?: string; name?: string; arguments?: string; output?: unknown;
};
export type ResponsesBody = {
  model: string; stream: boolean; input: ResponsesInputItem[] | string; tools?: { type: string; name?: string }[];
};

export interface OpenAiResponsesStub {
  /** The base URL to give createOpenAI: `http://127.0.0.1:PORT/v1`. */
  baseURL: string;
  /** Every request's body, in order. */
  received: ResponsesBody[];
  /** Forgets the items sent so far, as the API does once a stored response expires. */
  forget(): void;
  close(): Promise<void>;
}

/** The words of every text reply, one `response.output_text.delta` each. */
export const responsesReply = ['Hello', ' from', ' responses'] as const;
/** The summary of every reasoning item, in one `response.reasoning_summary_text.delta`. */
export const responsesReasoning = 'The user wants the tool.';
/** The function call's arguments, streamed in these two parts. */
export const responsesToolArguments = ['{"note":', '"from stub"}'] as const;

type Event = { type: string } & Record<string, unknown>;

/** The events as the API streams them: `event:` and `data:` lines, numbered from 0. */
function sse(events: Event[]): string[] {
  return events.map((event, n) => `event: ${event.type}\ndata: ${JSON.stringify({ ...event, sequence_number: n })}\n\n`);
}

/** A response object as `response.created` and `response.completed` carry it. */
function responseObject(n: number, model: string, status: string, output: unknown[], usage: unknown = null) {
  return {
    id: `resp_stub_${n}`, object: 'response', created_at: 1_700_000_000, status, error: null,
    incomplete_details: null, model, output, parallel_tool_calls: true, store: true, usage,
  };
}

const usage = {
  input_tokens: 12, input_tokens_details: { cached_tokens: 0 },
  output_tokens: 3, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15,
};

/** Created and in progress: what every streamed response starts with. */
function opening(n: number, model: string): Event[] {
  const response = responseObject(n, model, 'in_progress', []);
  return [{ type: 'response.created', response }, { type: 'response.in_progress', response }];
}

/** A reasoning item (`rs_stub_N`) at output index 0, its summary in one part, and the item as done. */
function reasoningItem(n: number): { item: unknown; events: Event[] } {
  const id = `rs_stub_${n}`;
  const part = (text: string) => ({ type: 'summary_text', text });
  const item = { id, type: 'reasoning', summary: [part(responsesReasoning)], encrypted_content: null };
  const at = { item_id: id, output_index: 0, summary_index: 0 };
  return { item, events: [
    { type: 'response.output_item.added', output_index: 0, item: { ...item, summary: [] } },
    { type: 'response.reasoning_summary_part.added', ...at, part: part('') },
    { type: 'response.reasoning_summary_text.delta', ...at, delta: responsesReasoning },
    { type: 'response.reasoning_summary_text.done', ...at, text: responsesReasoning },
    { type: 'response.reasoning_summary_part.done', ...at, part: part(responsesReasoning) },
    { type: 'response.output_item.done', output_index: 0, item },
  ] };
}

/** The items before the answer: a reasoning item when the model thinks, else none. */
type Before = { item: unknown; events: Event[] } | undefined;

/** A message item with the reply's words as text deltas, then the response completed. */
function textEvents(n: number, model: string, before?: Before): Event[] {
  const id = `msg_stub_${n}`;
  const text = responsesReply.join('');
  const index = before ? 1 : 0;
  const at = { item_id: id, output_index: index, content_index: 0 };
  const part = (t: string) => ({ type: 'output_text', annotations: [], logprobs: [], text: t });
  const item = { id, type: 'message', status: 'completed', role: 'assistant', content: [part(text)] };
  return [
    ...opening(n, model),
    ...before?.events ?? [],
    { type: 'response.output_item.added', output_index: index, item: { ...item, status: 'in_progress', content: [] } },
    { type: 'response.content_part.added', ...at, part: part('') },
    ...responsesReply.map((delta) => ({ type: 'response.output_text.delta', ...at, delta, logprobs: [] })),
    { type: 'response.output_text.done', ...at, text, logprobs: [] },
    { type: 'response.content_part.done', ...at, part: part(text) },
    { type: 'response.output_item.done', output_index: index, item },
    { type: 'response.completed', response: responseObject(n, model, 'completed', [...before ? [before.item] : [], item], usage) },
  ];
}

/** A function_call item for record_effect, its arguments in two deltas, then the response completed. */
function toolEvents(n: number, model: string, before?: Before): Event[] {
  const id = `fc_stub_${n}`;
  const args = responsesToolArguments.join('');
  const item = { id, type: 'function_call', status: 'completed', arguments: args, call_id: `call_stub_${n}`, name: 'record_effect' };
  const index = before ? 1 : 0;
  return [
    ...opening(n, model),
    ...before?.events ?? [],
    { type: 'response.output_item.added', output_index: index, item: { ...item, status: 'in_progress', arguments: '' } },
    ...responsesToolArguments.map((delta) => ({ type: 'response.function_call_arguments.delta', item_id: id, output_index: index, delta })),
    { type: 'response.function_call_arguments.done', item_id: id, output_index: index, arguments: args },
    { type: 'response.output_item.done', output_index: index, item },
    { type: 'response.completed', response: responseObject(n, model, 'completed', [...before ? [before.item] : [], item], usage) },
  ];
}

/** The text reply up to its second word, then the error event the API sends when it fails mid-stream. */
function failingEvents(n: number, model: string): Event[] {
  const events = textEvents(n, model);
  let deltas = 0;
  const upTo = events.findIndex((event) => event.type === 'response.output_text.delta' && ++deltas === 2);
  return [...events.slice(0, upTo + 1), {
    type: 'error', code: 'server_error', message: 'The server had an error while processing your request.', param: null,
  }];
}

/** A message's text: its content when a string, else its text parts joined. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  return Array.isArray(content) ? content.map((part: { text?: unknown }) => (typeof part.text === 'string' ? part.text : '')).join('') : '';
}

/** The text of the input's last user message. */
function lastUserText(input: ResponsesBody['input']): string {
  if (typeof input === 'string') return input;
  return textOf(input.filter((item) => item.role === 'user').at(-1)?.content);
}

/** A JSON error response as the API sends it. */
function refuse(response: ServerResponse, status: number, message: string, param: string | null = null) {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify({ error: { message, type: 'invalid_request_error', param, code: null } }));
}

export async function startOpenAiResponsesStub(): Promise<OpenAiResponsesStub> {
  const received: ResponsesBody[] = [];
  const failed = new Set<string>();
  // The ids of the reasoning items sent, which a later request may name by item_reference.
  const sent = new Set<string>();
  const server = await serveStub<ResponsesBody>((request, body, response) => {
    received.push(body);
    const n = received.length;
    if (request.method !== 'POST' || request.url !== '/v1/responses' || body.stream !== true) {
      refuse(response, 404, `stub has no ${request.method} ${request.url} without stream`);
      return;
    }
    const unknown = Array.isArray(body.input)
      ? body.input.find((item) => item.type === 'item_reference' && !sent.has(item.id ?? '')) : undefined;
    if (unknown) {
      refuse(response, 404, `Item with id '${unknown.id}' not found.`, 'input');
      return;
    }
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const said = lastUserText(body.input);
    const conversation = JSON.stringify(body.input);
    const hasToolOutput = Array.isArray(body.input) && body.input.some((item) => item.type === 'function_call_output');
    const before = said.includes('think') ? reasoningItem(n) : undefined;
    if (before) sent.add(`rs_stub_${n}`);
    let events: Event[];
    if (said.includes('server error mid-reply') && !failed.has(conversation)) {
      failed.add(conversation);
      events = failingEvents(n, body.model);
    } else if (said.includes('use the tool') && !hasToolOutput) {
      events = toolEvents(n, body.model, before);
    } else {
      events = textEvents(n, body.model, before);
    }
    for (const event of sse(events)) response.write(event);
    response.end();
  });
  return { ...server, received, forget: () => sent.clear() };
}
