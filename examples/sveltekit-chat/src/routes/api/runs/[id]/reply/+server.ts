// POST /api/runs/:id/reply (operator): answer in a held run's place (ADR-0114).
import { agentRoute } from '$lib/server/routes';

export const POST = agentRoute('runReply');
