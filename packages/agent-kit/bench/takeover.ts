// Section 3: takeover latency with the worker loop. A "kill" is a segment that claims its run with
// a short lease, starts, and then does nothing more (no renewal: the process is gone). The worker
// loop must notice the expiry, requeue the run and resume it under the next fence. Latency = the
// resumed segment's first event (segment-started, fence + 1) minus the dead lease's expiry, both
// in database time.
import { beginSegment, claimRun } from '../src/lease/lease.js';
import { startTurn } from '../src/queue/start-turn.js';
import type { Db } from '../src/store/db.js';
import { runWorker } from '../src/worker/index.js';
import { percentile, sleep, waitFor } from './lib/measure.js';
import type { Row } from './lib/report.js';
import { benchRuntime, clearQueue } from './orchestration.js';

export interface TakeoverOptions {
  kills: number;
  /** The dead segments' lease TTL. */
  leaseTtlMs: number;
  /** Time between two kills: expiries spread out as crashes do. */
  spacingMs: number;
  /** Worker concurrency. */
  concurrency: number;
}

interface Kill {
  runId: string;
  fence: number;
}

/** Start a turn and kill its first segment: claimed with a short lease, started, abandoned. */
async function killOne(db: Db, o: TakeoverOptions, n: number): Promise<Kill> {
  // The job is delayed so the worker leaves it to the dead segment, which claims it directly.
  const turn = await startTurn(db, { ownerId: 'bench-takeover', text: `takeover ${n}`, jobDelayMs: 600_000 });
  const claim = await claimRun(db, { runId: turn.runId, owner: `dead-${n}`, leaseTtlMs: o.leaseTtlMs });
  if (!claim.claimed) throw new Error(`the dead segment could not claim its run: ${claim.reason}`);
  await beginSegment(db, claim.lease, '');
  return { runId: turn.runId, fence: claim.lease.fence };
}

/** Milliseconds from each dead lease's expiry to the next fence's segment-started event. */
async function latencies(db: Db, kills: Kill[]): Promise<(number | null)[]> {
  const rows = await db.query<{ run_id: string; ms: number | null }>(
    `select k.run_id, (select extract(epoch from e.created_at - k.expires_at) * 1000
         from agent_kit_thread_events e
         where e.thread_id = r.thread_id and e.run_id = k.run_id and e.type = 'segment-started'
           and e.fence = k.fence + 1 order by e.seq limit 1)::float8 as ms
     from jsonb_to_recordset($1::jsonb) as k(run_id uuid, fence bigint, expires_at timestamptz)
     join agent_kit_runs r on r.id = k.run_id`,
    [JSON.stringify(await withExpiries(db, kills))],
  );
  return rows.map((r) => (r.ms === null ? null : Number(r.ms)));
}

/** Each kill's expiry as the database recorded it in the dead segment's segment-started event. */
async function withExpiries(db: Db, kills: Kill[]) {
  const rows = await db.query<{ run_id: string; expires_at: string }>(
    `select run_id, data->>'leaseExpiresAt' as expires_at from agent_kit_thread_events
     where type = 'segment-started' and fence = 1 and run_id = any($1::uuid[])`,
    [kills.map((k) => k.runId)],
  );
  const expiry = new Map(rows.map((r) => [r.run_id, r.expires_at]));
  return kills.map((k) => ({ run_id: k.runId, fence: k.fence, expires_at: expiry.get(k.runId) }));
}

/** Run section 3 and return its rows. */
export async function benchTakeover(db: Db, o: TakeoverOptions): Promise<Row[]> {
  await clearQueue(db);
  const stop = new AbortController();
  // The worker runs with the dead segments' lease TTL, as one deployment's processes share it.
  const rt = benchRuntime(db);
  const worker = runWorker({ ...rt, config: { ...rt.config, leaseTtlMs: o.leaseTtlMs } }, { signal: stop.signal, concurrency: o.concurrency });
  const kills: Kill[] = [];
  let ms: (number | null)[] = [];
  try {
    await sleep(200); // the worker's LISTEN and first passes
    for (let n = 0; n < o.kills; n++) {
      kills.push(await killOne(db, o, n));
      await sleep(o.spacingMs);
    }
    await waitFor(async () => (await latencies(db, kills)).every((v) => v !== null), o.leaseTtlMs + 30_000, 100);
    ms = await latencies(db, kills);
  } finally {
    stop.abort();
    await worker;
  }
  const measured = ms.filter((v): v is number => v !== null);
  const section = `3. Takeover with the worker loop (${o.kills} kills, lease ${o.leaseTtlMs} ms)`;
  const note = `${measured.length}/${o.kills} resumed; expiry → segment-started of fence + 1, database time`;
  return [
    { section, metric: 'takeover p50 past expiry', unit: 'ms', agentKit: percentile(measured, 0.5), note },
    {
      section, metric: 'takeover p99 past expiry', unit: 'ms',
      agentKit: measured.length === o.kills ? percentile(measured, 0.99) : Number.POSITIVE_INFINITY,
      target: { kind: 'at-most', value: 250 }, note,
    },
  ];
}
