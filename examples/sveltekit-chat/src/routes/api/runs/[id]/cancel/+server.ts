// POST /api/runs/:id/cancel: a stored intent; the run's segment closes it as aborted.
import { agentRoute } from '$lib/server/routes';

export const POST = agentRoute('runCancel');
