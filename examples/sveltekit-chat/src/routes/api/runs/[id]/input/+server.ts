// POST /api/runs/:id/input {questionId, answer | approved}: answer a waiting run.
import { agentRoute } from '$lib/server/routes';

export const POST = agentRoute('runInput');
