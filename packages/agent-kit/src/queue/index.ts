// The queue: start a turn (enqueue), take and settle jobs, and drain them (the cron entry point).
export { startTurn, maxMessageChars, type StartTurnOptions, type StartTurnResult } from './start-turn.js';
export { regenerateTurn, type RegenerateTurnOptions, type RegenerateTurnResult } from './regenerate-turn.js';
export { restoreTurn, type RestoreTurnOptions, type RestoreTurnResult } from './restore-turn.js';
export { cancelRun, takeOverRun, releaseRun, replyToRun, type RunIntentResult, type ReplyToRunResult } from './run-intents.js';
export { dropJobsOfSpentRuns, enqueueRun, settleJob, takeJobs, takeJobsForDrain, takeJobsMax, type SettleOutcome, type TakenJob } from './jobs.js';
export {
  drainQueue, defaultDrainConcurrency, jobLockMs, takeMarginMs, type DrainOptions, type DrainReport,
} from './drain-queue.js';
