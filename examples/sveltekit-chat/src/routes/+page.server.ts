// The chat's start page: a new thread. Signed-out visitors go to /login first.
import { loadThreadLinks, requireUser } from '$lib/server/pages';
import type { PageServerLoad } from './$types';

export const load: PageServerLoad = async (event) => {
  requireUser(event);
  return await loadThreadLinks(event.fetch);
};
