// The sidebar's list of threads: the first page from the page's load, and older pages read on
// request (older-threads.svelte.ts).

/** A thread in the sidebar (a subset of GET /api/threads). */
export interface ThreadLink {
  id: string;
  title: string | null;
  lastRunStatus: string | null;
}

/** Older pages of the sidebar, read after `after`, the cursor that ended the first page. */
export interface OlderThreads {
  after: string;
  links: ThreadLink[];
  /** The cursor of the page after these, or null when they reach the oldest thread. */
  next: string | null;
}

/**
 * The sidebar: the first page (from the page's load) and the older pages read since, while they
 * still follow it. A first page that now ends elsewhere (a new thread pushed one off it, or
 * another user signed in) drops them: joined to it they could skip a thread or repeat one.
 */
export function sidebarThreads(
  first: ThreadLink[], firstNext: string | null, older: OlderThreads | null,
): { links: ThreadLink[]; next: string | null } {
  if (!older || firstNext === null || older.after !== firstNext) return { links: first, next: firstNext };
  const shown = new Set(first.map((thread) => thread.id));
  return { links: [...first, ...older.links.filter((thread) => !shown.has(thread.id))], next: older.next };
}

/**
 * What the sidebar says of a thread whose latest run has not completed, in the words the reply
 * itself uses (the operator page keeps the status names), or null for a completed one.
 */
export function threadStatusLabel(status: string | null): string | null {
  switch (status) {
    case null: case 'completed': return null;
    case 'running': return 'replying';
    case 'waiting_input': return 'waiting for you';
    case 'waiting_takeover': return 'held by an operator';
    case 'aborted': return 'stopped';
    default: return status.replace('_', ' ');
  }
}
