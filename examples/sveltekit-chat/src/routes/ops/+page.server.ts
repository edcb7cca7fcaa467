// The operator page's data: every run (newest first) and, with ?run=ID, that run in detail.
// Only operators see it; for anyone else the page does not exist (404), like a foreign thread.
import { error } from '@sveltejs/kit';
import { fetchApi, requireUser } from '$lib/server/pages';
import type { OpsRun, OpsRunDetail } from '$lib/ops-types';
import type { PageServerLoad } from './$types';

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const load: PageServerLoad = async (event) => {
  const user = requireUser(event);
  if (!user.isOperator) error(404, 'Not found');
  event.depends('app:runs');
  const { runs } = await fetchApi<{ runs: OpsRun[] }>(event.fetch, '/api/runs?limit=50');
  const selectedId = event.url.searchParams.get('run');
  let selected: OpsRunDetail | null = null;
  if (selectedId && uuidPattern.test(selectedId)) {
    const response = await event.fetch(`/api/runs/${selectedId}`);
    if (response.ok) selected = (await response.json()) as OpsRunDetail;
  }
  // Lease expiry is database time; the page counts down against this server's clock.
  return { runs, selected, serverNowMs: Date.now() };
};
