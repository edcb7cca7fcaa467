// The peers a user would pick instead of agent-kit, run on the same database at the same
// concurrency: graphile-worker 0.17.3 (defaults, and its fastest configuration: local queue +
// batched completion) and pg-boss 10.4.2, each in its own schema. Benchmark-only dependencies:
// nothing under src/ imports them.
import { Logger, run, runMigrations, type Runner, type TaskList } from 'graphile-worker';
import PgBoss from 'pg-boss';
import pg from 'pg';
import { measureDrain, type DrainResult } from './lib/drain-measure.js';

export interface PeerOptions {
  url: string;
  concurrency: number;
  jobs: number;
  timeBoxMs: number;
}

const silent = new Logger(() => () => {});
const gwSchema = 'graphile_worker';
const bossSchema = 'pgboss';

export type GraphileConfigName = 'defaults' | 'fastest';

/**
 * graphile-worker's fastest configuration for short jobs, per its performance docs: a local
 * queue that locks a batch of jobs per fetch, and completions batched into one statement.
 */
export function graphilePreset(name: GraphileConfigName, concurrency: number): GraphileConfig.Preset {
  if (name === 'defaults') return {};
  return {
    worker: {
      localQueue: { size: graphileLocalQueueSize(concurrency) },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    },
  };
}

/** Jobs locked per fetch in the fastest configuration (the bench's batched agent-kit path matches it). */
export function graphileLocalQueueSize(concurrency: number): number {
  return Math.max(100, concurrency * 10);
}

/** Run a graphile-worker pool with `task` until `drain` is timed; then stop it. */
export async function withGraphileWorker<T>(
  o: PeerOptions, config: GraphileConfigName, taskList: TaskList, body: (client: pg.Client) => Promise<T>,
): Promise<T> {
  await runMigrations({ connectionString: o.url, schema: gwSchema, logger: silent });
  const client = new pg.Client({ connectionString: o.url });
  client.on('error', () => {}); // a lost connection fails the next query, not the process
  await client.connect();
  let runner: Runner | undefined;
  try {
    runner = await run({
      connectionString: o.url, schema: gwSchema, concurrency: o.concurrency, taskList,
      noHandleSignals: true, logger: silent, maxPoolSize: o.concurrency + 2,
      preset: graphilePreset(config, o.concurrency),
    });
    return await body(client);
  } finally {
    await runner?.stop();
    // A time-boxed run leaves jobs behind; the next configuration must start from an empty queue.
    await client.query(`delete from ${gwSchema}._private_jobs`);
    await client.end();
  }
}

/** No-op jobs/s through graphile-worker in configuration `config`. */
export async function drainGraphileNoop(o: PeerOptions, config: GraphileConfigName): Promise<DrainResult> {
  return withGraphileWorker(o, config, { bench_noop: async () => {} }, (client) =>
    measureDrain({
      total: o.jobs, timeBoxMs: o.timeBoxMs,
      enqueue: async () => {
        // One statement, one transaction: every job becomes visible at the same commit.
        await client.query(
          `select count(*) from ${gwSchema}.add_jobs(array(
             select row('bench_noop', '{}'::json, null, null, null, null, null, null)::${gwSchema}.job_spec
             from generate_series(1, $1::int)))`,
          [o.jobs],
        );
      },
      isDrained: async () => (await client.query(`select not exists (select 1 from ${gwSchema}._private_jobs) as ok`)).rows[0].ok,
      countDone: async () => o.jobs - Number((await client.query(`select count(*) as n from ${gwSchema}._private_jobs`)).rows[0].n),
    }));
}

export interface BossConfig {
  /** Jobs fetched (and completed) per worker round trip; pg-boss's default is 1. */
  batchSize: number;
  /** Poll interval of each worker when it finds nothing or after a batch; default 2 s, least 0.5 s. */
  pollingIntervalSeconds: number;
}

export const bossDefaults: BossConfig = { batchSize: 1, pollingIntervalSeconds: 2 };

/** No-op jobs/s through pg-boss: `concurrency` workers, each fetching `batchSize` at a time. */
export async function drainBossNoop(o: PeerOptions, config: BossConfig): Promise<DrainResult> {
  const boss = new PgBoss({
    connectionString: o.url, schema: bossSchema, max: o.concurrency + 2, supervise: false, schedule: false,
  });
  boss.on('error', () => {});
  await boss.start();
  const queue = `bench_noop_${config.batchSize}`;
  const client = new pg.Client({ connectionString: o.url });
  client.on('error', () => {});
  await client.connect();
  try {
    await boss.createQueue(queue);
    for (let i = 0; i < o.concurrency; i++) {
      await boss.work(queue, { batchSize: config.batchSize, pollingIntervalSeconds: config.pollingIntervalSeconds }, async () => {});
    }
    return await measureDrain({
      total: o.jobs, timeBoxMs: o.timeBoxMs,
      enqueue: () => boss.insert(Array.from({ length: o.jobs }, () => ({ name: queue, data: {} }))),
      isDrained: async () => (await client.query(
        `select not exists (select 1 from ${bossSchema}.job where name = $1 and state < 'completed') as ok`, [queue],
      )).rows[0].ok,
      countDone: async () => Number((await client.query(
        `select count(*) as n from ${bossSchema}.job where name = $1 and state = 'completed'`, [queue],
      )).rows[0].n),
    });
  } finally {
    await boss.stop({ graceful: false, wait: true, timeout: 5_000 });
    await client.end();
  }
}
