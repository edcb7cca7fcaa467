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
    const links = body.threads.map(({ id, title, lastRunStatus }) => ({ id, title, lastRunStatus }));
    olderThreads.pages = { after: firstNext, links: [...kept, ...links], next: body.next };
  } catch {
    olderThreads.failed = true;
  } finally {
    olderThreads.loading = false;
  }
}
