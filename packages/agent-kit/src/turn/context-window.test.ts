// The rules of ADR-0067, a prompt past the model's context window: which refusals say so (each
// provider's words, OpenAI's code, in a response or a stream), the counts read from them, and what
// each cut leaves out: the oldest earlier turns, then the turn's answered tool results, then its
// newest results cut short. Turns run end to end in context-window-turns.test.ts.
import { APICallError, type ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import {
  capResultsToFit, charsOverWindow, charsToShed, cutToFit, droppableResults, dropResultsToFit, earlierTurns, keepEarlierTurns, minResultChars, pastContextWindow,
  contextWindowTrustMs, modelName, tokensOverLimit, trustedWindow, windowOf,
} from './context-window.js';
import { buildMessages, type Step } from './journal.js';
import { isRetryableModelError, ModelStreamError, refusedForGood, streamError } from './model-retry.js';

const rejection = (statusCode: number, message: string, data?: unknown) => new APICallError({
  message, url: 'http://provider.test/v1/chat', requestBodyValues: {}, statusCode, ...(data === undefined ? {} : { data }),
});

const history = (turns: number): ModelMessage[] => [
  ...Array.from({ length: turns }, (_, i): ModelMessage[] => [
    { role: 'user', content: `q${i + 1}` }, { role: 'assistant', content: `a${i + 1}` },
  ]).flat(),
  { role: 'user', content: 'now' },
];

describe('pastContextWindow', () => {
  it('knows each provider\'s refusal of a prompt too long, and nothing else', () => {
    const openAi = rejection(400, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens.",
      { error: { code: 'context_length_exceeded' } });
    const byCodeOnly = rejection(400, 'Your input exceeds the limit.', { error: { code: 'context_length_exceeded' } });
    const words = [
      'prompt is too long: 208310 tokens > 200000 maximum', // Anthropic
      'The input token count (1234567) exceeds the maximum number of tokens allowed (1048576).', // Google
      'Prompt contains 40000 tokens, too large for model with 32768 maximum context length', // Mistral
      "This model's maximum prompt length is 131072 but the request contains 150000 tokens.", // xAI
      'Input is too long for requested model.', // Bedrock
      'the request exceeds the available context size, try increasing it', // llama.cpp
      'litellm.ContextWindowExceededError: too many tokens', // LiteLLM
    ];
    expect([openAi, byCodeOnly, ...words.map((w) => rejection(400, w)), rejection(413, 'Request Entity Too Large')]
      .every(pastContextWindow)).toBe(true);
    expect(pastContextWindow(new ModelStreamError('context_length_exceeded: x', 'context_length_exceeded', 400, false))).toBe(true);
    // As OpenAI's Responses API streams it: a 400, not retryable, so not asked again as is (ADR-0066).
    const streamed = streamError({ type: 'error', code: 'context_length_exceeded', message: 'Your input exceeds the context window.' });
    expect([pastContextWindow(streamed), refusedForGood(streamed), isRetryableModelError(streamed)]).toEqual([true, true, false]);
    // A rate limit or a server error that mentions the context, a bad key, no status: not one.
    expect(pastContextWindow(rejection(429, 'Rate limit reached for tokens per minute; context length 8192'))).toBe(false);
    expect(pastContextWindow(rejection(500, 'prompt is too long to process right now'))).toBe(false);
    expect(pastContextWindow(rejection(401, 'Incorrect API key provided'))).toBe(false);
    expect(pastContextWindow(new Error('prompt is too long'))).toBe(false);
    expect(pastContextWindow(null)).toBe(false);
  });

  it('reads the prompt\'s tokens and the limit when the refusal gives both', () => {
    expect(tokensOverLimit(rejection(400, "maximum context length is 8,192 tokens. However, your messages resulted in 9,120 tokens")))
      .toEqual({ used: 9120, limit: 8192 });
    expect(tokensOverLimit(rejection(400, 'prompt is too long: 208310 tokens > 200000 maximum'))).toEqual({ used: 208310, limit: 200000 });
    expect(tokensOverLimit(rejection(400,
      "maximum context length is 4096 tokens. However, you requested 4500 tokens (4000 in the messages, 500 in the completion)")))
      .toEqual({ used: 4500, limit: 4096 });
    // A proxy's words with the model's name, a request id and a date: none of their digits is a count.
    expect(tokensOverLimit(rejection(400, 'litellm.ContextWindowExceededError: AnthropicException - prompt is too long: ' +
      '208310 tokens > 200000 maximum. model=claude-3-5-sonnet-20241022 request_id=req_011CZ55443322 at 2026-12-03T10:45:00Z')))
      .toEqual({ used: 208310, limit: 200000 });
    expect(tokensOverLimit(rejection(400, 'gpt-4-0613: maximum context length is 8192, but you requested 9000 tokens (v2.50000)')))
      .toEqual({ used: 9000, limit: 8192 });
    expect(tokensOverLimit(rejection(400, 'Input is too long for requested model.'))).toBeUndefined();
    expect(tokensOverLimit(rejection(400, 'too long: 9000 tokens'))).toBeUndefined();
  });
});

describe('cutting the history to fit', () => {
  it('counts and keeps earlier turns at user messages, the current one always kept', () => {
    expect(earlierTurns(history(3))).toBe(3);
    expect(earlierTurns([{ role: 'user', content: 'now' }])).toBe(0);
    expect(keepEarlierTurns(history(3), 1).map((m) => m.content)).toEqual(['q3', 'a3', 'now']);
    expect(keepEarlierTurns(history(3), 0).map((m) => m.content)).toEqual(['now']);
    expect(keepEarlierTurns(history(3), 5)).toEqual(history(3));
  });

  it('drops the share the refusal says is over, and a twentieth more; half without numbers; undefined with none left', () => {
    const h = history(10); // 705 characters of JSON, each earlier turn 68 or 70
    const chars = JSON.stringify(h).length;
    // 30 % of the prompt over the limit (+5 %): 247 characters, so 4 of the 10 turns go.
    const cut = cutToFit(h, charsToShed(chars, rejection(400, 'prompt is too long: 1000 tokens > 700 maximum')))!;
    expect([cut.kept, cut.of]).toEqual([6, 10]);
    expect(cut.history[0]).toEqual({ role: 'user', content: 'q5' });
    // Barely over: still one turn fewer.
    expect(cutToFit(h, charsToShed(chars, rejection(400, 'prompt is too long: 1001 tokens > 1000 maximum')))!.kept).toBe(9);
    expect(cutToFit(h, charsToShed(chars, rejection(400, 'Input is too long for requested model.')))!.kept).toBe(5);
    expect(cutToFit(history(1), charsToShed(100, rejection(400, 'Input is too long for requested model.')))!.kept).toBe(0);
    expect(cutToFit(history(0), charsToShed(100, rejection(400, 'Input is too long for requested model.')))).toBeUndefined();
  });
});

/** A journal's model step calling fetch_page under `callIds`, and a tool step with its result. */
const model = (stepNo: number, callIds: string[]): Step => ({
  kind: 'model', stepNo, text: '', toolCalls: callIds.map((id) => ({ toolCallId: id, toolName: 'fetch_page', input: {} })),
} as Step);
const tool = (stepNo: number, id: string, output: unknown): Step => ({
  kind: 'tool', stepNo, toolCallId: id, toolName: 'fetch_page', outcome: 'completed', output,
} as Step);

describe('leaving out tool results to fit', () => {
  const journal = [model(0, ['a']), tool(1, 'a', 'A'.repeat(100)), model(2, ['b', 'c']), tool(3, 'b', 'B'), tool(4, 'c', 'C')];

  it('may leave out only the results the model has answered, oldest first, and says so in their place', () => {
    expect(droppableResults(journal).map((step) => step.stepNo)).toEqual([1]);
    expect(droppableResults([...journal, model(5, ['d']), tool(6, 'd', 'D')]).map((step) => step.stepNo)).toEqual([1, 3, 4]);
    expect(droppableResults([model(0, ['a']), tool(1, 'a', 'A')])).toEqual([]);
    const results = (n: number) => buildMessages([], journal, { droppedResults: n })
      .filter((m) => m.role === 'tool').map((m) => (m.content as { output: unknown }[])[0]!.output);
    expect(results(0)[0]).toEqual({ type: 'json', value: 'A'.repeat(100) });
    expect(results(1)).toEqual([
      { type: 'text', value: "[This result of fetch_page (102 characters) was left out: the conversation is past the model's context window.]" },
      { type: 'json', value: 'B' }, { type: 'json', value: 'C' },
    ]);
  });

  it('drops more each time, by the same rule as earlier turns, until none is left to drop', () => {
    const long = [...journal, model(5, ['d']), tool(6, 'd', 'D')];
    const refusal = rejection(400, 'Input is too long for requested model.');
    expect(dropResultsToFit(long, 0, charsToShed(500, refusal))).toBe(2); // half of 3, rounded up
    expect(dropResultsToFit(long, 2, charsToShed(500, refusal))).toBe(3);
    expect(dropResultsToFit(long, 3, charsToShed(500, refusal))).toBeUndefined();
    // By the counts: 102 characters of 500 cover the 10 % over and the twentieth more.
    expect(dropResultsToFit(long, 0, charsToShed(500, rejection(400, 'prompt is too long: 1100 tokens > 990 maximum')))).toBe(1);
  });
});

describe('cutting the newest tool results to fit', () => {
  const refusal = rejection(400, 'Input is too long for requested model.');

  it('cuts the longest first, to the largest length that sheds what the refusal asks', () => {
    const journal = [model(0, ['a', 'b']), tool(1, 'a', 'a'.repeat(1_000)), tool(2, 'b', 'b'.repeat(9_000))];
    // Without counts, half of what they hold: of 10,000 characters, the short one whole and the long one 4,000.
    expect(capResultsToFit(journal, undefined, charsToShed(12_000, refusal))).toBe(4_000);
    expect(capResultsToFit(journal, 4_000, charsToShed(12_000, refusal))).toBe(1_500); // 2,500 of 5,000
    expect(capResultsToFit(journal, 1_500, charsToShed(12_000, refusal))).toBe(625); // 1,250 of 2,500: both cut
    expect(capResultsToFit(journal, 625, charsToShed(12_000, refusal))).toBeUndefined(); // would go under minResultChars
    expect(minResultChars).toBe(500);
    // By the counts: 20 % over (+5 %) of a 12,000-character prompt is 3,000 characters.
    expect(capResultsToFit(journal, undefined, charsToShed(12_000, rejection(400, 'prompt is too long: 1000 tokens > 800 maximum')))).toBe(6_000);
    // Nothing to cut: no result after the last model step, or none longer than the cut.
    expect(capResultsToFit([...journal, model(3, [])], undefined, charsToShed(12_000, refusal))).toBeUndefined();
  });

  it('sends a cut result as its head and a note; the results within the cap as they are', () => {
    const journal = [model(0, ['a', 'b']), tool(1, 'a', 'short'), tool(2, 'b', { page: 'x'.repeat(800) })];
    const outputs = buildMessages([], journal, { resultCap: 600 })
      .filter((m) => m.role === 'tool').map((m) => (m.content as { output: { type: string; value: unknown } }[])[0]!.output);
    expect(outputs[0]).toEqual({ type: 'json', value: 'short' });
    expect(outputs[1]!.type).toBe('text');
    expect(outputs[1]!.value).toBe(`${JSON.stringify({ page: 'x'.repeat(800) }).slice(0, 600)}\n[This result of fetch_page was cut to ` +
      "its first 600 of 811 characters: the conversation is past the model's context window.]");
  });
});

describe('the window a thread learns (ADR-0069)', () => {
  it('is the size a cut aims for by the counts, or the size asked next without them; it cuts only its own model\'s prompts', () => {
    const now = Date.parse('2026-12-03T12:00:00Z');
    const learnedAt = '2026-12-03T12:00:00.000Z';
    // 20 % over (+5 %) of 10,000 characters: the prompt a cut aims for is 7,500; without counts, the one asked next.
    const byCounts = windowOf('p:m', 10_000, rejection(400, 'prompt is too long: 1000 tokens > 800 maximum'), 4_321, now);
    expect(byCounts).toEqual({ model: 'p:m', chars: 7_500, learnedAt });
    expect(windowOf('p:m', 10_000, rejection(400, 'Input is too long for requested model.'), 4_321, now))
      .toEqual({ model: 'p:m', chars: 4_321, learnedAt });
    expect([7_000, 7_500, 9_000].map((chars) => charsOverWindow(chars, 'p:m', byCounts, now))).toEqual([0, 0, 1_500]);
    expect([charsOverWindow(9_000, 'p:other', byCounts, now), charsOverWindow(9_000, 'p:m', null, now)]).toEqual([0, 0]);
    expect(cutToFit(history(10), charsOverWindow(705 + 120, 'p:m', { model: 'p:m', chars: 705, learnedAt }, now))!.kept).toBe(8);
  });

  it('is trusted for a day after it was learned, and not at all when it is not in its shape', () => {
    const known = { model: 'p:m', chars: 1_000, learnedAt: '2026-12-03T12:00:00.000Z' };
    const at = (iso: string) => trustedWindow(known, 'p:m', Date.parse(iso));
    expect([at('2026-12-03T12:00:00Z'), at('2026-12-04T11:59:59Z')]).toEqual([known, known]);
    expect(at('2026-12-04T12:00:00Z')).toBeUndefined(); // a day on: the whole prompt is sent again
    expect(contextWindowTrustMs).toBe(86_400_000);
    const now = Date.parse('2026-12-03T13:00:00Z');
    for (const odd of [{ model: 'p:m', chars: 1_000 }, { ...known, learnedAt: 'yesterday' }, { ...known, chars: '1000' },
      { ...known, learnedAt: '2027-06-01T00:00:00Z' }]) {
      expect(trustedWindow(odd as never, 'p:m', now)).toBeUndefined();
    }
  });

  it('names a model by its provider and id, or by the string it was given', () => {
    expect(modelName({ provider: 'anthropic.messages', modelId: 'claude-x' })).toBe('anthropic.messages:claude-x');
    expect(modelName('openai/gpt-x')).toBe('openai/gpt-x');
    expect(modelName({})).toBe('unknown:unknown');
  });
});
