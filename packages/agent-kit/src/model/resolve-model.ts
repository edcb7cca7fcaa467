// Turns a model spec (`AGENT_KIT_MODEL`: scripted, openai:<m>, anthropic:<m>,
// openai-compatible:<m>) into an AI SDK v3 language model. Settings come only from the `env`
// argument, never from process.env behind its back, so tests and multi-tenant callers stay apart.

import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ModelConfigError } from './model-config-error.js';
import type { LanguageModelV3 } from './provider-types.js';
import { createScriptedModel, scriptedProviderId } from './scripted-model.js';

const acceptedForms =
  'scripted, openai:<model>, anthropic:<model>, openai-compatible:<model> (needs OPENAI_BASE_URL)';

/** Reads a setting; empty counts as unset, so `FOO=` in a .env file is not "the empty key". */
function readSetting(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/**
 * A base URL setting, checked here: a value without its scheme (`127.0.0.1:4010/v1`) was taken,
 * and every request of every turn failed with "Invalid URL", naming no setting.
 */
function readBaseUrl(env: NodeJS.ProcessEnv, name: string, spec: string): string | undefined {
  const value = readSetting(env, name);
  if (value === undefined) return undefined;
  const url = URL.canParse(value) ? new URL(value) : undefined;
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new ModelConfigError(`${name}=${JSON.stringify(value)} (for model "${spec}") is not an http(s) URL: ` +
      `write it whole, as http://127.0.0.1:8080/v1.`);
  }
  return value;
}

function requireSetting(env: NodeJS.ProcessEnv, name: string, spec: string): string {
  const value = readSetting(env, name);
  if (value === undefined) {
    throw new ModelConfigError(`Model "${spec}" needs ${name}, which is not set. Set it, or use ` +
      `AGENT_KIT_MODEL=scripted to run offline.`);
  }
  return value;
}

/**
 * Resolves a model spec to a language model. Empty or undefined means `scripted`.
 * The provider part is the text before the first colon, so model names may hold colons
 * (`openai-compatible:llama3:8b`).
 * @throws ModelConfigError for an unknown provider, an empty model name, or a missing setting.
 */
export function resolveModel(spec: string | undefined,
  env: NodeJS.ProcessEnv = process.env): LanguageModelV3 {
  const given = (spec ?? '').trim();
  if (given === '' || given === 'scripted') return createScriptedModel({}, env);
  const colon = given.indexOf(':');
  const provider = colon === -1 ? given : given.slice(0, colon);
  const modelId = colon === -1 ? '' : given.slice(colon + 1).trim();
  if (modelId === '' && ['openai', 'anthropic', 'openai-compatible'].includes(provider)) {
    throw new ModelConfigError(`Model spec "${given}" (AGENT_KIT_MODEL, or config.model) has no ` +
      `model name after "${provider}:". ` +
      `Accepted forms: ${acceptedForms}.`);
  }
  switch (provider) {
    case 'openai': {
      const baseURL = readBaseUrl(env, 'OPENAI_BASE_URL', given);
      const apiKey = requireSetting(env, 'OPENAI_API_KEY', given);
      const openai = createOpenAI({ apiKey, baseURL });
      // A custom base URL is almost always a chat-completions server; only OpenAI itself
      // serves the Responses API that openai(model) would call.
      return baseURL === undefined ? openai(modelId) : openai.chat(modelId);
    }
    case 'anthropic':
      return createAnthropic({
        apiKey: requireSetting(env, 'ANTHROPIC_API_KEY', given),
        baseURL: readBaseUrl(env, 'ANTHROPIC_BASE_URL', given),
      })(modelId);
    case 'openai-compatible':
      return createOpenAICompatible({
        name: 'openai-compatible',
        baseURL: readBaseUrl(env, 'OPENAI_BASE_URL', given) ?? requireSetting(env, 'OPENAI_BASE_URL', given),
        apiKey: readSetting(env, 'OPENAI_API_KEY'), // local servers often need none
      }).chatModel(modelId);
    default:
      throw new ModelConfigError(`Unknown model spec "${given}" (AGENT_KIT_MODEL, or ` +
        `config.model). Accepted forms: ` +
        `${acceptedForms}.`);
  }
}

/**
 * Whether the model continues a prompt that ends with a partial assistant message (prefill),
 * so a resumed run can ask for just the rest of a half-streamed step. True for scripted and
 * Anthropic (its Messages API continues a final assistant turn; with extended thinking on it
 * refuses, and the step starts again from its beginning: ADR-0064); false for OpenAI and generic
 * OpenAI-compatible servers, which start a new turn.
 */
export function supportsPrefill(model: { readonly provider: string }): boolean {
  return model.provider === scriptedProviderId || model.provider.startsWith('anthropic');
}
