// Configuration: from the environment for the CLI and the app, or an object in the library API.
// Durations are seconds in the environment (as a platform documents its time limit), ms inside.
import { z } from 'zod';
import { InvalidArgumentError } from './errors.js';

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
  /** Bearer secret for the cron routes. */
  cronSecret?: string;
}

const seconds = z.coerce.number().positive().max(86_400);

const envSchema = z.object({
  DATABASE_URL: z.string().min(1).optional(),
  AGENT_KIT_DATA_DIR: z.string().min(1).optional(),
  AGENT_KIT_MODEL: z.string().min(1).optional(),
  AGENT_KIT_INVOCATION_BUDGET: seconds.optional(),
  AGENT_KIT_LEASE_TTL: seconds.optional(),
  AGENT_KIT_MAX_RUN_ATTEMPTS: z.coerce.number().int().min(1).max(100).optional(),
  CRON_SECRET: z.string().min(1).optional(),
});

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
    throw new InvalidArgumentError(`${issue.path.join('.')}: ${issue.message} (got ${JSON.stringify(cleaned[String(issue.path[0])])})`);
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
    cronSecret: e.CRON_SECRET,
  };
}
