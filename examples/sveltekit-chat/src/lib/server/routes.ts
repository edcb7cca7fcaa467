// SvelteKit glue for agent-kit's framework-free handlers: each +server.ts exports one of these.
// The request handed on carries the shutdown signal too, so open event streams end when the
// server stops and adapter-node's graceful close does not wait out its timeout.
import type { RequestHandler } from '@sveltejs/kit';
import type { RouteName } from 'agent-kit/http';
import { toSvelteKit } from 'agent-kit/sveltekit';
import { startAgent } from './agent';

/** A SvelteKit handler that runs agent-kit's handler `name` with the route's parameters. */
export function agentRoute(name: RouteName): RequestHandler {
  return toSvelteKit(async (request, params) => {
    const app = await startAgent();
    const signal = AbortSignal.any([request.signal, app.shutdownSignal]);
    return app.handlers[name](new Request(request, { signal }), params);
  });
}
