// Database faults on real Postgres, for the fault suites: kill a database's connections, make its
// writes fail as on a full disk, restart the server; then drive a run to its end through the real
// reaper and drain and check that it ended exactly once with nothing lost, duplicated or
// half-written (the simulator's invariant checker, without its claim log).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import pg from 'pg';
import { expect } from 'vitest';
import { drainQueue } from '../../src/queue/index.js';
import { reapExpiredRuns } from '../../src/reaper/index.js';
import { advanceFakeNow } from '../../src/store/clock.js';
import type { Db } from '../../src/store/db.js';
import { runSegment } from '../../src/turn/index.js';
import type { Runtime } from '../../src/turn/types.js';
import { databaseUrl } from '../harness/test-db.js';
import { finalMessage } from '../harness/turn-kit.js';
import { InvariantChecker, isClosed, knownIssues } from '../simulation/invariants.js';

/** Rounds per fault test: a few in CI, more on demand (AGENT_KIT_FAULT_ROUNDS=50). */
export const faultRounds = Number(process.env.AGENT_KIT_FAULT_ROUNDS ?? 3);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** "stopped 45, closed 4": how often each outcome occurred, most frequent first. */
export function tally(items: string[]): string {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(item, (counts.get(item) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1]).map(([item, n]) => `${item} ${n}`).join(', ');
}

export async function databaseNameOf(db: Db): Promise<string> {
  const [row] = await db.query<{ name: string }>('select current_database() as name');
  return row!.name;
}

async function withAdmin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl });
  client.on('error', () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Terminate every connection to database `name` (from another database). Returns how many. */
export async function killBackends(name: string): Promise<number> {
  return withAdmin(async (admin) => {
    const { rows } = await admin.query<{ n: string }>(
      `select count(*) filter (where pg_terminate_backend(pid)) as n from pg_stat_activity
       where datname = $1 and pid <> pg_backend_pid()`,
      [name],
    );
    return Number(rows[0]!.n);
  });
}

/** Kill `name`'s connections every `everyMs` until `done` settles or `forMs` passed. Returns the kills. */
export async function killWhile(name: string, done: Promise<unknown>, everyMs: number, forMs: number): Promise<number> {
  let finished = false;
  void done.finally(() => (finished = true)).catch(() => {});
  const stopAtMs = Date.now() + forMs;
  let killed = 0;
  while (!finished && Date.now() < stopAtMs) {
    killed += await killBackends(name);
    await sleep(everyMs);
  }
  return killed;
}

/** Make every write of the turn fail with SQLSTATE 53100 (disk_full) while the flag is set. */
export async function installDiskFull(db: Db): Promise<void> {
  await db.exec(`
    create table if not exists fault_flags (id boolean primary key default true, disk_full boolean not null);
    insert into fault_flags values (true, false) on conflict (id) do nothing;
    create or replace function fault_disk_full() returns trigger language plpgsql as $$
    begin
      if (select disk_full from fault_flags) then
        raise exception 'could not extend file: No space left on device' using errcode = '53100';
      end if;
      return new;
    end $$;
    create or replace trigger fault_disk_full before insert on agent_kit_thread_events
      for each row execute function fault_disk_full();
    create or replace trigger fault_disk_full before insert on agent_kit_messages
      for each row execute function fault_disk_full();
    create or replace trigger fault_disk_full before insert on agent_kit_steps
      for each row execute function fault_disk_full();
    create or replace trigger fault_disk_full before insert or update on agent_kit_effects
      for each row execute function fault_disk_full();
    create or replace trigger fault_disk_full before update on agent_kit_runs
      for each row execute function fault_disk_full();`);
}

export async function setDiskFull(db: Db, full: boolean): Promise<void> {
  await db.query('update fault_flags set disk_full = $1', [full]);
}

/** `pg_ctlcluster … restart`, then wait until the server answers again. Returns its downtime. */
export async function restartPostgres(): Promise<number> {
  const startedMs = Date.now();
  await promisify(execFile)('pg_ctlcluster', ['--skip-systemctl-redirect', '15', 'main', 'restart'], { timeout: 60_000 });
  for (let attempt = 0; attempt < 300; attempt++) {
    try {
      await withAdmin((admin) => admin.query('select 1'));
      return Date.now() - startedMs;
    } catch {
      await sleep(100);
    }
  }
  throw new Error('Postgres did not come back within 30 s of the restart');
}

/**
 * After a fault: let leases run out (fake time), reap and drain until the run is closed.
 * Returns the final status and how many rounds it took.
 */
export async function finishRun(rt: Runtime, runId: string, maxRounds = 10): Promise<{ status: string; rounds: number }> {
  for (let round = 1; round <= maxRounds; round++) {
    const [run] = await rt.db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [runId]);
    if (isClosed(run!.status)) return { status: run!.status, rounds: round - 1 };
    await advanceFakeNow(rt.db, 10 * 60_000); // past any lease of these tests
    await reapExpiredRuns(rt, { owner: `fault-reaper-${round}` });
    await drainQueue(rt, { budgetMs: 30_000, owner: `fault-drain-${round}`, runSegment });
  }
  const [run] = await rt.db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [runId]);
  return { status: run!.status, rounds: maxRounds };
}

/** The run ended once: one final message (the scripted reply if completed), and every invariant holds. */
export async function expectEndedOnce(db: Db, runId: string, expectedText: string, tokens: number, lines: () => string[]) {
  const messages = await finalMessage(db, runId);
  expect(messages).toHaveLength(1);
  const [run] = await db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [runId]);
  if (run!.status === 'completed') expect(messages[0]).toEqual({ text: expectedText, partial: false });
  else expect(expectedText.startsWith(messages[0]!.text)).toBe(true);
  await expectInvariants(db, tokens, lines);
  return run!.status;
}

/** Every protocol invariant holds for every run of the database (known, reported issues aside). */
export async function expectInvariants(db: Db, tokens: number, lines: () => string[]) {
  const checker = new InvariantChecker(db, tokens, 3, lines, false);
  const violations = (await checker.check(await checker.snapshot())).filter((v) => !(v.kind in knownIssues));
  expect(violations).toEqual([]);
}
