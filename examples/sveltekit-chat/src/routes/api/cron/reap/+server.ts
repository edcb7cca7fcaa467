// GET or POST /api/cron/reap (Bearer CRON_SECRET): one reaper pass.
// GET too, since platform schedulers (Vercel Cron) call with GET. 503 until CRON_SECRET is set.
import { agentRoute } from '$lib/server/routes';

export const GET = agentRoute('cronReap');
export const POST = GET;
