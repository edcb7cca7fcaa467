// The chaos harness (`npm run chaos`): real worker processes on real Postgres, hurt on a seeded
// schedule — SIGKILL mid-stream or mid-tool, SIGTERM as a deploy, SIGSTOP past the lease then
// SIGCONT (the zombie must write nothing), two extra drains and two reapers at once, killed connections, and (with
// CHAOS_PG_RESTART=1) Postgres restarts. Then an operator resolves every effect left in doubt by
// what the effects file (the outside system) says happened, and the harness judges DESIGN.md §6
// from the database and that file (./invariants.ts), prints the table, and exits 1 on any violation.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import pg from 'pg';
import { resolveEffect } from '../../src/effect-ledger/index.js';
import { startTurn } from '../../src/queue/start-turn.js';
import { migrate } from '../../src/store/migrate.js';
import { openPgDb } from '../../src/store/pg-driver.js';
import { Fleet, type Child } from './fleet.js';
import { checkInvariants, type ChaosStats } from './invariants.js';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '1000' },
    workers: { type: 'string', default: '4' },
    concurrency: { type: 'string', default: '8' },
    seed: { type: 'string' },
    'ttl-ms': { type: 'string', default: '1500' },
    'budget-ms': { type: 'string', default: '4000' },
    'delay-ms': { type: 'string', default: '25' },
    tokens: { type: 'string', default: '40' },
    'effect-pct': { type: 'string', default: '30' },
    'followup-pct': { type: 'string', default: '25' },
    'fault-every-ms': { type: 'string', default: '700' },
    'max-attempts': { type: 'string', default: '3' },
    'timeout-s': { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const num = (name: keyof typeof args) => Number(args[name]);
const runCount = num('runs');
const seed = args.seed === undefined ? Date.now() % 2 ** 31 : Number(args.seed);
const ttlMs = num('ttl-ms');
const timeoutMs = (args['timeout-s'] === undefined ? 60 + runCount * 0.3 : num('timeout-s')) * 1000;
const pgRestarts = process.env.CHAOS_PG_RESTART === '1';
const baseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** mulberry32: the fault schedule and the workload are a function of the seed. */
function prng(state: number) {
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}
const random = prng(seed);
const pick = <T>(items: T[]): T | undefined => items[Math.floor(random() * items.length)];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const counts = { kills: 0, killsMidTool: 0, killsMidStream: 0, deploys: 0, freezes: 0, drains: 0, reaps: 0, connKills: 0, pgRestarts: 0 };

async function createDatabase(name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  const db = openPgDb({ connectionString: url.toString(), max: 1, applicationName: 'agent-kit-chaos' });
  await migrate(db);
  await db.close();
  return url.toString();
}

/** Retry a harness query through connection kills and restarts. */
async function retrying<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      if (attempt >= 120) throw error;
      await sleep(500);
    }
  }
}

/** N turns: new threads, some follow-ups queued behind earlier turns, some with a side effect. */
async function enqueueRuns(url: string) {
  const db = openPgDb({ connectionString: url, max: 4, applicationName: 'agent-kit-chaos' });
  const threads: { id: string; turns: number }[] = [];
  for (let i = 0; i < runCount; i++) {
    const effect = random() * 100 < num('effect-pct') ? ' #effect' : '';
    const open = threads.filter((t) => t.turns < 3);
    const followUp = open.length > 0 && random() * 100 < num('followup-pct') ? pick(open) : undefined;
    const turn = await startTurn(db, { ownerId: 'chaos', threadId: followUp?.id, text: `chaos turn ${i} seed ${seed}${effect}` });
    if (followUp) followUp.turns++;
    else threads.push({ id: turn.threadId, turns: 1 });
  }
  await db.close();
  return threads.length;
}

/** The worker holding a run (owner `worker-<host>-<pid>-<tag>-<n>`), preferring one inside a tool. */
async function killTarget(pool: pg.Pool, fleet: Fleet): Promise<{ child: Child; kind: 'tool' | 'stream' | 'idle' } | undefined> {
  const live = fleet.liveWorkers();
  const rows = (await pool.query<{ owner: string; in_tool: boolean }>(`select r.owner, exists (select 1 from agent_kit_effects e
    where e.run_id = r.id and e.status = 'started') as in_tool from agent_kit_runs r
    where r.status = 'running' and r.lease_expires_at > now()`)).rows;
  const holder = (owner: string) => live.find((c) => owner.includes(`-${c.pid}-`));
  const inTool = rows.filter((r) => r.in_tool).map((r) => holder(r.owner)).filter(Boolean) as Child[];
  if (inTool.length > 0) return { child: pick(inTool)!, kind: 'tool' };
  const streaming = rows.map((r) => holder(r.owner)).filter(Boolean) as Child[];
  if (streaming.length > 0) return { child: pick(streaming)!, kind: 'stream' };
  const idle = pick(live);
  return idle ? { child: idle, kind: 'idle' } : undefined;
}

