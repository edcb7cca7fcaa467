// POST /api/runs/:id/resolve-effect (operator): record whether an effect in doubt happened.
import { agentRoute } from '$lib/server/routes';

export const POST = agentRoute('runResolveEffect');
