// GET /api/threads: the signed-in user's threads, newest first.
import { agentRoute } from '$lib/server/routes';

export const GET = agentRoute('threads');