/** Restart the whole Postgres cluster (CHAOS_PG_RESTART=1 only: it hurts every database on it). */
async function restartPostgres() {
  counts.pgRestarts++;
  await promisify(execFile)('pg_ctlcluster', ['--skip-systemctl-redirect', '15', 'main', 'restart']);
}

async function injectFault(pool: pg.Pool, fleet: Fleet, dbName: string) {
  const roll = random() * 100;
  if (roll < 26) {
    const target = await killTarget(pool, fleet);
    if (!target) return;
    fleet.kill(target.child);
    counts.kills++;
    if (target.kind === 'tool') counts.killsMidTool++;
    if (target.kind === 'stream') counts.killsMidStream++;
    const [slot, delayMs] = [target.child.slot, 100 + random() * 700];
    void target.child.exited.then(() => setTimeout(() => fleet.startWorker(slot), delayMs));
  } else if (roll < 34) {
    const victim = pick(fleet.liveWorkers());
    if (!victim) return;
    counts.deploys++;
    fleet.deploy(victim);
  } else if (roll < 52) {
    const victim = pick(fleet.liveWorkers());
    if (!victim) return;
    counts.freezes++;
    void fleet.freeze(victim, ttlMs * (1.5 + random() * 1.5));
  } else if (roll < 64) {
    counts.drains += 2;
    for (let i = 0; i < 2; i++) fleet.startHelper('drain', ['--budget', String(Math.max(2, ttlMs / 500)), '--concurrency', '4']);
  } else if (roll < 76) {
    counts.reaps += 2;
    for (let i = 0; i < 2; i++) fleet.startHelper('reap', []);
  } else {
    const killed = await pool.query(`select count(pg_terminate_backend(pid)) as n from pg_stat_activity
      where datname = $1 and application_name like 'agent-kit%' and application_name <> 'agent-kit-chaos'
        and pid <> pg_backend_pid() and random() < 0.6`, [dbName]);
    counts.connKills += Number(killed.rows[0].n);
  }
}

/**
 * The operator's pass once the fleet has stopped: each effect left in doubt is looked up in the
 * effects file (the outside system: what really happened) and resolved accordingly, as an
 * operator does with `agent-kit resolve-effect` (ADR-0042, ADR-0043).
 */
async function resolveInDoubt(url: string, effectsFile: string) {
  const happened = new Set(fs.existsSync(effectsFile) ? fs.readFileSync(effectsFile, 'utf8').split('\n') : []);
  const db = openPgDb({ connectionString: url, max: 1, applicationName: 'agent-kit-chaos' });
  try {
    const inDoubt = await db.query<{ run_id: string; key: string }>(
      `select run_id, key from agent_kit_effects where status = 'in_doubt'`);
    for (const { run_id: runId, key } of inDoubt) {
      await resolveEffect(db, { runId, key, happened: happened.has(key), by: 'chaos-operator' });
    }
  } finally {
    await db.close();
  }
}

function printTable(stats: ChaosStats, violations: string[], elapsedMs: number, threads: number) {
  const header = ['runs', 'kills', 'freezes', 'takeovers', 'completed', 'aborted+salvaged', 'duplicate effects', 'in-doubt effects', 'violations'];
  const row = [stats.runs, counts.kills, counts.freezes, stats.takeovers, stats.completed,
    `${stats.aborted}+${stats.salvaged}`, stats.duplicateEffects, stats.inDoubtEffects, violations.length];
  console.log(`\n| ${header.join(' | ')} |\n|${header.map(() => '---').join('|')}|\n| ${row.join(' | ')} |\n`);
  console.log(`seed ${seed}; ${threads} threads; ${num('workers')} workers x ${num('concurrency')}; lease ${ttlMs} ms; ` +
    `budget ${num('budget-ms')} ms; ${num('tokens')} tokens x ${num('delay-ms')} ms; ${(elapsedMs / 1000).toFixed(1)} s`);
  console.log(`kills: ${counts.killsMidTool} mid-tool, ${counts.killsMidStream} mid-stream, ` +
    `${counts.kills - counts.killsMidTool - counts.killsMidStream} idle; deploys (SIGTERM) ${counts.deploys}; extra drains ${counts.drains}, reaps ${counts.reaps}; ` +
    `connections killed ${counts.connKills}; Postgres restarts ${counts.pgRestarts}`);
  console.log(`resumed+completed ${stats.resumedCompleted}; slices ${stats.slices}; failed ${stats.failed}; open ${stats.open}; ` +
    `effects executed ${stats.effectsExecuted}; stray jobs ${stats.strayJobs}`);
}

