// GET /api/threads/:id/events: SSE replay from Last-Event-ID or ?after=, then live.
import { agentRoute } from '$lib/server/routes';

export const GET = agentRoute('threadEvents');
