// The reaper: hand expired runs back (requeue) or, at the crash budget, salvage them.
export { reapExpiredRuns, type ReapOptions, type ReapReport } from './reap-expired-runs.js';
