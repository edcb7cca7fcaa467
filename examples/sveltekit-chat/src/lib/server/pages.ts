// Shared by the page loads: sign-in redirects and API reads through SvelteKit's `fetch`, which
// calls our own /api routes in-process with the caller's cookie. So pages and API enforce the
// same access rule: agent-kit's, where another user's thread is "not found".
import { error, redirect, type RequestEvent } from '@sveltejs/kit';
import { threadPageSize } from '$lib/older-threads.svelte';
import type { ThreadLink } from '$lib/sidebar';

/** Send a signed-out visitor to /login, back here afterwards. */
export function requireUser(event: Pick<RequestEvent, 'locals' | 'url'>) {
  const { user } = event.locals;
  if (!user) redirect(303, `/login?next=${encodeURIComponent(event.url.pathname + event.url.search)}`);
  return user;
}

/** GET an API route as the caller; 404s pass through as page 404s, other failures as 502. */
export async function fetchApi<T>(fetch: RequestEvent['fetch'], path: string): Promise<T> {
  const response = await fetch(path);
  // A malformed id (400) is as unknown as a missing or foreign one.
  if (response.status === 404 || response.status === 400) error(404, 'Not found');
  if (!response.ok) error(502, `${path} answered ${response.status}`);
  return (await response.json()) as T;
}

/** The caller's newest threads for the sidebar, and the cursor of the older ones (or null). */
export async function loadThreadLinks(
  fetch: RequestEvent['fetch'],
): Promise<{ threads: ThreadLink[]; threadsNext: string | null }> {
  const { threads, next } = await fetchApi<{ threads: ThreadLink[]; next: string | null }>(
    fetch, `/api/threads?limit=${threadPageSize}`);
  return { threads: threads.map(({ id, title, lastRunStatus }) => ({ id, title, lastRunStatus })), threadsNext: next };
}
