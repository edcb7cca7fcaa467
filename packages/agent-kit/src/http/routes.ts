// The route table of DESIGN.md §5 and a small router over it, for servers without their own
// (node:http, Bun, Deno, workers): `handle(request)` finds the route, checks the method, and
// calls the handler with the path parameters. Unknown paths are 404, wrong methods 405.
import type { RouteHandler } from './context.js';
import { errorResponse } from './http-error.js';
import { HttpError } from './http-error.js';

/** Handler names, one per route. */
export type RouteName =
  | 'chat' | 'threads' | 'thread' | 'threadEvents' | 'runs' | 'run'
  | 'runInput' | 'runCancel' | 'runTakeover' | 'runRelease' | 'runResolveEffect' | 'runRestore' | 'runReply' | 'status' | 'cronDrain'
  | 'cronReap';

export interface Route {
  methods: readonly string[];
  /** Path with `:param` segments, e.g. `/api/threads/:id/events`. */
  path: string;
  name: RouteName;
}

export const routes: readonly Route[] = [
  { methods: ['POST'], path: '/api/chat', name: 'chat' },
  { methods: ['GET'], path: '/api/threads', name: 'threads' },
  { methods: ['GET'], path: '/api/threads/:id', name: 'thread' },
  { methods: ['GET'], path: '/api/threads/:id/events', name: 'threadEvents' },
  { methods: ['GET'], path: '/api/runs', name: 'runs' },
  { methods: ['GET'], path: '/api/runs/:id', name: 'run' },
  { methods: ['POST'], path: '/api/runs/:id/input', name: 'runInput' },
  { methods: ['POST'], path: '/api/runs/:id/cancel', name: 'runCancel' },
  { methods: ['POST'], path: '/api/runs/:id/takeover', name: 'runTakeover' },
  { methods: ['POST'], path: '/api/runs/:id/release', name: 'runRelease' },
  { methods: ['POST'], path: '/api/runs/:id/resolve-effect', name: 'runResolveEffect' },
  { methods: ['POST'], path: '/api/runs/:id/restore', name: 'runRestore' },
  { methods: ['POST'], path: '/api/runs/:id/reply', name: 'runReply' },
  { methods: ['GET'], path: '/api/status', name: 'status' },
  { methods: ['GET', 'POST'], path: '/api/cron/drain', name: 'cronDrain' },
  { methods: ['GET', 'POST'], path: '/api/cron/reap', name: 'cronReap' },
];

/** Match `pathname` against a route path; the decoded parameters, or null. */
export function matchPath(path: string, pathname: string): Record<string, string> | null {
  const want = path.split('/');
  const got = pathname.replace(/\/+$/, '').split('/');
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const segment = want[i]!;
    if (segment.startsWith(':')) {
      try {
        params[segment.slice(1)] = decodeURIComponent(got[i]!);
      } catch {
        return null; // a malformed escape matches no route
      }
    } else if (segment !== got[i]) {
      return null;
    }
  }
  return params;
}

/** A router over `handlers`: one function from Request to Response for plain servers. */
export function createRouter(
  handlers: Record<RouteName, RouteHandler>,
): (request: Request) => Promise<Response> {
  return async (request) => {
    const { pathname } = new URL(request.url);
    let allowed: string[] | undefined;
    for (const route of routes) {
      const params = matchPath(route.path, pathname);
      if (!params) continue;
      if (route.methods.includes(request.method)) return handlers[route.name](request, params);
      allowed = [...(allowed ?? []), ...route.methods];
    }
    if (allowed) {
      const error = new HttpError('METHOD_NOT_ALLOWED', `${request.method} is not allowed here`);
      const response = errorResponse(error);
      response.headers.set('allow', allowed.join(', '));
      return response;
    }
    return errorResponse(new HttpError('NOT_FOUND', `no route for ${request.method} ${pathname}`));
  };
}
