// One thread's page. The thread must be the caller's (or the caller an operator): otherwise the
// API answers 404 and so does this page, without saying whether the thread exists.
import { fetchApi, loadThreadLinks, requireUser } from '$lib/server/pages';
import type { PageServerLoad } from './$types';

export const load: PageServerLoad = async (event) => {
  requireUser(event);
  const { thread } = await fetchApi<{ thread: { id: string; title: string | null; lastSeq: number } }>(
    event.fetch, `/api/threads/${encodeURIComponent(event.params.threadId)}`,
  );
  return {
    thread: { id: thread.id, title: thread.title, lastSeq: thread.lastSeq },
    ...(await loadThreadLinks(event.fetch)),
  };
};
