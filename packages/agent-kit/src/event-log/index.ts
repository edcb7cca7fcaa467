// The thread event log, read side: pages after a cursor, live following with a shared listener,
// and the thread/run read views that viewers need next to it. Appends live in SQL (lease/).
export {
  readEvents, findMessageSeq, findRunFirstSeq, readRunBoundary, readRunSegments, readLastSeq, toThreadEvent, toEventJson,
  maxEventPageSize, defaultEventPageSize,
  type ThreadEvent, type ThreadEventRow, type ThreadEventJson, type ReadEventsOptions,
  type RunSegmentView,
} from './read-events.js';
export {
  followEvents, eventsChannel, type FollowEventsOptions, type EventFollower,
} from './follow-events.js';
export {
  readThreadOwner, findLatestRunId, findCurrentRunId, listThreads, listThreadsPage, readThread, listThreadMessages, listRunMessages, readRunQuestion,
  listThreadRuns, maxThreadItems, type ThreadRun, type Regenerated, type ThreadSummary, type MessageView, type ListThreadsOptions,
  type ThreadsPage,
} from './read-threads.js';
export {
  readRunAccess, listRuns, listRunsPage, listRunEffects, listRunSteps, readRunDetail, maxRunListSize,
  type RunSummary, type ListRunsOptions, type RunsPage, type EffectView, type StepView, type RunDetail,
} from './read-runs.js';
export { runUsage, tokenUsage, type RunUsage, type TokenUsage } from './token-usage.js';
export { runFailureText } from './run-failure.js';
export {
  readStoreStatus, statusAlerts, defaultStaleMs, maxStaleSeconds, type StoreStatus, type StatusAlert, type LastPass,
} from './read-status.js';
export {
  readTurnPage, readTurnWindow, type TurnPage, type TurnWindow, type ReadTurnPageOptions,
} from './turn-window.js';
