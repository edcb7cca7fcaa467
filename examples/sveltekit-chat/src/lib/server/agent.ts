// The app's one agent-kit instance: store, runtime, HTTP handlers and the in-process worker
// (drain + reap), started once from hooks.server.ts and stopped on SIGTERM/SIGINT. Shutdown is
// ordered so nothing writes to a closed store: streams end, the worker and the request-started
// segments park at their next step boundary and finish, and only then the store closes.
import {
  configFromEnv, createRuntime, migrate, openDb, runWorker, storeOptionsFrom, type AgentKitConfig, type Db, type MaintenanceOutcome, type Runtime,
} from 'agent-kit';
import { createHandlers, type Caller, type Handlers } from 'agent-kit/http';
import { applyDemoDefaults, readOperators, resolveDataDir, shouldAutoMigrate } from './settings';
import { loadSessionSecret, readCookie, sessionCookieName, verifySessionToken, type SessionUser } from './session';

export interface AgentApp {
  rt: Runtime;
  handlers: Handlers;
  /** Aborts when shutdown begins: open streams end so the HTTP server can close. */
  shutdownSignal: AbortSignal;
  /** The signed-in user of a session cookie value, or null. */
  userFromToken(token: string | undefined): SessionUser | null;
  sessionSecret: Buffer;
}

let starting: Promise<AgentApp> | undefined;

/** Start the app's agent-kit once; later calls return the same instance. */
export function startAgent(): Promise<AgentApp> {
  starting ??= createAgentApp();
  return starting;
}

/** One JSON object per line on stderr, the format the agent-kit CLI logs in too. */
function log(entry: Record<string, unknown>) {
  process.stderr.write(`${JSON.stringify({ at: new Date().toISOString(), pid: process.pid, ...entry })}\n`);
}

/** Log a failed vacuum pass of the embedded store (ADR-0050), and with AGENT_KIT_LOG=1 what each did. */
function logMaintenance(outcome: MaintenanceOutcome) {
  if ('error' in outcome) log({ msg: 'embedded store: maintenance failed', error: outcome.error.message });
  else if (process.env.AGENT_KIT_LOG === '1' && outcome.frozen.length + outcome.vacuumed.length + outcome.analyzed.length > 0) {
    log({ msg: 'embedded store: maintained', ...outcome, ms: Math.round(outcome.ms) });
  }
}

async function openStore(config: AgentKitConfig, dataDir: string): Promise<Db> {
  // A LISTEN that hears nothing (a pooler in transaction mode) is logged whatever AGENT_KIT_LOG says.
  const db = await openDb({ ...storeOptionsFrom(config), dataDir, embedded: { onMaintenance: logMaintenance }, log });
  try {
    if (shouldAutoMigrate()) {
      const { applied, version } = await migrate(db);
      if (applied.length > 0) log({ msg: 'migrated', applied, version });
    }
    return db;
  } catch (error) {
    await db.close();
    throw error;
  }
}

// The model's system prompt (ADR-0045). The offline scripted model ignores it; a real one
// (AGENT_KIT_MODEL=openai:…) follows it.
const demoInstructions = 'You are the agent-kit demo assistant. Answer briefly. Call a tool only when the user '
  + 'asks for what it does: record_effect records a demo side effect, transfer_funds moves demo money, '
  + 'ask_user asks the user a question.';

async function createAgentApp(): Promise<AgentApp> {
  applyDemoDefaults();
  const config = configFromEnv();
  const dataDir = resolveDataDir();
  const operators = readOperators();
  const sessionSecret = loadSessionSecret(dataDir);
  if (config.databaseUrl && !process.env.AGENT_KIT_SESSION_SECRET) {
    log({ msg: 'AGENT_KIT_SESSION_SECRET is unset: using a secret kept in the data folder; '
      + 'several instances must share one AGENT_KIT_SESSION_SECRET' });
  }
  const db = await openStore(config, dataDir);
  // Schema check inside: a server not migrated yet stops here with "run `agent-kit migrate`".
  const rt = await createRuntime(config, {
    db, log: process.env.AGENT_KIT_LOG === '1' ? log : undefined, instructions: demoInstructions,
    historyTurns: 50, // a long thread's prompt stays inside a real model's context window (ADR-0046)
  });

  const userFromToken = (token: string | undefined): SessionUser | null => {
    const name = verifySessionToken(sessionSecret, token);
    return name ? { name, isOperator: operators.has(name) } : null;
  };
  const authenticate = async (request: Request): Promise<Caller | null> => {
    const user = userFromToken(readCookie(request.headers.get('cookie'), sessionCookieName));
    return user ? { userId: user.name, isOperator: user.isOperator } : null;
  };
  // The cron routes stay off (503) until CRON_SECRET is set: the worker below does their job.
  const handlers = createHandlers({ rt, authenticate, cronSecret: config.cronSecret });

  // The in-process cron: drain + reap on a loop, woken by NOTIFY, until shutdown.
  const shutdown = new AbortController();
  const worker = runWorker(rt, { signal: shutdown.signal }).catch((error: unknown) => {
    log({ msg: 'worker crashed', error: String(error) });
  });
  registerShutdown(shutdown, async () => {
    await Promise.all([worker, handlers.segments.stop()]);
    await db.close();
    log({ msg: 'agent-kit stopped' });
  });
  log({
    msg: 'agent-kit started', store: config.databaseUrl ? 'postgres' : `pglite ${dataDir}`, model: config.model,
    leaseTtlMs: config.leaseTtlMs,
  });
  return { rt, handlers, shutdownSignal: shutdown.signal, userFromToken, sessionSecret };
}

/**
 * SIGTERM/SIGINT begin the shutdown at once (streams end, no new work is taken); adapter-node
 * then closes the HTTP server and emits `sveltekit:shutdown`, after which `finish` waits for the
 * segments and closes the store. The process exits when nothing is left to run.
 */
function registerShutdown(shutdown: AbortController, finish: () => Promise<void>) {
  const begin = () => {
    if (!shutdown.signal.aborted) shutdown.abort();
  };
  process.once('SIGTERM', begin);
  process.once('SIGINT', begin);
  process.once('sveltekit:shutdown', () => {
    begin();
    finish().catch((error: unknown) => log({ msg: 'shutdown failed', error: String(error) }));
  });
}
