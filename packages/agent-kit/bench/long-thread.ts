// Section 6, continued: a long thread. Each turn of a thread is claimed only when no earlier turn
// is open, and its close enqueues the next queued turn; both questions must cost the same on a
// thread's 10,000th turn as on its second (migration 0019). One measured operation is a whole
// turn's queue cycle: start the turn, claim it, close it. The long thread's turns run one after
// another, so both sides run at concurrency 1, in alternating slices. Then the history a run's
// first claim reads (agent_kit__history): with a window of earlier turns it must cost the same on
// the long thread as on a thread no longer than the window (migration 0026).
import { claimRun, closeRun } from '../src/lease/lease.js';
import { startTurn } from '../src/queue/start-turn.js';
import type { Db } from '../src/store/db.js';
import { oneRunAtATime } from './lease-statements.js';
import { seedQueuedRuns, vacuumAnalyze, type BenchDatabase } from './lib/bench-db.js';
import { measureInterleaved } from './lib/measure.js';
import { capturePlans } from './lib/plans.js';
import type { Row } from './lib/report.js';

export interface LongThreadOptions {
  /** Closed turns on the long thread before measuring. */
  turns: number;
  /** One-turn threads for the baseline, one per measured cycle: more than the slices can use. */
  threads: number;
  sliceMs: number;
  rounds: number;
}

const owner = 'bench';
const leaseTtlMs = 60_000;

/** A thread whose first `turns` turns are closed (bulk-written: the bench's shortcut). */
async function seedClosedTurns(db: Db, turns: number): Promise<string> {
  const first = await startTurn(db, { ownerId: owner, text: 'turn 1' });
  await db.query(
    `insert into agent_kit_runs (thread_id, turn_no, status) select $1, g, 'completed' from generate_series(2, $2::int) g`,
    [first.threadId, turns],
  );
  await closeWithoutLease(db);
  return first.threadId;
}

/** Close every queued run and drop its job: threads whose turns are all over. */
async function closeWithoutLease(db: Db) {
  await db.exec(`delete from agent_kit_jobs; update agent_kit_runs set status = 'completed' where status = 'queued'`);
}

/** Start a turn on `threadId`, claim it and close it. */
async function turnCycle(db: Db, threadId: string) {
  const turn = await startTurn(db, { threadId, ownerId: owner, text: 'next turn' });
  const claim = await claimRun(db, { runId: turn.runId, owner: 'bench-long', leaseTtlMs });
  if (!claim.claimed) throw new Error(`a new turn with every earlier one closed was not claimed: ${claim.reason}`);
  if ((await closeRun(oneRunAtATime(db), claim.lease, 'completed', { text: 'ok' })) === null) {
    throw new Error('a fresh lease could not close its run');
  }
}

