// Configuration: from the environment for the CLI and the app, or an object in the library API.
// Durations are seconds in the environment (as a platform documents its time limit), ms inside.
import { z } from 'zod';
import { InvalidArgumentError } from './errors.js';

/** The shortest cron secret taken (CRON_SECRET, or createHandlers' cronSecret). */
export const minCronSecretChars = 16;

export interface AgentKitConfig {
  /** postgres://… ; absent = the embedded store in `dataDir`. */
  databaseUrl?: string;
  /** Embedded store folder (default ./.agent-kit); 'memory' for tests. */
  dataDir?: string;
  /** `scripted` (default), `openai:<m>`, `anthropic:<m>`, `openai-compatible:<m>`. */
  model: string;
  /** One invocation's budget (platform time limit); the lease never outlives it. */
  invocationBudgetMs: number;
  /** Lease TTL; defaults to the budget. Shorter = faster takeover, renewed on a timer. */
  leaseTtlMs: number;
  /** Crash budget: segments since the last voluntary hand-off before the reaper salvages. */
  maxRunAttempts: number;
  /**
   * Retries of a model request its provider refused for now (a rate limit, an overload), per
   * model step, before the segment fails and the attempt is spent; default 5 (ADR-0057).
   */
  modelRetries?: number;
  /**
   * The most of a tool's result kept, in UTF-8 bytes of its JSON text; a larger one is kept as its
   * head with a note. Default 1 MiB (ADR-0058).
   */
  maxToolResultBytes?: number;
  /**
   * Once the process is asked to stop, how long a model step under way may go on before it is
   * cut and the run given back (ADR-0117); default 3 s. Longer under a platform with a longer
   * grace than Docker's 10 s (Kubernetes gives 30 s).
   */
  stopGraceMs?: number;
  /** Bearer secret for the cron routes. */
  cronSecret?: string;
  /** Connections in this process's pool on Postgres (default 10), besides one for LISTEN. */
  poolMax?: number;
  /**
   * Where LISTEN connects, when the statements' URL goes through a pooler in transaction mode:
   * a direct or session-mode URL of the same database (ADR-0106). Default: databaseUrl.
   */
  listenUrl?: string;
}

/**
 * A number of seconds in [min, 3 600], said so when it is not one (`60s` or `5m` is not). An
 * hour is far past any platform's limit (15 min at most) and any sensible segment; a larger value
 * is most likely milliseconds, and would hold a dead segment's run for hours.
 */
const seconds = (min: number) => decimal('expected a number of seconds, such as 60')
  .pipe(z.number().min(min, `must be at least ${min} s`).max(3_600, 'must be at most 3 600 s (an hour): is it in milliseconds?'));

/**
 * A number written in decimal (`60`, `0.5`, `1e6`), spaces around it allowed. Not what
 * z.coerce.number() takes besides: a blank value (`" "`, read as 0: AGENT_KIT_MODEL_RETRIES=" "
 * meant "fail at once"), hexadecimal (`0x10`), `Infinity`.
 */
function decimal(expected: string) {
  return z.string().trim().regex(/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i, expected).transform(Number);
}

