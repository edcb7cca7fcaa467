// Goal: the scripted model behaves as a real v3 provider for the AI SDK — tools, approval,
// questions, prefill, abort and pacing. Method: drive it through streamText/generateText with
// zod tools, and read doStream directly where the exact stream parts matter.

import { generateText, stepCountIs, streamText, tool, type ModelMessage } from 'ai';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { ModelConfigError } from './model-config-error.js';
import type { ModelPrompt, ModelStreamPart } from './provider-types.js';
import { createScriptedModel } from './scripted-model.js';
import { scriptedAskQuestion, scriptedReplyText } from './scripted-reply.js';

afterEach(() => {
  vi.useRealTimers();
});

function recordEffectTool(calls: string[]) {
  return tool({
    description: 'records an effect',
    inputSchema: z.object({ note: z.string() }),
    execute: async ({ note }, { toolCallId }) => {
      calls.push(note);
      return { recorded: true, key: toolCallId };
    },
  });
}

async function readAll(stream: ReadableStream<ModelStreamPart>): Promise<ModelStreamPart[]> {
  const parts: ModelStreamPart[] = [];
  const reader = stream.getReader();
  for (let next = await reader.read(); !next.done; next = await reader.read()) {
    parts.push(next.value);
  }
  return parts;
}

const userPrompt = (...texts: string[]): ModelPrompt =>
  texts.map((text) => ({ role: 'user', content: [{ type: 'text', text }] }));

