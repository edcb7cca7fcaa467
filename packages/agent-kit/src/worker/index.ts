// The long-running worker: drain + reap on a loop until its signal aborts.
export { runWorker, defaultWorkerPollMs, type WorkerOptions } from './run-worker.js';
export { Waker } from './waker.js';
