// Section 2a as rows: agent-kit's null turn through the worker loop against no-op jobs in
// graphile-worker (defaults; fastest) and pg-boss (defaults; batched), same database and
// concurrency. agent-kit and the peer it must match alternate over `rounds`, so drift in the
// machine's speed falls on both.
import type { Db } from '../src/store/db.js';
import type { DrainResult } from './lib/drain-measure.js';
import type { Row } from './lib/report.js';
import { drainWithWorker, nullTurn, type WorkerDrainResult } from './orchestration.js';
import { measureBatchedNullTurns, installBatchedDrain } from './batched-drain.js';
import { bossDefaults, drainBossNoop, drainGraphileNoop, graphileLocalQueueSize } from './peers.js';

export interface ThroughputOptions {
  concurrency: number;
  jobs: number;
  /** Bound on one drain; pg-boss with its defaults is poll-bound and is measured by this box. */
  timeBoxMs: number;
  slowTimeBoxMs: number;
  rounds: number;
}

/** Sum of drains: jobs over time. */
function pooled(results: DrainResult[]): DrainResult {
  const done = results.reduce((s, r) => s + r.done, 0);
  const elapsedMs = results.reduce((s, r) => s + r.elapsedMs, 0);
  return { done, elapsedMs, perSecond: (done * 1000) / elapsedMs, drained: results.every((r) => r.drained) };
}

function describeRoundTrips(r: WorkerDrainResult): string {
  const parts = Object.entries(r.roundTripsPerRun)
    .filter(([label, n]) => label !== 'total' && n >= 0.01)
    .map(([label, n]) => `${label} ${n.toFixed(2)}`);
  const commits = r.commitsPerRun === undefined ? '' : `, ${r.commitsPerRun.toFixed(2)} commits/run`;
  return `${r.roundTripsPerRun.total!.toFixed(2)} round trips/run (${parts.join(', ')})${commits}; ${describeCpu(r)}`;
}

/** CPU per run in the bench process and on the rest of the machine (Postgres, kernel). */
export function describeCpu(r: { processCpuMsPerRun: number; restCpuMsPerRun?: number }): string {
  const rest = r.restCpuMsPerRun === undefined ? '' : `, rest of the machine ${r.restCpuMsPerRun.toFixed(2)} ms`;
  return `CPU per run: Node ${r.processCpuMsPerRun.toFixed(2)} ms${rest}`;
}

/** Run section 2a and return its rows; `evidence` gets the per-run round trips and commits. */
export async function benchOrchestration(
  db: Db, url: string, o: ThroughputOptions, evidence: Record<string, unknown>,
): Promise<Row[]> {
  const peer = { url, concurrency: o.concurrency, jobs: o.jobs, timeBoxMs: o.timeBoxMs };
  const ak: WorkerDrainResult[] = [];
  const batched: DrainResult[] = [];
  const gwFast: DrainResult[] = [];
  await installBatchedDrain(db);
  for (let round = 0; round < o.rounds; round++) {
    ak.push(await drainWithWorker(db, nullTurn, { concurrency: o.concurrency, jobs: o.jobs, timeBoxMs: o.timeBoxMs }));
    batched.push(await measureBatchedNullTurns(db, { ...peer, claimBatch: graphileLocalQueueSize(o.concurrency) }));
    gwFast.push(await drainGraphileNoop(peer, 'fastest'));
  }
  const gwDefaults = await drainGraphileNoop(peer, 'defaults');
  const bossBatched = await drainBossNoop(peer, { batchSize: 100, pollingIntervalSeconds: 0.5 });
  const bossDefault = await drainBossNoop({ ...peer, timeBoxMs: o.slowTimeBoxMs }, bossDefaults);
  const agentKit = pooled(ak);
  const proposal = pooled(batched);
  const fastest = pooled(gwFast);
  evidence['orchestration-agent-kit'] = ak;
  evidence['orchestration-batched-proposal'] = batched;
  evidence['orchestration-peers'] = { gwFast, gwDefaults, bossBatched, bossDefault };

  const section = `2a. Orchestration alone (null turn vs no-op jobs, concurrency ${o.concurrency}, runs/s)`;
  const base = { section, unit: 'runs/s', agentKit: agentKit.perSecond };
  return [
    {
      ...base, metric: 'vs graphile-worker, fastest config', baseline: fastest.perSecond,
      baselineName: 'gw local queue + batched completion', target: { kind: 'ratio-at-least', value: 1.0 },
      note: describeRoundTrips(ak[ak.length - 1]!),
    },
    {
      section, unit: 'runs/s', agentKit: proposal.perSecond, metric: 'PROPOSED batched claim/close vs gw fastest',
      baseline: fastest.perSecond, baselineName: 'gw local queue + batched completion',
      target: { kind: 'ratio-at-least', value: 1.0 },
      note: `bench/sql/batched-drain.sql (not in the library yet): claim and close ${graphileLocalQueueSize(o.concurrency)} ` +
        'runs per statement, local queue like graphile-worker\'s',
    },
    { ...base, metric: 'vs graphile-worker, defaults', baseline: gwDefaults.perSecond, baselineName: 'gw defaults' },
    {
      ...base, metric: 'vs pg-boss, batch 100, poll 0.5 s', baseline: bossBatched.perSecond, baselineName: 'pg-boss batched',
    },
    {
      ...base, metric: 'vs pg-boss, defaults (batch 1, poll 2 s)', baseline: bossDefault.perSecond,
      baselineName: 'pg-boss defaults', note: bossDefault.drained ? undefined : `time-boxed at ${o.slowTimeBoxMs / 1000} s`,
    },
  ];
}