describe('scripted model through the AI SDK', () => {
  it('#overload cuts the reply halfway with a 529 once per turn, and continues the half when asked again', async () => {
    const model = createScriptedModel({ tokens: 10 });
    const prompt = userPrompt('go on #overload');
    const reply = scriptedReplyText(['go on #overload'], 10);
    const first = await readAll((await model.doStream({ prompt })).stream);
    const half = first.flatMap((part) => (part.type === 'text-delta' ? [part.delta] : [])).join('');
    expect(half).toBe(reply.split(' ').slice(0, 5).map((word) => `${word} `).join(''));
    expect(first.at(-1)).toMatchObject({ type: 'error', error: { statusCode: 529, isRetryable: true,
      responseHeaders: { 'retry-after-ms': '1000' } } });
    // Asked again with the half as the assistant's prefill: the rest, then finish.
    const prefilled: ModelPrompt = [...prompt, { role: 'assistant', content: [{ type: 'text', text: half }] }];
    const second = await readAll((await model.doStream({ prompt: prefilled })).stream);
    expect(half + second.flatMap((part) => (part.type === 'text-delta' ? [part.delta] : [])).join('')).toBe(reply);
    expect(second.at(-1)).toMatchObject({ type: 'finish' });
    // The turn was cut once: the same request again streams whole.
    const again = await readAll((await model.doStream({ prompt })).stream);
    expect(again.some((part) => part.type === 'error')).toBe(false);
  });

  it('streams the deterministic reply with the configured token count', async () => {
    const model = createScriptedModel({ tokens: 17 });
    const result = streamText({ model, prompt: 'hello there' });
    const deltas: string[] = [];
    for await (const part of result.fullStream) {
      if (part.type === 'text-delta') deltas.push(part.text);
    }
    expect(deltas).toHaveLength(17);
    expect(deltas.join('')).toBe(scriptedReplyText(['hello there'], 17));
    expect(await result.finishReason).toBe('stop');
    const generated = await generateText({ model, prompt: 'hello there' });
    expect(generated.text).toBe(deltas.join(''));
  });

  it('replies identically to identical user messages whatever ids and tool results', async () => {
    const model = createScriptedModel({ tokens: 25 });
    const conversation = (callId: string, answer: string): ModelMessage[] => [
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: callId, toolName: 'lookup',
        input: {} }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: callId, toolName: 'lookup',
        output: { type: 'json', value: { answer } } }] },
      { role: 'assistant', content: `thread-specific words ${answer}` },
      { role: 'user', content: 'second question' },
    ];
    const threadA = await generateText({ model, messages: conversation('call-a', 'alpha') });
    const threadB = await streamText({ model, messages: conversation('call-b', 'beta') }).text;
    const expected = scriptedReplyText(['first question', 'second question'], 25);
    expect(threadA.text).toBe(expected);
    expect(threadB).toBe(expected);
    const other = await generateText({ model, messages: [{ role: 'user', content: 'different' }] });
    expect(other.text).not.toBe(expected);
  });

  it('#effect: calls record_effect once, then replies with the text after the result', async () => {
    const calls: string[] = [];
    const result = streamText({
      model: createScriptedModel({ tokens: 8 }),
      prompt: 'write it down #effect',
      tools: { record_effect: recordEffectTool(calls) },
      stopWhen: stepCountIs(5),
    });
    expect(await result.text).toBe(scriptedReplyText(['write it down #effect'], 8));
    const steps = await result.steps;
    expect(steps.map((step) => step.finishReason)).toEqual(['tool-calls', 'stop']);
    expect(steps[0]?.toolCalls.map((call) => [call.toolName, call.input]))
      .toEqual([['record_effect', { note: 'write it down #effect' }]]);
    expect(steps[0]?.text).toBe('');
    expect(calls).toEqual(['write it down #effect']);
  });

  it('#ask: calls ask_user and stops; the answer (a tool result) keeps the reply', async () => {
    const model = createScriptedModel({ tokens: 9 });
    const askUser = tool({ description: 'ask', inputSchema: z.object({ question: z.string() }) });
    const tools = { ask_user: askUser };
    const first = await generateText({ model, prompt: 'pick one #ask', tools });
    expect(first.finishReason).toBe('tool-calls');
    expect(first.toolCalls.map((call) => [call.toolName, call.input]))
      .toEqual([['ask_user', { question: scriptedAskQuestion }]]);
    const replies: string[] = [];
    for (const answer of ['blue', 'green']) {
      const toolCallId = first.toolCalls[0]?.toolCallId ?? '';
      const messages: ModelMessage[] = [{ role: 'user', content: 'pick one #ask' },
        ...first.response.messages,
        { role: 'tool', content: [{ type: 'tool-result', toolCallId, toolName: 'ask_user',
          output: { type: 'json', value: { answer } } }] }];
      replies.push(await streamText({ model, messages, tools }).text);
    }
    expect(replies).toEqual([scriptedReplyText(['pick one #ask'], 9),
      scriptedReplyText(['pick one #ask'], 9)]);
  });

  it('#approve: requests approval for transfer_funds, executes once approved, then replies',
    async () => {
      const model = createScriptedModel({ tokens: 6 });
      const transfers: unknown[] = [];
      const tools = { transfer_funds: tool({
        description: 'transfer', needsApproval: true,
        inputSchema: z.object({ amount: z.number(), to: z.string() }),
        execute: async (input) => {
          transfers.push(input);
          return { transferred: input.amount, to: input.to };
        },
      }) };
      const first = streamText({ model, prompt: 'pay #approve', tools });
      const content = await first.content;
      const request = content.find((part) => part.type === 'tool-approval-request');
      expect(request?.toolCall).toMatchObject({ toolName: 'transfer_funds',
        input: { amount: 42, to: 'demo' } });
      expect(transfers).toEqual([]);
      const messages: ModelMessage[] = [{ role: 'user', content: 'pay #approve' },
        ...(await first.response).messages,
        { role: 'tool', content: [{ type: 'tool-approval-response',
          approvalId: request?.approvalId ?? '', approved: true }] }];
      const second = streamText({ model, messages, tools, stopWhen: stepCountIs(3) });
      expect(await second.text).toBe(scriptedReplyText(['pay #approve'], 6));
      expect(transfers).toEqual([{ amount: 42, to: 'demo' }]);
    });

  it('continues an assistant prefill via streamText: prefix + stream == full reply', async () => {
    const model = createScriptedModel({ tokens: 30 });
    const full = scriptedReplyText(['tell me'], 30);
    const prefix = full.slice(0, 37); // cuts inside a word on purpose
    const rest = await streamText({ model, messages: [{ role: 'user', content: 'tell me' },
      { role: 'assistant', content: prefix }] }).text;
    expect(rest.length).toBeGreaterThan(0);
    expect(prefix + rest).toBe(full);
  });
});

