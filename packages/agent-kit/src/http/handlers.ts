// createHandlers: every route of DESIGN.md §5 as a framework-free function (Web Request →
// Response), plus a router and the registry of background segments. An app's +server.ts calls
// one handler; a plain server calls `handle`.
import { createContext, guard, type HandlerDeps, type RouteHandler } from './context.js';
import { createCronDrainHandler, createCronReapHandler } from './cron-handlers.js';
import {
  createRunsHandler, createRunHandler, createStatusHandler, createThreadHandler, createThreadsHandler,
} from './read-handlers.js';
import {
  createRunCancelHandler, createRunInputHandler, createRunReleaseHandler, createRunResolveEffectHandler,
  createRunReplyHandler, createRunRestoreHandler, createRunTakeoverHandler,
} from './run-handlers.js';
import { createRouter, type RouteName } from './routes.js';
import type { SegmentRegistry } from './segments.js';
import { createChatHandler, createThreadEventsHandler } from './stream-handlers.js';

export type Handlers = Record<RouteName, RouteHandler> & {
  /** Route any request to its handler (404/405 when none matches). */
  handle: (request: Request) => Promise<Response>;
  /** Segments started by requests; `await handlers.segments.stop()` on shutdown. */
  segments: SegmentRegistry;
};

/**
 * Build the HTTP handlers over a runtime. Errors become `{ error: { code, message } }` with the
 * status from `statusByErrorCode`; streams are SSE (or the AI SDK UI message stream with
 * `?format=ai-sdk`).
 */
export function createHandlers(deps: HandlerDeps): Handlers {
  const ctx = createContext(deps);
  const routes: Record<RouteName, RouteHandler> = {
    chat: guard(ctx, createChatHandler(ctx)),
    threads: guard(ctx, createThreadsHandler(ctx)),
    thread: guard(ctx, createThreadHandler(ctx)),
    threadEvents: guard(ctx, createThreadEventsHandler(ctx)),
    runs: guard(ctx, createRunsHandler(ctx)),
    run: guard(ctx, createRunHandler(ctx)),
    runInput: guard(ctx, createRunInputHandler(ctx)),
    runCancel: guard(ctx, createRunCancelHandler(ctx)),
    runTakeover: guard(ctx, createRunTakeoverHandler(ctx)),
    runRelease: guard(ctx, createRunReleaseHandler(ctx)),
    runResolveEffect: guard(ctx, createRunResolveEffectHandler(ctx)),
    runRestore: guard(ctx, createRunRestoreHandler(ctx)),
    runReply: guard(ctx, createRunReplyHandler(ctx)),
    status: guard(ctx, createStatusHandler(ctx)),
    cronDrain: guard(ctx, createCronDrainHandler(ctx)),
    cronReap: guard(ctx, createCronReapHandler(ctx)),
  };
  return { ...routes, handle: createRouter(routes), segments: ctx.segments };
}
