// POST /api/runs/:id/restore: put an earlier answer back in the conversation (ADR-0096).
import { agentRoute } from '$lib/server/routes';

export const POST = agentRoute('runRestore');
