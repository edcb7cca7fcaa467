// GET /api/runs/:id: one run with its effects, journal steps, segments and messages.
import { agentRoute } from '$lib/server/routes';

export const GET = agentRoute('run');
