// Shared by the queue commands (enqueue, drain, reap, worker): a Runtime built from the
// environment, a JSON-lines log on stderr, and strict parsing of numeric flags.
import { CommanderError } from 'commander';
import { configFromEnv } from '../../config.js';
import { coerceError, StoreUnavailableError } from '../../errors.js';
import { backoffMs, sleep } from '../../queue/pace.js';
import { createRuntime } from '../../turn/index.js';
import type { Runtime } from '../../turn/types.js';

/** One JSON object per line on stderr, so stdout stays the command's result. */
export function logToStderr(entry: Record<string, unknown>): void {
  process.stderr.write(`${JSON.stringify({ at: new Date().toISOString(), pid: process.pid, ...entry })}\n`);
}

/** Build the Runtime from the environment, run `fn`, always close the store. */
export async function withRuntime<T>(fn: (rt: Runtime) => Promise<T>): Promise<T> {
  const rt = await createRuntime(configFromEnv(), { log: logToStderr });
  return runThenClose(rt, fn);
}

/**
 * As withRuntime, but an unreachable database is waited out with backoff instead of failing: a
 * worker started during a Postgres restart comes up when it is back. Aborting `signal` while
 * waiting gives up quietly (undefined).
 */
export async function withRuntimeWhenAvailable<T>(
  fn: (rt: Runtime) => Promise<T>, signal: AbortSignal,
): Promise<T | undefined> {
  for (let failures = 1; ; failures++) {
    let rt: Runtime;
    try {
      rt = await createRuntime(configFromEnv(), { log: logToStderr });
    } catch (raw) {
      const error = coerceError(raw);
      if (!(error instanceof StoreUnavailableError)) throw error;
      logToStderr({ msg: 'waiting for the database', error: error.message, failures });
      await sleep(backoffMs(failures), signal);
      if (signal.aborted) return undefined;
      continue;
    }
    return runThenClose(rt, fn);
  }
}

async function runThenClose<T>(rt: Runtime, fn: (rt: Runtime) => Promise<T>): Promise<T> {
  try {
    return await fn(rt);
  } finally {
    await rt.db.close();
  }
}

/** A commander argument parser for a positive number within `max` (integers only if asked). */
export function positiveNumber(flag: string, max: number, integer = false) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n <= 0 || n > max || (integer && !Number.isInteger(n))) {
      throw new CommanderError(2, 'agent-kit.invalidArgument',
        `${flag} takes a positive ${integer ? 'integer' : 'number'} up to ${max}, got "${value}"`);
    }
    return n;
  };
}
