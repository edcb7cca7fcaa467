// The operator page's data: every run (newest first) and, with ?run=ID, that run in detail.
// Only operators see it; for anyone else the page does not exist (404), like a foreign thread.
import { error } from '@sveltejs/kit';
import { requireUser } from '$lib/server/pages';
import { readOps, readOpsQuery } from '$lib/ops-types';
import type { PageServerLoad } from './$types';

export const load: PageServerLoad = async (event) => {
  const user = requireUser(event);
  if (!user.isOperator) error(404, 'Not found');
  // The page refreshes itself with the same read in the browser (ADR-0037).
  const ops = await readOps(event.fetch, readOpsQuery(event.url)).catch((raw: unknown) =>
    error(502, raw instanceof Error ? raw.message : String(raw)));
  // Lease expiry is database time; the page counts down against this server's clock.
  return { ...ops, serverNowMs: Date.now() };
};
