// One thread's page. The thread must be the caller's (or the caller an operator): otherwise the
// API answers 404 and so does this page, without saying whether the thread exists.
import { fetchApi, loadThreadLinks, requireUser } from '$lib/server/pages';
import { turnsPerPage, type TurnsOpening } from '$lib/thread-view';
import type { PageServerLoad } from './$types';

export const load: PageServerLoad = async (event) => {
  requireUser(event);
  // The latest turns only (ADR-0049): the page replays the log from their first seq.
  const { thread, window } = await fetchApi<{
    thread: { id: string; title: string | null; lastSeq: number };
    window: TurnsOpening;
  }>(event.fetch, `/api/threads/${encodeURIComponent(event.params.threadId)}?turns=${turnsPerPage}`);
  return {
    thread: { id: thread.id, title: thread.title, lastSeq: thread.lastSeq },
    opening: { fromSeq: window.fromSeq, firstTurn: window.firstTurn, earlier: window.earlier },
    ...(await loadThreadLinks(event.fetch)),
  };
};
