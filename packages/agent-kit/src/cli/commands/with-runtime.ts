// Shared by the commands that run turns (chat, drain, reap, worker): a Runtime built from the
// environment, a JSON-lines log on stderr, and strict parsing of numeric flags. The runtime (AI
// SDK, store drivers, zod) is imported when a command builds one, not when the CLI starts.
import { CommanderError } from 'commander';
import { coerceError, StoreUnavailableError } from '../../errors.js';
import type { CreateRuntimeOptions } from '../../turn/runtime.js';
import type { Runtime } from '../../turn/types.js';

/** One JSON object per line on stderr, so stdout stays the command's result. */
export function logToStderr(entry: Record<string, unknown>): void {
  process.stderr.write(`${JSON.stringify({ at: new Date().toISOString(), pid: process.pid, ...entry })}\n`);
}

/**
 * Build the Runtime from the environment, run `fn`, always close the store. It logs to stderr
 * unless `options` say otherwise (`chat` passes none: its stderr is for a person).
 */
export async function withRuntime<T>(
  fn: (rt: Runtime) => Promise<T>, options: CreateRuntimeOptions = { log: logToStderr }, runsTurns = true,
): Promise<T> {
  const createFromEnv = await runtimeFactory(options, runsTurns);
  return runThenClose(await createFromEnv(), fn);
}

/** Load the config and runtime modules; the function returned builds a Runtime from the environment. */
async function runtimeFactory(options: CreateRuntimeOptions, runsTurns = true): Promise<() => Promise<Runtime>> {
  const [{ configFromEnv }, { createRuntime }] = await Promise.all([import('../../config.js'), import('../../turn/index.js')]);
  const config = configFromEnv();
  const warning = scriptedByDefaultWarning(process.env);
  // Said by the commands that run other people's turns (drain, worker: they log JSON lines), not
  // by `chat`, whose user reads the scripted words as they come.
  if (warning && options.log && runsTurns) options.log({ level: 'warn', msg: warning });
  return () => createRuntime(config, options);
}

/**
 * The warning for a command that runs turns against a real database with no model set: the
 * offline scripted model answered an adopter's users with its nonsense words, saying nothing
 * (an outsider's trial). Null when a model is set (`scripted` too) or the store is embedded.
 */
export function scriptedByDefaultWarning(env: NodeJS.ProcessEnv): string | null {
  if ((env.AGENT_KIT_MODEL ?? '').trim() !== '' || (env.DATABASE_URL ?? '').trim() === '') return null;
  return 'agent-kit: AGENT_KIT_MODEL is not set, so the turns this command runs are answered by the offline '
    + 'scripted model, with the demo tools only. Set AGENT_KIT_MODEL (openai:<model>, anthropic:<model>, '
    + 'openai-compatible:<model>) to use a real one, or AGENT_KIT_MODEL=scripted to say you mean it.';
}

/**
 * As withRuntime, but an unreachable database is waited out with backoff instead of failing: a
 * worker started during a Postgres restart comes up when it is back. Aborting `signal` while
 * waiting gives up quietly (undefined).
 */
export async function withRuntimeWhenAvailable<T>(
  fn: (rt: Runtime) => Promise<T>, signal: AbortSignal,
): Promise<T | undefined> {
  const [createFromEnv, { backoffMs, sleep }] = await Promise.all([runtimeFactory({ log: logToStderr }), import('../../queue/pace.js')]);
  for (let failures = 1; ; failures++) {
    let rt: Runtime;
    try {
      rt = await createFromEnv();
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

/**
 * Stop a long command gracefully on SIGTERM or SIGINT: `signal` aborts, and the command finishes
 * what it is doing and exits as it would have. A SIGTERM that comes again while it stops (a
 * deploy's and then a shutdown's, or a process manager that repeats itself) changes nothing: it
 * killed the process by the default action, with its segments mid-park. A second SIGINT (Ctrl-C
 * again) still quits at once. Call `dispose` once the command is done.
 */
export function stopOnSignals(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.on('SIGTERM', stop);
  process.once('SIGINT', stop);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
    },
  };
}