/** A whole number from `min` to `max`. */
const count = (min: number, max: number, expected = 'expected a whole number') =>
  decimal(expected).pipe(z.number().int(expected).min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

const postgresUrl = z.string().refine((url) => /^postgres(ql)?:\/\/./i.test(url) && URL.canParse(url),
  'must be a postgres:// or postgresql:// connection string');

const envSchema = z.object({
  // A connection string, not a host or a DSN of another database: `notaurl` was read as a host
  // name ("getaddrinfo ENOTFOUND base"), `mysql://…` as a Postgres server.
  DATABASE_URL: postgresUrl.optional(),
  AGENT_KIT_LISTEN_URL: postgresUrl.optional(),
  AGENT_KIT_DATA_DIR: z.string().min(1).optional(),
  AGENT_KIT_MODEL: z.string().min(1).optional(),
  // Under 1 s a drain would not take a job before its margin; a lease under 0.1 s is renewed
  // every 33 ms or less.
  AGENT_KIT_INVOCATION_BUDGET: seconds(1).optional(),
  AGENT_KIT_LEASE_TTL: seconds(0.1).optional(),
  AGENT_KIT_MAX_RUN_ATTEMPTS: count(1, 100).optional(),
  AGENT_KIT_MODEL_RETRIES: count(0, 20).optional(),
  AGENT_KIT_STOP_GRACE: seconds(0).optional(),
  // A role's connection limit on a managed plan is often 5 to 20: the pool must fit under it.
  AGENT_KIT_POOL_MAX: count(1, 100).optional(),
  // Below 4 KiB the note and a useful head do not fit; above 100 MB a result is stored three
  // times near jsonb's ~255 MB limit, which is what the bound is there to stay away from.
  AGENT_KIT_MAX_TOOL_RESULT_BYTES: decimal('expected a number of bytes, such as 1048576')
    .pipe(z.number().int('expected a whole number of bytes')
      .min(4_096, 'must be at least 4096 bytes').max(100_000_000, 'must be at most 100000000 bytes (100 MB)')).optional(),
  // Compared with what a scheduler sends after Bearer, trimmed: stray spaces or a newline from a
  // secrets file would otherwise never match. Short secrets are guessable.
  CRON_SECRET: z.string().trim().min(minCronSecretChars, `must be at least ${minCronSecretChars} characters (e.g. \`openssl rand -hex 32\`)`).optional(),
});

const secretNames = new Set(['CRON_SECRET', 'DATABASE_URL', 'AGENT_KIT_LISTEN_URL']);

/** Default budget: 300 s, the common serverless function limit. */
export const defaultInvocationBudgetMs = 300_000;
/** Default crash budget: three segments that all died before the run is salvaged. */
export const defaultMaxRunAttempts = 3;

/**
 * Read the configuration from environment variables (empty strings count as unset).
 * @throws InvalidArgumentError naming the variable when a value is malformed.
 */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): AgentKitConfig {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0]);
    const value = String(cleaned[name]);
    // A secret is not repeated into logs: only its length.
    // (The cron secret is compared trimmed: its length is counted so.)
    const length = name === 'CRON_SECRET' ? value.trim().length : value.length;
    const got = secretNames.has(name) ? `${length} characters` : JSON.stringify(value);
    throw new InvalidArgumentError(`${name}: ${issue.message} (got ${got})`);
  }
  const e = parsed.data;
  const invocationBudgetMs = (e.AGENT_KIT_INVOCATION_BUDGET ?? defaultInvocationBudgetMs / 1000) * 1000;
  const leaseTtlMs = Math.min((e.AGENT_KIT_LEASE_TTL ?? invocationBudgetMs / 1000) * 1000, invocationBudgetMs);
  return {
    databaseUrl: e.DATABASE_URL,
    dataDir: e.AGENT_KIT_DATA_DIR,
    model: e.AGENT_KIT_MODEL ?? 'scripted',
    invocationBudgetMs,
    leaseTtlMs,
    maxRunAttempts: e.AGENT_KIT_MAX_RUN_ATTEMPTS ?? defaultMaxRunAttempts,
    ...(e.AGENT_KIT_MODEL_RETRIES === undefined ? {} : { modelRetries: e.AGENT_KIT_MODEL_RETRIES }),
    ...(e.AGENT_KIT_MAX_TOOL_RESULT_BYTES === undefined ? {} : { maxToolResultBytes: e.AGENT_KIT_MAX_TOOL_RESULT_BYTES }),
    ...(e.AGENT_KIT_STOP_GRACE === undefined ? {} : { stopGraceMs: e.AGENT_KIT_STOP_GRACE * 1000 }),
    cronSecret: e.CRON_SECRET,
    ...(e.AGENT_KIT_POOL_MAX === undefined ? {} : { poolMax: e.AGENT_KIT_POOL_MAX }),
    ...(e.AGENT_KIT_LISTEN_URL === undefined ? {} : { listenUrl: e.AGENT_KIT_LISTEN_URL }),
  };
}