/** Rows for section 6: a turn's cycle on a long thread against one on a thread of one turn. */
export async function benchLongThread(
  bench: BenchDatabase, o: LongThreadOptions, section: string, artifacts: Record<string, unknown>,
): Promise<Row[]> {
  const { db } = bench;
  const longThread = await seedClosedTurns(db, o.turns);
  // Enough one-turn threads that each short cycle gets a fresh one (a thread grows as it is used).
  const shortThreads = (await db.query<{ thread_id: string }>(
    'select thread_id from agent_kit_runs where id = any($1::uuid[])', [await seedQueuedRuns(db, o.threads, 4, owner)],
  )).map((r) => r.thread_id);
  await closeWithoutLease(db);
  await vacuumAnalyze(db);
  if (bench.url) {
    const turn = await startTurn(db, { threadId: longThread, ownerId: owner, text: 'planned turn' });
    const captured = await capturePlans(bench.url, [
      ['select * from agent_kit_claim_run($1, $2, $3::interval)', [turn.runId, 'bench-plan', '60 seconds']],
    ]);
    artifacts['plans-long-thread'] = captured.plans;
    // Only the runs table grows with the thread (the jobs table holds one job here).
    const scans = captured.scans.filter((scan) => scan.endsWith('agent_kit_runs'));
    if (scans.length > 0) artifacts['scans-long-thread'] = scans;
    await closeWithoutLease(db);
  }
  let nextShort = 0;
  const t = await measureInterleaved({
    long: () => turnCycle(db, longThread),
    short: async () => {
      const threadId = shortThreads[nextShort++];
      if (!threadId) throw new Error(`the baseline ran out of one-turn threads (${o.threads})`);
      await turnCycle(db, threadId);
    },
  }, { concurrency: 1, sliceMs: o.sliceMs, rounds: o.rounds, warmupRounds: 1 });
  const history = await benchHistoryRead(db, longThread, o, section);
  const [{ n }] = await db.query<{ n: number }>(
    'select count(*)::int as n from agent_kit_runs where thread_id = $1', [longThread],
  ) as [{ n: number }];
  return [{
    section, metric: `turns/s (start, claim, close) on a thread of ${o.turns.toLocaleString('en-US')} closed turns`,
    unit: 'turns/s', agentKit: t.long.perSecond, baseline: t.short.perSecond, baselineName: 'a thread of one turn',
    target: { kind: 'ratio-at-least', value: 0.8 },
    note: `one caller; p50 ${t.long.p50Ms.toFixed(2)} ms against ${t.short.p50Ms.toFixed(2)} ms; ` +
      `the long thread ended with ${n} turns; plans of its claim in the JSON`,
  }, history];
}

const historyWindow = 50; // the reference app's historyTurns

/** Give every run of the thread a question and an answer of ~200 characters (bulk-written). */
async function seedMessages(db: Db, threadId: string): Promise<void> {
  await db.query(
    `insert into agent_kit_messages (thread_id, run_id, role, content)
     select r.thread_id, r.id, x.role, jsonb_build_object('text', repeat(x.role || ' text ', 20))
     from agent_kit_runs r, unnest(array['user', 'assistant']) x(role)
     where r.thread_id = $1 and not exists (select 1 from agent_kit_messages m where m.run_id = r.id and m.role = x.role)`,
    [threadId],
  );
}

/** The history read of a first claim with a window: on the long thread against a thread the window holds. */
async function benchHistoryRead(db: Db, longThread: string, o: LongThreadOptions, section: string): Promise<Row> {
  const shortThread = await seedClosedTurns(db, historyWindow + 1);
  await seedMessages(db, longThread);
  await seedMessages(db, shortThread);
  await vacuumAnalyze(db);
  const [{ last }] = await db.query<{ last: number }>(
    'select max(turn_no) as last from agent_kit_runs where thread_id = $1', [longThread]) as [{ last: number }];
  const read = (threadId: string, turnNo: number, window: number | null) => async () => {
    await db.query('select agent_kit__history($1, $2, $3::int)', [threadId, turnNo, window]);
  };
  const t = await measureInterleaved({
    window: read(longThread, last, historyWindow),
    short: read(shortThread, historyWindow + 1, historyWindow),
    whole: read(longThread, last, null),
  }, { concurrency: 1, sliceMs: o.sliceMs, rounds: o.rounds, warmupRounds: 1 });
  return {
    section,
    metric: `reads/s of a first claim's history, window of ${historyWindow} turns, on a thread of ${last.toLocaleString('en-US')} turns`,
    unit: 'reads/s', agentKit: t.window.perSecond, baseline: t.short.perSecond,
    baselineName: `the same on a thread of ${historyWindow + 1} turns`, target: { kind: 'ratio-at-least', value: 0.8 },
    note: `one caller, ~200-character messages; p50 ${t.window.p50Ms.toFixed(2)} ms against ${t.short.p50Ms.toFixed(2)} ms; ` +
      `the long thread's whole history (no window, as every read was before migration 0026) takes ` +
      `${t.whole.p50Ms.toFixed(1)} ms`,
  };
}
