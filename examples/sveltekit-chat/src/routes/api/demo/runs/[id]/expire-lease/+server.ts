// DEMO ONLY: "kill the segment" — expire a running run's lease now, as if its process had died.
// The holder's next renewal is refused (it stops, writing nothing more), the in-process reaper
// requeues the run and the drain claims it with the next fence: attempt 2 continues the turn.
// Operators only; off with AGENT_KIT_DEMO_CONTROLS=0. A real app has no such route.
import { error, json } from '@sveltejs/kit';
import { startAgent } from '$lib/server/agent';
import { demoControlsEnabled } from '$lib/server/settings';
import type { RequestHandler } from './$types';

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const POST: RequestHandler = async ({ locals, params }) => {
  if (!demoControlsEnabled() || !locals.user?.isOperator) error(404, 'Not found');
  if (!uuidPattern.test(params.id)) error(400, 'run id must be a uuid');
  const { rt } = await startAgent();
  // Database time, like every lease comparison (ADR-0004); only a running run has a lease.
  const rows = await rt.db.query<{ fence: number | string; owner: string | null }>(
    `update agent_kit_runs set lease_expires_at = agent_kit_now()
     where id = $1 and status = 'running' returning fence, owner`,
    [params.id],
  );
  if (rows.length === 0) error(409, 'the run is not running, so it holds no lease to expire');
  return json({ runId: params.id, expired: true, fence: Number(rows[0]!.fence), owner: rows[0]!.owner });
};
