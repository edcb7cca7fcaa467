// GET /api/runs: runs with lease holder, fence, attempts and expiry (all of them for operators).
import { agentRoute } from '$lib/server/routes';

export const GET = agentRoute('runs');