describe('scripted model stream', () => {
  it('emits v3 parts in order: stream-start, text-start, deltas, text-end, finish', async () => {
    const model = createScriptedModel({ tokens: 3 });
    const { stream } = await model.doStream({ prompt: userPrompt('hi') });
    const types = (await readAll(stream)).map((part) => part.type);
    expect(types).toEqual(['stream-start', 'response-metadata', 'text-start', 'text-delta',
      'text-delta', 'text-delta', 'text-end', 'finish']);
  });

  it('emits a tool-call part with JSON-string input and finish reason tool-calls', async () => {
    const model = createScriptedModel({ tokens: 3 });
    const parts = await readAll((await model.doStream({ prompt: userPrompt('#effect x') })).stream);
    const call = parts.find((part) => part.type === 'tool-call');
    expect(call?.type === 'tool-call' && JSON.parse(call.input)).toEqual({ note: '#effect x' });
    const finish = parts.at(-1);
    expect(finish?.type === 'finish' && finish.finishReason.unified).toBe('tool-calls');
    expect(parts.some((part) => part.type === 'text-delta')).toBe(false);
  });

  it('stops promptly on abort and rejects the reader with the abort reason', async () => {
    const model = createScriptedModel({ tokens: 10_000, delayMs: 5 });
    const controller = new AbortController();
    const { stream } = await model.doStream({ prompt: userPrompt('long'),
      abortSignal: controller.signal });
    const reader = stream.getReader();
    for (let index = 0; index < 5; index += 1) await reader.read();
    const reason = new Error('user pressed stop');
    const pending = reader.read();
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });

  it('with no delay, abort between reads also ends the stream with the reason', async () => {
    const model = createScriptedModel({ tokens: 10_000, delayMs: 0 });
    const controller = new AbortController();
    const { stream } = await model.doStream({ prompt: userPrompt('long'),
      abortSignal: controller.signal });
    const reader = stream.getReader();
    await reader.read();
    controller.abort();
    await expect(reader.read()).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('reports an abort to streamText as an abort part, with only part of the reply', async () => {
    const controller = new AbortController();
    const result = streamText({ model: createScriptedModel({ tokens: 1_000, delayMs: 2 }),
      prompt: 'long', abortSignal: controller.signal });
    let text = '';
    const types: string[] = [];
    for await (const part of result.fullStream) {
      types.push(part.type);
      if (part.type === 'text-delta') text += part.text;
      if (text.split(' ').length > 5) controller.abort();
    }
    expect(types).toContain('abort');
    expect(scriptedReplyText(['long'], 1_000).startsWith(text)).toBe(true);
    expect(text.length).toBeLessThan(scriptedReplyText(['long'], 1_000).length);
  });

  it('rejects a call made with an already aborted signal', async () => {
    const model = createScriptedModel();
    const reason = new Error('gone');
    await expect(model.doStream({ prompt: userPrompt('x'),
      abortSignal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    await expect(model.doGenerate({ prompt: userPrompt('x'),
      abortSignal: AbortSignal.abort(reason) })).rejects.toBe(reason);
  });

  it('waits about delayMs per token', async () => {
    const model = createScriptedModel({ tokens: 10, delayMs: 20 });
    const started = performance.now();
    await readAll((await model.doStream({ prompt: userPrompt('slow') })).stream);
    // A lower bound only: timers never fire much early, but a busy machine can be very late.
    expect(performance.now() - started).toBeGreaterThanOrEqual(10 * 20 * 0.75);
  });

  it('uses no timer at all when delayMs is 0 (completes under frozen fake timers)', async () => {
    vi.useFakeTimers();
    const model = createScriptedModel({ tokens: 500, delayMs: 0 });
    const parts = await readAll((await model.doStream({ prompt: userPrompt('fast') })).stream);
    expect(parts.filter((part) => part.type === 'text-delta')).toHaveLength(500);
  });
});

describe('createScriptedModel settings', () => {
  it('reads defaults from the environment and lets options win', async () => {
    const env = { AGENT_KIT_SCRIPTED_TOKENS: '7', AGENT_KIT_SCRIPTED_DELAY_MS: '0' };
    const fromEnv = await generateText({ model: createScriptedModel({}, env), prompt: 'q' });
    expect(fromEnv.text).toBe(scriptedReplyText(['q'], 7));
    const fromOption = await generateText({ model: createScriptedModel({ tokens: 2 }, env),
      prompt: 'q' });
    expect(fromOption.text).toBe(scriptedReplyText(['q'], 2));
    const byDefault = await generateText({ model: createScriptedModel({}, {}), prompt: 'q' });
    expect(byDefault.text).toBe(scriptedReplyText(['q'], 40));
  });

  it('rejects settings that are not non-negative integers, naming the variable', () => {
    expect(() => createScriptedModel({}, { AGENT_KIT_SCRIPTED_TOKENS: 'lots' }))
      .toThrow(/AGENT_KIT_SCRIPTED_TOKENS is "lots"/);
    expect(() => createScriptedModel({ delayMs: -1 }, {})).toThrow(ModelConfigError);
  });
});
