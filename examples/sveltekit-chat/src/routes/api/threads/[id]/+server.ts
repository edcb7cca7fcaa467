// GET /api/threads/:id: one thread's messages and runs (404 unless yours or you operate).
import { agentRoute } from '$lib/server/routes';

export const GET = agentRoute('thread');
