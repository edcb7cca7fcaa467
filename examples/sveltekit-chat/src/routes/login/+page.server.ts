// Sign-in: a user name is enough in this demo (no passwords), but the session it starts is
// real: an HMAC-signed, HttpOnly cookie that no client can forge. Operators are the names in
// AGENT_KIT_OPERATORS. See ADR-0015.
import { fail, redirect } from '@sveltejs/kit';
import { startAgent } from '$lib/server/agent';
import { createSessionToken, normaliseUserName, sessionCookieName, sessionMaxAgeSeconds } from '$lib/server/session';
import type { Actions, PageServerLoad } from './$types';

/** Only same-site paths: an open redirect would let a link send a signed-in user anywhere. */
function safeNext(url: URL): string {
  const next = url.searchParams.get('next') ?? '/';
  return next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/';
}

export const load: PageServerLoad = ({ locals, url }) => {
  if (locals.user) redirect(303, safeNext(url));
  return { next: safeNext(url) };
};

export const actions: Actions = {
  default: async ({ request, cookies, url }) => {
    const form = await request.formData();
    const raw = String(form.get('name') ?? '');
    const name = normaliseUserName(raw);
    if (!name) {
      return fail(400, { name: raw, message: 'Use 1–40 letters, digits, dots, dashes or underscores.' });
    }
    const { sessionSecret } = await startAgent();
    cookies.set(sessionCookieName, createSessionToken(sessionSecret, name), {
      path: '/', httpOnly: true, sameSite: 'lax', secure: url.protocol === 'https:', maxAge: sessionMaxAgeSeconds,
    });
    redirect(303, safeNext(url));
  },
};
