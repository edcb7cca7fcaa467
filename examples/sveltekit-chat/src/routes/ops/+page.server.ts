// The operator page's data: a page of runs (the newest, or with ?before=RUN those after it; all,
// or with ?thread=ID one thread's) and, with ?run=ID, that run in detail.
// Only operators see it; for anyone else the page does not exist (404), like a foreign thread.
import { error, redirect } from '@sveltejs/kit';
import { requireUser } from '$lib/server/pages';
import { opsHref, readOps, readOpsQuery, StaleRunsPageError } from '$lib/ops-types';
import type { PageServerLoad } from './$types';

export const load: PageServerLoad = async (event) => {
  const user = requireUser(event);
  if (!user.isOperator) error(404, 'Not found');
  // The page refreshes itself with the same read in the browser (ADR-0037).
  const query = readOpsQuery(event.url);
  const ops = await readOps(event.fetch, query).catch((raw: unknown) => {
    // A page of runs whose first run is gone (or never was one): the newest runs instead.
    if (raw instanceof StaleRunsPageError) redirect(303, opsHref({ ...query, before: null }));
    return error(502, raw instanceof Error ? raw.message : String(raw));
  });
  // Lease expiry is database time; the page counts down against this server's clock.
  return { ...ops, serverNowMs: Date.now() };
};