async function main() {
  const stamp = `${Date.now()}`;
  const dbName = `agent_kit_chaos_${stamp}`;
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), `agent-kit-chaos-${stamp}-`));
  const effectsFile = path.join(workDir, 'effects.txt');
  const url = await createDatabase(dbName);
  const threads = await enqueueRuns(url);
  console.log(`chaos: ${runCount} runs in ${threads} threads, database ${dbName}, logs ${workDir}, seed ${seed}`);
  const env: NodeJS.ProcessEnv = {
    ...process.env, DATABASE_URL: url, AGENT_KIT_MODEL: 'scripted', AGENT_KIT_DATA_DIR: '',
    AGENT_KIT_LEASE_TTL: String(ttlMs / 1000), AGENT_KIT_INVOCATION_BUDGET: String(num('budget-ms') / 1000),
    AGENT_KIT_MAX_RUN_ATTEMPTS: args['max-attempts'], AGENT_KIT_SCRIPTED_DELAY_MS: args['delay-ms'],
    AGENT_KIT_SCRIPTED_TOKENS: args.tokens, AGENT_KIT_DEMO_EFFECTS_FILE: effectsFile,
    // A deploy's SIGTERM cuts a model step after 0.3 s (ADR-0117): steps here last about a second.
    AGENT_KIT_STOP_GRACE: '0.3',
  };
  const fleet = new Fleet(env, workDir, ['--concurrency', args.concurrency!, '--poll-ms', '500']);
  for (let i = 0; i < num('workers'); i++) fleet.startWorker(`worker-${i}`);
  const pool = new pg.Pool({ connectionString: url, max: 3, application_name: 'agent-kit-chaos' });
  pool.on('error', () => {});
  const startedMs = Date.now();
  // The first restart comes early (3–8 s in), so that even a short run has one; then every 20–40 s.
  let nextRestartMs = pgRestarts ? startedMs + 3_000 + random() * 5_000 : Number.POSITIVE_INFINITY;
  let open = runCount;
  let lastReportMs = startedMs;
  // A worker that exits on its own (a crash, a schema it does not know) ends the run at once.
  while (open > 0 && Date.now() - startedMs < timeoutMs && fleet.badExits.length === 0) {
    await sleep(num('fault-every-ms') * (0.5 + random()));
    // Faults stop at 75 % of the time limit so that the last runs can settle.
    if (Date.now() - startedMs < timeoutMs * 0.75) {
      const fault = Date.now() >= nextRestartMs ? restartPostgres() : injectFault(pool, fleet, dbName);
      if (Date.now() >= nextRestartMs) nextRestartMs = Date.now() + 20_000 + random() * 20_000;
      await fault.catch((e) => console.log(`chaos: fault failed: ${(e as Error).message}`));
    }
    open = await retrying(async () => Number((await pool.query(`select count(*) as n from agent_kit_runs
      where status not in ('completed', 'failed', 'aborted')`)).rows[0].n));
    if (Date.now() - lastReportMs > 5_000) {
      lastReportMs = Date.now();
      console.log(`chaos: ${((Date.now() - startedMs) / 1000).toFixed(0)} s, ${open} open, ${JSON.stringify(counts)}`);
    }
  }
  const elapsedMs = Date.now() - startedMs;
  await fleet.stopAll(30_000);
  await retrying(() => resolveInDoubt(url, effectsFile));
  const { stats, violations } = await retrying(() => checkInvariants(pool, effectsFile, num('tokens')));
  // A bad exit first: it ended the run early, and the runs it left open follow from it.
  violations.unshift(...fleet.badExits);
  await pool.end();
  printTable(stats, violations, elapsedMs, threads);
  for (const line of violations.slice(0, 40)) console.log(`VIOLATION ${line}`);
  if (violations.length > 40) console.log(`… and ${violations.length - 40} more`);
  if (violations.length === 0 && !args.keep) {
    const admin = new pg.Client({ connectionString: baseUrl });
    await admin.connect();
    await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
    fs.rmSync(workDir, { recursive: true, force: true });
  } else {
    console.log(`kept database ${dbName} and logs ${workDir}`);
  }
  process.exitCode = violations.length === 0 ? 0 : 1;
}

// Exit explicitly: a child that ignored SIGTERM must not keep the harness alive.
main().then(
  () => process.exit(process.exitCode ?? 0),
  (error) => {
    console.error(error);
    process.exit(2);
  },
);
