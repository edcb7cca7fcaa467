// Server hooks: start agent-kit (store, migrations, runtime, worker) before the first request,
// and resolve each request's signed session cookie into `locals.user`. See ADR-0015.
import type { Handle, ServerInit } from '@sveltejs/kit';
import { startAgent } from '$lib/server/agent';
import { sessionCookieName } from '$lib/server/session';

export const init: ServerInit = async () => {
  await startAgent();
};

export const handle: Handle = async ({ event, resolve }) => {
  const app = await startAgent();
  event.locals.user = app.userFromToken(event.cookies.get(sessionCookieName));
  return resolve(event);
};
