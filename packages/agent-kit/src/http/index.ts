// agent-kit/http: framework-free HTTP handlers (Web Request → Response) for every route of
// DESIGN.md §5, the SSE and AI SDK stream encoders, and node:http glue.
export { createHandlers, type Handlers } from './handlers.js';
export type { HandlerDeps, RouteHandler, DrainQueue, ReapExpiredRuns } from './context.js';
export type { Caller, Authenticate } from './auth.js';
export { routes, matchPath, createRouter, type Route, type RouteName } from './routes.js';
export {
  HttpError, statusByErrorCode, jsonResponse, errorResponse, type HttpErrorCode,
} from './http-error.js';
export {
  sseHeaders, formatSseEvent, eventPayload, createEventEncoder, eventStreamResponse,
  type SseEncoder, type EventStreamOptions,
} from './sse.js';
export {
  UIMessageTranslator, createUIMessageStreamEncoder, uiMessageStreamHeaders,
} from './ai-sdk-stream.js';
export {
  defaultMaxBodyBytes, chatBodySchema, inputBodySchema, type ChatBody, type InputBody,
} from './request.js';
export type { SegmentRegistry } from './segments.js';
export { toNodeListener } from './node-server.js';
export { toSvelteKit, type SvelteKitEvent } from './sveltekit.js';
