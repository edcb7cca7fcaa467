// POST /logout: forget the session cookie and go back to the sign-in page. POST only, so a
// link or an image on another site cannot sign a user out.
import { redirect } from '@sveltejs/kit';
import { sessionCookieName } from '$lib/server/session';
import type { RequestHandler } from './$types';

export const POST: RequestHandler = ({ cookies }) => {
  cookies.delete(sessionCookieName, { path: '/' });
  redirect(303, '/login');
};
