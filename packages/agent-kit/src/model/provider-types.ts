// Names for the AI SDK's v3 language-model spec types, derived from the `ai` package's own
// exports so agent-kit needs no direct dependency on `@ai-sdk/provider` (ai re-exports none).

import type { LanguageModel } from 'ai';

/** A provider language model that implements the v3 specification (what `ai` 6 calls). */
export type LanguageModelV3 = Extract<LanguageModel, { specificationVersion: 'v3' }>;
export type ModelCallOptions = Parameters<LanguageModelV3['doStream']>[0];
export type ModelPrompt = ModelCallOptions['prompt'];
export type ModelMessage = ModelPrompt[number];
export type ModelGenerateResult = Awaited<ReturnType<LanguageModelV3['doGenerate']>>;
export type ModelStreamResult = Awaited<ReturnType<LanguageModelV3['doStream']>>;
export type ModelStreamPart =
  ModelStreamResult['stream'] extends ReadableStream<infer Part> ? Part : never;
export type ModelContent = ModelGenerateResult['content'][number];
export type ModelUsage = ModelGenerateResult['usage'];
export type ModelFinishReason = ModelGenerateResult['finishReason'];
