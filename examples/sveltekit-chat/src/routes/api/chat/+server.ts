// POST /api/chat: store the message, run the turn in the background, stream the thread (SSE).
import { agentRoute } from '$lib/server/routes';

export const POST = agentRoute('chat');
