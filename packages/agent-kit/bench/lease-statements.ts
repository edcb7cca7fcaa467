// Section 1: the lease statements (claim, renew, mirror write, close) at a fixed concurrency,
// each against the limit: a bare single-row UPDATE … RETURNING on a copy of agent_kit_runs (same
// columns, indexes and rows). Each caller works on its own rows, as each worker holds its own runs.
import { claimRun, closeRun, mirrorPartial, renewLease, type Lease } from '../src/lease/lease.js';
import type { Db, Queryable } from '../src/store/db.js';
import { claimInBulk, seedQueuedRuns, vacuumAnalyze } from './lib/bench-db.js';
import { measureInterleaved, type InterleavedOptions } from './lib/measure.js';
import type { Row } from './lib/report.js';

export interface LeaseBenchOptions extends InterleavedOptions {
  /** Queued runs for the claim run and claimed runs for the close run (each used once). */
  seedRuns: number;
  /** Held leases per caller for renew and mirror (cycled through). */
  leasesPerCaller: number;
}

const hourMs = 3_600_000; // long leases: nothing may expire during a measurement

function toLease(runId: string, owner: string, fence: number): Lease {
  const far = new Date(Date.now() + hourMs);
  return { runId, threadId: '', owner, fence, attempts: 1, expiresAt: far, deadlineAt: far };
}

// The limit: one row, one indexed lookup, no function, no trigger, a HOT update, one commit.
const bareUpdate = 'update bench_bare_runs set fence = fence + 1, heartbeat_at = now() where id = $1 returning fence';

const cursor = (o: LeaseBenchOptions) => new Array<number>(o.concurrency).fill(0);
/** Caller `w`'s next position in its own list. */
const step = (positions: number[], w: number) => {
  const i = positions[w]!;
  positions[w] = i + 1;
  return i;
};

/** Split `items` round-robin into `n` lists, one per caller. */
function deal<T>(items: readonly T[], n: number): T[][] {
  const hands: T[][] = Array.from({ length: n }, () => []);
  items.forEach((item, i) => hands[i % n]!.push(item));
  return hands;
}

async function prepareBareTable(db: Db) {
  await db.exec(`
    drop table if exists bench_bare_runs;
    create table bench_bare_runs (like agent_kit_runs including all);
    insert into bench_bare_runs select * from agent_kit_runs;
    analyze bench_bare_runs;`);
  const rows = await db.query<{ id: string }>('select id from bench_bare_runs');
  return rows.map((r) => r.id);
}

// The statement itself, one run per statement: a Queryable that is not a Db is never grouped.
export const oneRunAtATime = (db: Db): Queryable => ({ query: (sql, params) => db.query(sql, params) });

/** Run section 1 and return its rows (ops/s of each statement vs the bare update). */
export async function benchLeaseStatements(db: Db, o: LeaseBenchOptions): Promise<Row[]> {
  const claimIds = await seedQueuedRuns(db, o.seedRuns);
  const closeIds = await seedQueuedRuns(db, o.seedRuns);
  const groupedCloseIds = await seedQueuedRuns(db, o.seedRuns);
  const heldIds = await seedQueuedRuns(db, o.concurrency * o.leasesPerCaller);
  const closeFences = await claimInBulk(db, closeIds, 'bench-close');
  const groupedCloseFences = await claimInBulk(db, groupedCloseIds, 'bench-close');
  const heldFences = await claimInBulk(db, heldIds, 'bench-held');
  const bareIds = deal(await prepareBareTable(db), o.concurrency);
  await vacuumAnalyze(db);

  const failures = { renew: 0, mirror: 0, close: 0 };
  const oneByOne = oneRunAtATime(db);
  const claimHands = deal(claimIds, o.concurrency);
  const closeHands = deal(closeIds.map((id) => toLease(id, 'bench-close', closeFences.get(id)!)), o.concurrency);
  const groupedCloseHands = deal(
    groupedCloseIds.map((id) => toLease(id, 'bench-close', groupedCloseFences.get(id)!)), o.concurrency,
  );
  const heldHands = deal(heldIds.map((id) => toLease(id, 'bench-held', heldFences.get(id)!)), o.concurrency);
  const at = {
    bare: cursor(o), claim: cursor(o), renew: cursor(o), mirror: cursor(o), close: cursor(o), grouped: cursor(o),
  };
  if (db.kind === 'pg') await db.exec('checkpoint');

  const t = await measureInterleaved({
    'bare UPDATE': async (w) => {
      const mine = bareIds[w]!;
      await db.query(bareUpdate, [mine[step(at.bare, w) % mine.length]!]);
    },
    claim: async (w) => {
      const runId = claimHands[w]![step(at.claim, w)];
      if (!runId) return false;
      const result = await claimRun(db, { runId, owner: `bench-claim-${w}`, leaseTtlMs: hourMs });
      if (!result.claimed) throw new Error(`claim of a fresh queued run failed: ${result.reason}`);
    },
    renew: async (w) => {
      const hand = heldHands[w]!;
      if (!(await renewLease(db, hand[step(at.renew, w) % hand.length]!, hourMs))) failures.renew++;
    },
    'mirror write': async (w) => {
      const hand = heldHands[w]!;
      const lease = hand[step(at.mirror, w) % hand.length]!;
      if (!(await mirrorPartial(db, lease, 'tok ')).ok) failures.mirror++;
    },
    close: async (w) => {
      const lease = closeHands[w]![step(at.close, w)];
      if (!lease) return false;
      if ((await closeRun(oneByOne, lease, 'completed', { text: 'done' })) === null) failures.close++;
    },
    // The library's path: closes of one process that pile up go out as one statement (0017).
    'close, grouped': async (w) => {
      const lease = groupedCloseHands[w]![step(at.grouped, w)];
      if (!lease) return false;
      if ((await closeRun(db, lease, 'completed', { text: 'done' })) === null) failures.close++;
    },
  }, o);
  if (failures.renew + failures.mirror + failures.close > 0) {
    throw new Error(`guarded writes on held leases were rejected: ${JSON.stringify(failures)}`);
  }

  const bare = t['bare UPDATE'];
  const section = `1. Lease statements (${o.concurrency} clients, ops/s)`;
  const row = (metric: 'claim' | 'renew' | 'mirror write' | 'close'): Row => ({
    section, metric, unit: 'ops/s', agentKit: t[metric].perSecond,
    baseline: bare.perSecond, baselineName: 'bare UPDATE',
    target: { kind: 'ratio-at-least', value: 0.7 },
    note: `p50 ${t[metric].p50Ms.toFixed(2)} ms, p99 ${t[metric].p99Ms.toFixed(2)} ms, ${t[metric].ops} ops ` +
      `(bare: p50 ${bare.p50Ms.toFixed(2)} ms, ${bare.ops} ops)`,
  });
  const grouped = t['close, grouped'];
  return [row('claim'), row('renew'), row('mirror write'), row('close'), {
    section, metric: 'close through the library, grouped (informational)', unit: 'ops/s', agentKit: grouped.perSecond,
    baseline: bare.perSecond, baselineName: 'bare UPDATE',
    note: `closeRun from ${o.concurrency} callers on one Db: closes that pile up share a statement (ADR-0021); ` +
      `p50 ${grouped.p50Ms.toFixed(2)} ms, p99 ${grouped.p99Ms.toFixed(2)} ms, ${grouped.ops} ops`,
  }];
}
