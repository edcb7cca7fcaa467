// GET /api/status (operators): runs in flight, expired leases, due jobs, effects in doubt, and
// what needs attention (ADR-0053). The operator page shows it above the run table.
import { agentRoute } from '$lib/server/routes';

export const GET = agentRoute('status');
