// GET or POST /api/cron/drain (Bearer CRON_SECRET): one invocation's worth of drain.
// GET too, since platform schedulers (Vercel Cron) call with GET. 503 until CRON_SECRET is set.
import { agentRoute } from '$lib/server/routes';

export const GET = agentRoute('cronDrain');
export const POST = GET;
