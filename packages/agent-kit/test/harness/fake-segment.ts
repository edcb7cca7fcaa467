// A stand-in for the turn engine in event-log and HTTP tests: it claims the run through the real
// lease API, mirrors a few text deltas, and closes (or parks) the run, so real events flow with
// real fences. Honours a stored cancel the way the engine does: by closing the run as aborted.
import crypto from 'node:crypto';
import { beginSegment, claimRun, closeRun, mirrorPartial, parkRun } from '../../src/lease/lease.js';
import type { RunSegment, SegmentOutcome } from '../../src/turn/types.js';

export interface FakeSegmentOptions {
  /** Text deltas to mirror, in order (default: three words). */
  deltas?: string[];
  /** Pause before each delta, so a viewer can connect mid-stream. */
  delayMs?: number;
  /** Park waiting for an answer to this question instead of closing (unless the run got one). */
  askQuestionId?: string;
  /** Awaited after the claim and before the first delta: lets a test act mid-segment. */
  gate?: Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A RunSegment that streams `deltas` under a real lease. Counts its calls in `calls`. */
export function fakeRunSegment(options: FakeSegmentOptions = {}): RunSegment & { calls: string[] } {
  const deltas = options.deltas ?? ['Hello', ', ', 'world.'];
  const calls: string[] = [];
  const run: RunSegment = async (rt, segment): Promise<SegmentOutcome> => {
    calls.push(segment.runId);
    // A drain's batch claim may have begun the segment already.
    const claim = segment.preClaimed?.claim
      ?? await claimRun(rt.db, { runId: segment.runId, owner: segment.owner, leaseTtlMs: 60_000 });
    if (!claim.claimed) return { kind: 'not-claimed', reason: claim.reason };
    const { lease } = claim;
    const begun = segment.preClaimed?.claim.begun !== undefined || (await beginSegment(rt.db, lease, claim.run.partial)) !== null;
    if (!begun) return { kind: 'lost', fence: lease.fence };
    await options.gate;
    const answered = await rt.db.query('select 1 from agent_kit_inputs where run_id = $1', [lease.runId]);
    if (claim.run.cancelRequestedAt === null && !(options.askQuestionId && answered.length === 0)) {
      for (const delta of deltas) {
        if (options.delayMs) await sleep(options.delayMs);
        const mirrored = await mirrorPartial(rt.db, lease, delta);
        if (!mirrored.ok) return { kind: 'lost', fence: lease.fence };
        if (mirrored.interrupt === 'cancel') break;
      }
    }
    const [state] = await rt.db.query<{ partial: string; cancel: boolean }>(
      'select partial, cancel_requested_at is not null as cancel from agent_kit_runs where id = $1',
      [lease.runId],
    );
    if (options.askQuestionId && answered.length === 0 && !state!.cancel) {
      const waitingFor = { id: options.askQuestionId, kind: 'question', question: 'Which account?' };
      const parked = await parkRun(rt.db, lease, 'waiting_input', waitingFor);
      return parked ? { kind: 'parked', status: 'waiting_input', fence: lease.fence } : { kind: 'lost', fence: lease.fence };
    }
    const status = state!.cancel ? 'aborted' : 'completed';
    const messageId = await closeRun(rt.db, lease, status, { text: state!.partial });
    if (!messageId) return { kind: 'lost', fence: lease.fence };
    return { kind: 'closed', status, messageId, fence: lease.fence };
  };
  return Object.assign(run, { calls });
}

/** A unique lease owner for a test segment. */
export function testOwner(): string {
  return `test-${crypto.randomBytes(4).toString('hex')}`;
}
