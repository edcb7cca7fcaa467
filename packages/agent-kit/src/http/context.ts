// What every route handler shares: the runtime, authentication, the background segments and
// the limits, resolved once from createHandlers' dependencies.
import { minCronSecretChars } from '../config.js';
import { InvalidArgumentError } from '../errors.js';
import { defaultHeadStartMs } from '../queue/start-turn.js';
import type { Runtime, RunSegment } from '../turn/types.js';
import type { Authenticate } from './auth.js';
import { errorResponse } from './http-error.js';
import { defaultMaxBodyBytes } from './request.js';
import { createSegmentRegistry, type SegmentRegistry } from './segments.js';

/** One queue drain invocation, as src/queue/drain-queue.ts exports it. */
export type DrainQueue = (rt: Runtime, options: { budgetMs?: number }) => Promise<unknown>;
/** One reaper pass, as src/reaper/reap-expired-runs.ts exports it. */
export type ReapExpiredRuns = (rt: Runtime) => Promise<unknown>;

export interface HandlerDeps {
  rt: Runtime;
  /** The app's authentication: the caller of a request, or null (401). */
  authenticate: Authenticate;
  /** Bearer secret of the cron routes; default rt.config.cronSecret. None = the routes answer 503. */
  cronSecret?: string;
  /** The turn engine; default the library's runSegment (imported on first use). */
  runSegment?: RunSegment;
  drainQueue?: DrainQueue;
  reapExpiredRuns?: ReapExpiredRuns;
  /** Keep the invocation alive for a background segment (e.g. Vercel's `waitUntil`). */
  waitUntil?: (promise: Promise<unknown>) => void;
  /**
   * A thread's events request runs the thread's next turn when it is due (a slice's continuation,
   * a retry's, or a run whose process died, a second after its lease ran out), so that on
   * serverless a watched turn goes on at once rather than at the next cron call (ADR-0120).
   * Default true; false for a web tier that must leave turns to workers.
   */
  followersCarryOn?: boolean;
  /**
   * The drain's delay on a chat turn's job: the request runs the turn itself and the job is the
   * fallback if it dies before claiming. Default 5 s: past a slow claim, short for a user.
   */
  chatJobDelayMs?: number;
  /** Comment line while a stream is idle (default 15 s, under common 30–60 s proxy timeouts). */
  keepAliveMs?: number;
  /** EventSource reconnect delay hint (default 2 s). */
  retryMs?: number;
  /** Longest a stream stays open before ending (clients resume); default the invocation budget. */
  maxStreamMs?: number;
  /** Request body limit in bytes (default 64 KiB). */
  maxBodyBytes?: number;
}

export interface HandlerContext {
  rt: Runtime;
  authenticate: Authenticate;
  segments: SegmentRegistry;
  /** See HandlerDeps.followersCarryOn. */
  followersCarryOn: boolean;
  waitUntil: ((promise: Promise<unknown>) => void) | undefined;
  cronSecret: string | undefined;
  drainQueue: () => Promise<DrainQueue>;
  reapExpiredRuns: () => Promise<ReapExpiredRuns>;
  chatJobDelayMs: number;
  keepAliveMs: number;
  retryMs: number;
  maxStreamMs: number;
  maxBodyBytes: number;
}

/** A framework-free route handler: a Web Request (and its path parameters) to a Response. */
export type RouteHandler = (
  request: Request, params?: Record<string, string | undefined>,
) => Promise<Response>;

// Imported on first use: an app that injects its own parts never loads the defaults, and the
// http adapter does not pull the engine, the drain or the reaper in at startup.
async function loadRunSegment(): Promise<RunSegment> {
  return (await import('../turn/index.js')).runSegment;
}
async function loadDrainQueue(): Promise<DrainQueue> {
  return (await import('../queue/drain-queue.js')).drainQueue;
}
async function loadReapExpiredRuns(): Promise<ReapExpiredRuns> {
  return (await import('../reaper/reap-expired-runs.js')).reapExpiredRuns;
}

export function createContext(deps: HandlerDeps): HandlerContext {
  const { rt } = deps;
  const cronSecret = deps.cronSecret ?? rt.config.cronSecret;
  // The same rule as CRON_SECRET's, for a secret the app passes itself.
  if (cronSecret !== undefined && (typeof cronSecret !== 'string' || cronSecret.trim().length < minCronSecretChars)) {
    throw new InvalidArgumentError(`cronSecret must be at least ${minCronSecretChars} characters (e.g. \`openssl rand -hex 32\`), or left out to turn the cron routes off`);
  }
  if (deps.followersCarryOn !== undefined && typeof deps.followersCarryOn !== 'boolean') {
    throw new InvalidArgumentError('followersCarryOn must be true or false');
  }
  return {
    rt,
    authenticate: deps.authenticate,
    segments: createSegmentRegistry({
      rt,
      loadRunSegment: deps.runSegment ? async () => deps.runSegment! : loadRunSegment,
      waitUntil: deps.waitUntil,
    }),
    followersCarryOn: deps.followersCarryOn ?? true,
    waitUntil: deps.waitUntil,
    cronSecret,
    drainQueue: deps.drainQueue ? async () => deps.drainQueue! : loadDrainQueue,
    reapExpiredRuns: deps.reapExpiredRuns ? async () => deps.reapExpiredRuns! : loadReapExpiredRuns,
    chatJobDelayMs: deps.chatJobDelayMs ?? defaultHeadStartMs,
    keepAliveMs: deps.keepAliveMs ?? 15_000,
    retryMs: deps.retryMs ?? 2_000,
    maxStreamMs: deps.maxStreamMs ?? rt.config.invocationBudgetMs,
    maxBodyBytes: deps.maxBodyBytes ?? defaultMaxBodyBytes,
  };
}

// Without a log sink a 500 must still leave a trace for the operator.
function logToStderr(entry: Record<string, unknown>) {
  process.stderr.write(`${JSON.stringify(entry)}\n`);
}

/** Wrap a handler so anything it throws becomes the mapped JSON error response. */
export function guard(ctx: HandlerContext, handler: RouteHandler): RouteHandler {
  return async (request, params = {}) => {
    try {
      return await handler(request, params);
    } catch (raw) {
      return errorResponse(raw, ctx.rt.log ?? logToStderr);
    }
  };
}
