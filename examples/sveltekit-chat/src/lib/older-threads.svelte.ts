// The sidebar's older threads, read a page at a time when asked for (GET /api/threads?before=,
// ADR-0044). Module state, not the list's own: the chat page is keyed on its thread, so a
// component's state would forget the older threads at every move to one of them. Only the
// browser writes it (a click); the server renders the first page alone.
import { sidebarThreads, type OlderThreads, type ThreadLink } from './sidebar';

export const olderThreads = $state<{ pages: OlderThreads | null; loading: boolean; failed: boolean }>({
  pages: null, loading: false, failed: false,
});

/** How many threads a page of the sidebar holds (the first page's load asks for as many). */
export const threadPageSize = 30;

/** Read the page after what the sidebar shows for `first` (ending at `firstNext`) and keep it. */
export async function loadOlderThreads(first: ThreadLink[], firstNext: string | null): Promise<void> {
  const shown = sidebarThreads(first, firstNext, olderThreads.pages);
  if (!shown.next || !firstNext || olderThreads.loading) return;
  olderThreads.loading = true;
  olderThreads.failed = false;
  try {
    const response = await fetch(`/api/threads?limit=${threadPageSize}&before=${encodeURIComponent(shown.next)}`);
    if (!response.ok) throw new Error(`/api/threads answered ${response.status}`);
    const body = (await response.json()) as { threads: ThreadLink[]; next: string | null };
    const kept = olderThreads.pages?.after === firstNext ? olderThreads.pages.links : [];
    const links = linksOf(body.threads);
    olderThreads.pages = { after: firstNext, links: [...kept, ...links], next: body.next };
  } catch {
    olderThreads.failed = true;
  } finally {
    olderThreads.loading = false;
  }
}

const linksOf = (threads: ThreadLink[]): ThreadLink[] => threads.map(({ id, title, lastRunStatus }) => ({ id, title, lastRunStatus }));

/**
 * The sidebar's first page read again (a run of the open thread parked or closed: its status
 * changed), or null when the read failed. Not the page's `invalidateAll()`: a data request that
 * fails (offline, the server restarting) makes SvelteKit leave the page for the browser's error
 * page, and the draft in the composer with it; a failed read here keeps what is shown.
 */
export async function readFirstThreads(): Promise<{ threads: ThreadLink[]; next: string | null } | null> {
  try {
    const response = await fetch(`/api/threads?limit=${threadPageSize}`);
    if (!response.ok) return null;
    const body = (await response.json()) as { threads: ThreadLink[]; next: string | null };
    return { threads: linksOf(body.threads), next: body.next };
  } catch {
    return null;
  }
}
