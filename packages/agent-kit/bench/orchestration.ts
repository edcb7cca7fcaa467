// Section 2a: orchestration alone. Runs drained by agent-kit's worker loop with a null turn
// (claim, then close with a fixed message; no model) against no-op jobs in graphile-worker and
// pg-boss, same database, same concurrency, same drain-to-completion clock (lib/drain-measure).
import { configFromEnv } from '../src/config.js';
import { claimRun, closeRun } from '../src/lease/lease.js';
import type { LanguageModel } from 'ai';
import { createScriptedModel, demoTools } from '../src/model/index.js';
import type { Db } from '../src/store/db.js';
import type { RunSegment, Runtime } from '../src/turn/types.js';
import { runWorker } from '../src/worker/index.js';
import { countingDb, type CountingDb } from './lib/counting-db.js';
import { cpuSince, cpuSnapshot } from './lib/cpu.js';
import { measureDrain, type DrainResult } from './lib/drain-measure.js';

/** The null turn: claim, then close with a fixed message. Everything a turn costs but the model. */
export const nullTurn: RunSegment = async (rt, o) => {
  // The drain claims most runs itself, in batches; a job it only took is claimed here.
  const claim = o.preClaimed?.claim ?? await claimRun(rt.db, {
    runId: o.runId, owner: o.owner, leaseTtlMs: o.leaseTtlMs ?? rt.config.leaseTtlMs, budgetMs: o.budgetMs,
  });
  if (!claim.claimed) return { kind: 'not-claimed', reason: claim.reason };
  const messageId = await closeRun(rt.db, claim.lease, 'completed', { text: 'done' });
  if (messageId === null) return { kind: 'lost', fence: claim.lease.fence };
  return { kind: 'closed', status: 'completed', messageId, fence: claim.lease.fence };
};

/** A runtime for the bench: the given store, the scripted model, the demo tools, default config. */
export function benchRuntime(db: Db, model: LanguageModel = createScriptedModel({})): Runtime {
  return { db, model, tools: { ...demoTools }, config: configFromEnv({}) };
}

/** Close every open run and drop every job left by earlier sections (bench database only). */
export async function clearQueue(db: Db): Promise<void> {
  await db.exec(`
    delete from agent_kit_jobs;
    update agent_kit_runs set status = 'aborted', owner = null, lease_expires_at = null, deadline_at = null
    where status not in ('completed', 'failed', 'aborted');`);
}

/** Queue `count` turns in ONE statement (one commit: they all become due together). */
export async function enqueueTurnsAtOnce(db: Db, count: number, text = 'benchmark turn'): Promise<void> {
  await db.query(
    `select count(*) from (select agent_kit_start_turn(null, 'bench', $2 || g) from generate_series(1, $1::int) g) s`,
    [count, text],
  );
}

/** True when no run is queued or running (the jobs table and the partial running index only). */
export async function isQueueDrained(db: Db): Promise<boolean> {
  const rows = await db.query<{ ok: boolean }>(
    `select not exists (select 1 from agent_kit_jobs)
        and not exists (select 1 from agent_kit_runs where status = 'running') as ok`,
  );
  return rows[0]!.ok;
}

export interface WorkerDrainResult extends DrainResult {
  /** Round trips per run by label, and in all. */
  roundTripsPerRun: Record<string, number>;
  /** Server-side commits per run (pg_stat_database; includes the bench's own polling). */
  commitsPerRun?: number;
  /** CPU per run in this process (the worker, and the bench's polling). */
  processCpuMsPerRun: number;
  /** CPU per run on the rest of the machine (Postgres, the kernel), where /proc/stat exists. */
  restCpuMsPerRun?: number;
}

/** Drain `jobs` runs through the worker loop running `segment`, at `concurrency`. */
export async function drainWithWorker(
  db: Db, segment: RunSegment,
  o: { concurrency: number; jobs: number; timeBoxMs: number; text?: string; model?: LanguageModel },
): Promise<WorkerDrainResult> {
  await clearQueue(db);
  const counted: CountingDb = countingDb(db);
  const rt = benchRuntime(counted, o.model);
  const stop = new AbortController();
  const worker = runWorker(rt, { signal: stop.signal, concurrency: o.concurrency, runSegment: segment });
  const commits = () => db.kind === 'pg'
    ? db.query<{ n: number }>('select xact_commit::float8 as n from pg_stat_database where datname = current_database()')
      .then((r) => Number(r[0]!.n))
    : Promise.resolve(Number.NaN);
  let commitsAtStart = 0;
  let cpuAtStart = cpuSnapshot();
  try {
    const result = await measureDrain({
      total: o.jobs, timeBoxMs: o.timeBoxMs,
      enqueue: async () => {
        await enqueueTurnsAtOnce(db, o.jobs, o.text);
        counted.reset();
        commitsAtStart = await commits();
        cpuAtStart = cpuSnapshot();
      },
      isDrained: () => isQueueDrained(db),
      countDone: async () => Number((await db.query<{ n: number }>(
        `select count(*)::int as n from agent_kit_runs where status = 'completed' and owner is null
           and updated_at > now() - make_interval(secs => $1)`, [o.timeBoxMs / 1000 + 1],
      ))[0]!.n),
    });
    const roundTripsPerRun: Record<string, number> = {};
    for (const [label, n] of counted.counts) roundTripsPerRun[label] = n / result.done;
    roundTripsPerRun.total = (counted.total() + 2 * counted.transactions) / result.done;
    const cpu = cpuSince(cpuAtStart);
    const commitsPerRun = (await commits() - commitsAtStart) / result.done;
    return {
      ...result, roundTripsPerRun, commitsPerRun: Number.isNaN(commitsPerRun) ? undefined : commitsPerRun,
      processCpuMsPerRun: cpu.processMs / result.done,
      restCpuMsPerRun: cpu.restMs === undefined ? undefined : cpu.restMs / result.done,
    };
  } finally {
    stop.abort();
    await worker;
  }
}
