// DEMO ONLY: "kill the segment" — expire a running run's lease now, as if its process had died.
// The holder's next renewal is refused (it stops, writing nothing more), the in-process reaper
// requeues the run and the drain claims it with the next fence: attempt 2 continues the turn.
// The kill is marked on the killed segment's fence so that the operator's timeline tells it
// from a lease that ran out (ADR-0038). Operators only; off with AGENT_KIT_DEMO_CONTROLS=0. A
// real app has no such route.
import { error, json } from '@sveltejs/kit';
import { notifyThread, toNumber } from 'agent-kit';
import { startAgent } from '$lib/server/agent';
import { demoControlsEnabled } from '$lib/server/settings';
import { segmentKilledEventType } from '$lib/run-timeline';
import type { RequestHandler } from './$types';

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const POST: RequestHandler = async ({ locals, params }) => {
  const operator = locals.user;
  if (!demoControlsEnabled() || !operator?.isOperator) error(404, 'Not found');
  if (!uuidPattern.test(params.id)) error(400, 'run id must be a uuid');
  const { rt } = await startAgent();
  // One transaction: the lease expires and its segment is marked killed, or neither. Expiry
  // first, then the mark, in the order every writer locks (the run, then its thread). The mark
  // goes through agent-kit's guarded append (owner and fence), which holds: an expired lease is
  // still this segment's until the reaper takes the run, and the reaper waits for our lock.
  const killed = await rt.db.transaction(async (tx) => {
    // Database time, like every lease comparison (ADR-0004); only a running run has a lease.
    const [run] = await tx.query<{ thread_id: string; fence: number | string; owner: string | null }>(
      `update agent_kit_runs set lease_expires_at = agent_kit_now()
       where id = $1 and status = 'running' returning thread_id, fence, owner`,
      [params.id],
    );
    if (!run) return null;
    const fence = toNumber(run.fence);
    const data = { runId: params.id, fence, operator: operator.name };
    const [mark] = await tx.query<{ seq: number | string | null }>(
      'select agent_kit_append_event($1, $2, $3, $4, $5::jsonb) as seq',
      [params.id, run.owner, fence, segmentKilledEventType, JSON.stringify(data)],
    );
    return { threadId: String(run.thread_id), fence, owner: run.owner, seq: mark?.seq ?? null };
  });
  if (!killed) error(409, 'the run is not running, so it holds no lease to expire');
  // After the commit, as agent-kit's own appends do: viewers (the timeline) hear the mark now.
  if (killed.seq !== null) notifyThread(rt.db, killed.threadId, toNumber(killed.seq));
  const { fence, owner, seq } = killed;
  return json({ runId: params.id, expired: true, fence, owner, marked: seq !== null });
};
