// agent-kit's public API: durable AI-agent turns on plain PostgreSQL. Explicit named exports only.
export * from './errors.js';
export * from './config.js';
export * from './store/index.js';
export * from './lease/index.js';
export {
  startTurn, regenerateTurn, restoreTurn, cancelRun, takeOverRun, releaseRun, replyToRun, maxMessageChars, drainQueue, defaultDrainConcurrency, enqueueRun,
  type StartTurnOptions, type StartTurnResult, type RegenerateTurnOptions, type RegenerateTurnResult,
  type RestoreTurnOptions, type RestoreTurnResult, type RunIntentResult, type ReplyToRunResult, type DrainOptions, type DrainReport,
} from './queue/index.js';
export { reapExpiredRuns, type ReapOptions, type ReapReport } from './reaper/index.js';
export { runWorker, type WorkerOptions } from './worker/index.js';
export {
  runSegment, finishTheStep, createRuntime, newOwner, defaultTurnSettings, loadJournal, committedText, buildMessages,
  type CreateRuntimeOptions, type TurnSettings, type Runtime, type SegmentOptions, type SegmentOutcome,
  type RunSegment, type Step, type ModelStep, type ToolStep, type ToolCall, type Instructions, type TurnContext,
} from './turn/index.js';
export {
  effectKey, startEffect, finishEffect, listEffects, reconcileWithTool, reconcileDeadEffects, resolveEffect,
  type EffectRecord, type EffectStatus, type ReconcileOutcome,
} from './effect-ledger/index.js';
export {
  resolveModel, supportsPrefill, createScriptedModel, scriptedReplyText, scriptedAskQuestion, scriptedReasoningText,
  scriptedThinkTag,
  demoTools, recordEffectTool, transferFundsTool, askUserTool, ModelConfigError,
  type AgentTool, type AgentToolContext, type ReconcileResult, type ScriptedModelOptions,
} from './model/index.js';
export * from './event-log/index.js';
export { isApproval } from './approval.js';
export { isBlank } from './blank.js';
