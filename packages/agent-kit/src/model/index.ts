// The model layer: resolves AGENT_KIT_MODEL to an AI SDK v3 model, provides the deterministic
// offline scripted model, and defines the tool shape and the built-in demo tools.

export type { AgentTool, AgentToolContext, ReconcileResult } from './agent-tool.js';
export {
  askUserTool,
  demoTools,
  recordEffectTool,
  transferFundsTool,
  type AskUserInput,
  type RecordEffectInput,
  type RecordEffectOutput,
  type TransferFundsInput,
  type TransferFundsOutput,
} from './demo-tools.js';
export { ModelConfigError } from './model-config-error.js';
export type { LanguageModelV3 } from './provider-types.js';
export { resolveModel, supportsPrefill } from './resolve-model.js';
export {
  createScriptedModel,
  scriptedProviderId,
  type ScriptedModelOptions,
} from './scripted-model.js';
export {
  planScriptedStep,
  scriptedAskQuestion,
  scriptedReasoningText,
  scriptedReplyText,
  scriptedThinkTag,
  scriptedToolTags,
  scriptedTransferInput,
  userTextsOf,
  type ScriptedStep,
} from './scripted-reply.js';
