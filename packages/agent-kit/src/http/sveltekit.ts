// SvelteKit glue: a +server.ts becomes one line, e.g.
//   export const POST = toSvelteKit(handlers.chat);
// SvelteKit hands us a Web Request and the route's params; the handler returns a Web Response
// (SSE bodies stream unbuffered from a +server.ts).
import type { RouteHandler } from './context.js';

/** The part of SvelteKit's RequestEvent a handler needs. */
export interface SvelteKitEvent {
  request: Request;
  params: Partial<Record<string, string>>;
}

/** Adapt a framework-free handler to a SvelteKit RequestHandler. */
export function toSvelteKit(handler: RouteHandler): (event: SvelteKitEvent) => Promise<Response> {
  return (event) => handler(event.request, event.params);
}

export { createHandlers, type Handlers } from './handlers.js';
export type { HandlerDeps, RouteHandler } from './context.js';
export type { Caller, Authenticate } from './auth.js';
