// The turn engine: run one segment of a run under its lease, and build the runtime it needs.
export { runSegment } from './run-segment.js';
export { createRuntime, newOwner, type CreateRuntimeOptions } from './runtime.js';
export { defaultTurnSettings, turnSettingsOf, type TurnSettings } from './settings.js';
export type { Runtime, SegmentOptions, SegmentOutcome, RunSegment, Instructions, TurnContext } from './types.js';
export { finishTheStep } from './types.js';
export {
  loadJournal, committedText, buildMessages, type Step, type ModelStep, type ToolStep, type ToolCall, type Reasoning,
} from './journal.js';
