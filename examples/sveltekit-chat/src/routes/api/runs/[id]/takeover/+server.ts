// POST /api/runs/:id/takeover (operator): park the run for a human.
import { agentRoute } from '$lib/server/routes';

export const POST = agentRoute('runTakeover');
