// Goal: model specs resolve to working AI SDK models and bad specs fail clearly. Method: a local
// OpenAI-compatible stub (node:http on 127.0.0.1, SSE chat completions) serves text or a streamed
// tool call; streamText runs against it through the openai and openai-compatible providers.

import { streamText, tool } from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startOpenAiStub, type OpenAiStub } from '../../test/harness/openai-stub.js';
import { ModelConfigError } from './model-config-error.js';
import { resolveModel, supportsPrefill } from './resolve-model.js';
import { scriptedReplyText } from './scripted-reply.js';

let stub: OpenAiStub;
let received: OpenAiStub['received'];
let baseURL: string;

beforeAll(async () => {
  stub = await startOpenAiStub();
  ({ received, baseURL } = stub);
});

afterAll(async () => {
  await stub?.close();
});

beforeEach(() => {
  received.length = 0;
});

const recordEffect = tool({ description: 'records an effect',
  inputSchema: z.object({ note: z.string() }) });

describe.each([
  { spec: 'openai-compatible:stub-model', key: undefined },
  { spec: 'openai:stub-model', key: 'sk-test-key' },
])('$spec against a local chat-completions stub', ({ spec, key }) => {
  const env = () => ({ OPENAI_BASE_URL: baseURL, ...(key ? { OPENAI_API_KEY: key } : {}) });

  it('streams text and sends the conversation in the request body', async () => {
    const result = streamText({ model: resolveModel(spec, env()), system: 'be brief',
      prompt: 'say hello' });
    expect(await result.text).toBe('Hello from stub');
    expect(await result.finishReason).toBe('stop');
    expect(received).toHaveLength(1);
    const request = received[0];
    expect(request?.url).toBe('/v1/chat/completions');
    expect(request?.body.model).toBe('stub-model');
    expect(request?.body.messages.map((message) => message.role)).toEqual(['system', 'user']);
    expect(JSON.stringify(request?.body.messages[1]?.content)).toContain('say hello');
    expect(request?.authorization).toBe(key === undefined ? undefined : `Bearer ${key}`);
  });

  it('receives a streamed tool call with its arguments assembled', async () => {
    const result = streamText({ model: resolveModel(spec, env()), prompt: 'use the tool please',
      tools: { record_effect: recordEffect } });
    const calls = await result.toolCalls;
    expect(calls.map((call) => [call.toolCallId, call.toolName, call.input]))
      .toEqual([['call_stub_1', 'record_effect', { note: 'from stub' }]]);
    expect(await result.finishReason).toBe('tool-calls');
    const tools = (received[0]?.body as unknown as { tools?: { function: { name: string } }[] })
      .tools;
    expect(tools?.map((entry) => entry.function.name)).toEqual(['record_effect']);
  });
});

describe('resolveModel', () => {
  it('resolves empty, undefined and "scripted" to the scripted model', async () => {
    for (const spec of [undefined, '', '  ', 'scripted']) {
      const model = resolveModel(spec, { AGENT_KIT_SCRIPTED_TOKENS: '4' });
      expect(model.provider).toBe('agent-kit.scripted');
      expect(await streamText({ model, prompt: 'q' }).text).toBe(scriptedReplyText(['q'], 4));
    }
  });

  it('resolves anthropic:<model> without a network call, keeping the model id', () => {
    const model = resolveModel('anthropic:claude-x', { ANTHROPIC_API_KEY: 'k' });
    expect(model.modelId).toBe('claude-x');
    expect(model.specificationVersion).toBe('v3');
    expect(model.provider).toMatch(/^anthropic/);
    expect(received).toHaveLength(0);
  });

  it('keeps colons in the model name after the provider prefix', () => {
    const model = resolveModel('openai-compatible:llama3:8b', { OPENAI_BASE_URL: baseURL });
    expect(model.modelId).toBe('llama3:8b');
  });

  it('rejects an unknown provider, naming the spec and the accepted forms', () => {
    const attempt = () => resolveModel('gemini:pro', {});
    expect(attempt).toThrow(ModelConfigError);
    expect(attempt).toThrow(/"gemini:pro" \(AGENT_KIT_MODEL, or config.model\)/);
    expect(attempt).toThrow(/scripted, openai:<model>, anthropic:<model>, openai-compatible:/);
    try {
      attempt();
    } catch (error) {
      expect((error as ModelConfigError).code).toBe('MODEL_CONFIG');
    }
  });

  it('rejects an empty model name', () => {
    expect(() => resolveModel('openai:', { OPENAI_API_KEY: 'k' }))
      .toThrow(/\(AGENT_KIT_MODEL, or config.model\) has no model name/);
    expect(() => resolveModel('anthropic: ', { ANTHROPIC_API_KEY: 'k' })).toThrow(ModelConfigError);
  });

  it('requires OPENAI_BASE_URL for openai-compatible and API keys for hosted providers', () => {
    expect(() => resolveModel('openai-compatible:m', {})).toThrow(/needs OPENAI_BASE_URL/);
    expect(() => resolveModel('openai:gpt-x', {})).toThrow(/needs OPENAI_API_KEY/);
    expect(() => resolveModel('anthropic:claude-x', { ANTHROPIC_API_KEY: '' }))
      .toThrow(/needs ANTHROPIC_API_KEY/);
  });

  it('refuses a base URL that is not a whole http(s) URL, naming the setting (every request failed with "Invalid URL")', () => {
    expect(() => resolveModel('openai-compatible:m', { OPENAI_BASE_URL: '127.0.0.1:4010/v1' }))
      .toThrow('OPENAI_BASE_URL="127.0.0.1:4010/v1" (for model "openai-compatible:m") is not an http(s) URL: write it whole, as http://127.0.0.1:8080/v1.');
    expect(() => resolveModel('openai:gpt-x', { OPENAI_API_KEY: 'k', OPENAI_BASE_URL: 'localhost:11434' })).toThrow(ModelConfigError);
    expect(() => resolveModel('anthropic:c', { ANTHROPIC_API_KEY: 'k', ANTHROPIC_BASE_URL: 'ftp://x' })).toThrow(/ANTHROPIC_BASE_URL/);
    expect(resolveModel('openai-compatible:m', { OPENAI_BASE_URL: 'https://llm.internal:8443/v1' }).modelId).toBe('m');
  });
});

describe('supportsPrefill', () => {
  it('is true for scripted and anthropic, false for openai and openai-compatible', () => {
    const env = { OPENAI_API_KEY: 'k', ANTHROPIC_API_KEY: 'k', OPENAI_BASE_URL: baseURL };
    expect(supportsPrefill(resolveModel('scripted', env))).toBe(true);
    expect(supportsPrefill(resolveModel('anthropic:claude-x', env))).toBe(true);
    expect(supportsPrefill(resolveModel('openai:gpt-x', env))).toBe(false);
    expect(supportsPrefill(resolveModel('openai-compatible:m', env))).toBe(false);
  });
});
