// POST /api/runs/:id/release (operator): hand the run back to the agent.
import { agentRoute } from '$lib/server/routes';

export const POST = agentRoute('runRelease');
