// The chaos harness's judge: checks DESIGN.md §6 from the database and the effects file alone,
// never through the code under test. Each broken invariant becomes one line naming the run or
// thread; the counts feed the result table.
import fs from 'node:fs';
import type pg from 'pg';
import { scriptedReplyText } from '../../src/model/index.js';

export interface ChaosStats {
  runs: number;
  completed: number;
  aborted: number;
  salvaged: number;
  failed: number;
  open: number;
  /** Segments that took over a run whose previous segment died (attempt > 1). */
  takeovers: number;
  /** Completed runs that were taken over at least once. */
  resumedCompleted: number;
  /** Voluntary slice ends (parked back to queued). */
  slices: number;
  effectsExecuted: number;
  duplicateEffects: number;
  /** Effects the segments or reapers left in doubt (all resolved by the operator's pass). */
  inDoubtEffects: number;
  strayJobs: number;
}

interface RunRow { id: string; thread_id: string; turn_no: number; status: string; fence: string; message_id: string | null }
interface MessageRow { id: string; run_id: string; text: string; salvaged: boolean | null; partial: boolean }
interface EventRow {
  thread_id: string; seq: string; run_id: string | null; fence: string; type: string; attempt: string | null;
  status: string | null; key: string | null;
}

const closed = new Set(['completed', 'failed', 'aborted']);

/** Check every invariant; returns the stats and one line per violation. */
export async function checkInvariants(
  pool: pg.Pool, effectsFile: string, tokens: number,
): Promise<{ stats: ChaosStats; violations: string[] }> {
  const violations: string[] = [];
  const runs = (await pool.query<RunRow>('select id, thread_id, turn_no, status, fence::text, message_id from agent_kit_runs')).rows;
  const messages = (await pool.query<MessageRow>(`select id, run_id, content->>'text' as text,
    (content->>'salvaged')::boolean as salvaged, partial from agent_kit_messages where role = 'assistant'`)).rows;
  // Qualified names: ORDER BY must sort by the bigint column, not by its text alias.
  const events = (await pool.query<EventRow>(`select e.thread_id, e.seq::text as seq, e.run_id, e.fence::text as fence,
    e.type, e.data->>'attempt' as attempt, e.data->>'status' as status, e.data->>'key' as key
    from agent_kit_thread_events e order by e.thread_id, e.seq`)).rows;
  const stats: ChaosStats = {
    runs: runs.length, completed: 0, aborted: 0, salvaged: 0, failed: 0, open: 0, takeovers: 0, resumedCompleted: 0,
    slices: 0, effectsExecuted: 0, duplicateEffects: 0, inDoubtEffects: 0, strayJobs: 0,
  };
  const expected = await expectedReplies(pool, tokens);
  const messagesByRun = groupBy(messages, (m) => m.run_id);
  const eventsByRun = groupBy(events.filter((e) => e.run_id), (e) => e.run_id!);
  for (const run of runs) {
    checkRun(run, messagesByRun.get(run.id) ?? [], eventsByRun.get(run.id) ?? [], expected.get(run.id), stats, violations);
  }
  checkThreads(runs, events, await pool.query<{ id: string; last_seq: string }>('select id, last_seq::text from agent_kit_threads'), violations);
  await checkEffects(pool, effectsFile, runs, events, stats, violations);
  await checkSteps(pool, violations);
  stats.strayJobs = Number((await pool.query(`select count(*) as n from agent_kit_jobs j join agent_kit_runs r on r.id = j.run_id
    where r.status in ('completed', 'failed', 'aborted')`)).rows[0].n);
  return { stats, violations };
}

/** The reply the scripted model gives each run: a function of its thread's user texts so far. */
async function expectedReplies(pool: pg.Pool, tokens: number): Promise<Map<string, string>> {
  const rows = (await pool.query<{ thread_id: string; run_id: string; text: string }>(`
    select distinct on (r.id) r.thread_id, r.id as run_id, m.content->>'text' as text, r.turn_no
    from agent_kit_runs r join agent_kit_messages m on m.run_id = r.id and m.role = 'user'
    order by r.id, m.created_at`)).rows as { thread_id: string; run_id: string; text: string; turn_no: number }[];
  rows.sort((a, b) => (a.thread_id < b.thread_id ? -1 : a.thread_id > b.thread_id ? 1 : a.turn_no - b.turn_no));
  const replies = new Map<string, string>();
  const textsByThread = new Map<string, string[]>();
  for (const row of rows) {
    const texts = [...(textsByThread.get(row.thread_id) ?? []), row.text];
    textsByThread.set(row.thread_id, texts);
    replies.set(row.run_id, scriptedReplyText(texts, tokens));
  }
  return replies;
}

function checkRun(
  run: RunRow, messages: MessageRow[], events: EventRow[], expected: string | undefined,
  stats: ChaosStats, violations: string[],
) {
  const id = `run ${run.id}`;
  stats.takeovers += events.filter((e) => e.type === 'segment-started' && Number(e.attempt) > 1).length;
  stats.slices += events.filter((e) => e.type === 'run-parked' && e.status === 'queued').length;
  if (!closed.has(run.status)) {
    stats.open++;
    violations.push(`${id}: not closed (status ${run.status}, fence ${run.fence})`);
    return;
  }
  if (messages.length !== 1) violations.push(`${id}: ${messages.length} assistant messages, expected exactly 1`);
  const message = messages[0];
  if (message && message.id !== run.message_id) violations.push(`${id}: message_id does not point at its message`);
  if (run.status === 'completed') {
    stats.completed++;
    if (events.some((e) => e.type === 'segment-started' && Number(e.attempt) > 1)) stats.resumedCompleted++;
    if (message?.partial) violations.push(`${id}: completed with a partial message`);
    if (message && message.text !== expected) {
      violations.push(`${id}: completed text differs from the unbroken reply: ${JSON.stringify(message.text.slice(0, 60))}…`);
    }
  } else if (run.status === 'aborted') {
    stats.aborted++;
    if (message?.salvaged) stats.salvaged++;
    if (message && !message.partial) violations.push(`${id}: aborted but its message is not marked partial`);
    if (message && expected !== undefined && !expected.startsWith(message.text)) {
      violations.push(`${id}: salvaged text is not a prefix of the reply: ${JSON.stringify(message.text.slice(0, 60))}`);
    }
  } else {
    stats.failed++;
  }
  checkRunEvents(id, run, events, violations);
}

/**
 * One run-closed, nothing of the run's own after it (an operator's verdict on an effect in doubt,
 * effect-resolved, may come later), and fences never going back (a zombie's late write).
 */
function checkRunEvents(id: string, run: RunRow, events: EventRow[], violations: string[]) {
  const closes = events.filter((e) => e.type === 'run-closed');
  if (closes.length !== 1) violations.push(`${id}: ${closes.length} run-closed events, expected 1`);
  const last = events.filter((e) => e.type !== 'effect-resolved').at(-1);
  if (closes.length === 1 && last && last.type !== 'run-closed') {
    violations.push(`${id}: event ${last.type} (seq ${last.seq}) after run-closed`);
  }
  let fence = 0;
  for (const event of events) {
    const f = Number(event.fence);
    if (f === 0) continue; // unguarded events outside any segment (the user's message, run-queued)
    if (f < fence) violations.push(`${id}: event ${event.type} seq ${event.seq} under fence ${f} after fence ${fence} (a lost fence wrote)`);
    fence = Math.max(fence, f);
  }
  if (fence > Number(run.fence)) violations.push(`${id}: an event carries fence ${fence} above the run's ${run.fence}`);
}

/** Gap-free seq from 1 per thread, and a thread's turns closed in turn order. */
function checkThreads(runs: RunRow[], events: EventRow[], threads: { rows: { id: string; last_seq: string }[] }, violations: string[]) {
  const byThread = groupBy(events, (e) => e.thread_id);
  const turnOf = new Map(runs.map((r) => [r.id, Number(r.turn_no)]));
  for (const thread of threads.rows) {
    const seqs = (byThread.get(thread.id) ?? []).map((e) => Number(e.seq));
    const gapless = seqs.every((seq, index) => seq === index + 1);
    if (!gapless || seqs.length !== Number(thread.last_seq)) {
      violations.push(`thread ${thread.id}: seq not gap-free (${seqs.length} events, last_seq ${thread.last_seq})`);
    }
    const closedTurns = (byThread.get(thread.id) ?? []).filter((e) => e.type === 'run-closed').map((e) => turnOf.get(e.run_id!)!);
    if (closedTurns.some((turn, index) => index > 0 && turn < closedTurns[index - 1]!)) {
      violations.push(`thread ${thread.id}: turns closed out of order (${closedTurns.join(',')})`);
    }
  }
}

/**
 * Exactly-once effects: the file (what really happened) against the ledger. Every effect left in
 * doubt has been resolved by the operator's pass from the same file: none is still in doubt, each
 * verdict is what happened, and each was told to its thread once, outside any segment (fence 0).
 */
async function checkEffects(
  pool: pg.Pool, effectsFile: string, runs: RunRow[], events: EventRow[], stats: ChaosStats, violations: string[],
) {
  const lines = fs.existsSync(effectsFile) ? fs.readFileSync(effectsFile, 'utf8').split('\n').filter(Boolean) : [];
  const executed = new Map<string, number>();
  for (const key of lines) executed.set(key, (executed.get(key) ?? 0) + 1);
  stats.effectsExecuted = lines.length;
  for (const [key, times] of executed) {
    if (times > 1) {
      stats.duplicateEffects++;
      violations.push(`effect ${key}: executed ${times} times`);
    }
  }
  const ledger = (await pool.query<{ run_id: string; key: string; status: string; happened: boolean | null }>(
    `select run_id, key, status, (result->'resolved'->>'happened')::boolean as happened from agent_kit_effects`)).rows;
  const statusOf = new Map(runs.map((r) => [r.id, r.status]));
  const inLedger = new Set(ledger.map((e) => e.key));
  const told = groupBy(events.filter((e) => e.type === 'effect-resolved'), (e) => e.key ?? '');
  for (const effect of ledger) {
    if (effect.status === 'in_doubt') violations.push(`effect ${effect.key}: still in doubt after the operator's pass`);
    if (effect.happened !== null) {
      stats.inDoubtEffects++;
      if (effect.happened !== executed.has(effect.key)) violations.push(`effect ${effect.key}: resolved happened=${effect.happened} against the file`);
      const tellings = told.get(effect.key) ?? [];
      if (tellings.length !== 1 || tellings[0]!.fence !== '0' || tellings[0]!.run_id !== effect.run_id) {
        violations.push(`effect ${effect.key}: ${tellings.length} effect-resolved events (want 1, fence 0, of its run)`);
      }
    }
    if (effect.status === 'completed' && !executed.has(effect.key)) violations.push(`effect ${effect.key}: completed in the ledger but never executed`);
    if (effect.status === 'started' && closed.has(statusOf.get(effect.run_id) ?? '')) {
      violations.push(`effect ${effect.key}: still started on a closed run (never reconciled)`);
    }
  }
  for (const key of executed.keys()) if (!inLedger.has(key)) violations.push(`effect ${key}: executed without a ledger record`);
}

/** The step journal has no holes: steps 0..n-1 per run. */
async function checkSteps(pool: pg.Pool, violations: string[]) {
  const rows = (await pool.query<{ run_id: string; n: string; last: number }>(
    'select run_id, count(*)::text as n, max(step_no) as last from agent_kit_steps group by run_id')).rows;
  for (const row of rows) {
    if (Number(row.n) !== row.last + 1) violations.push(`run ${row.run_id}: step journal has holes (${row.n} steps, last ${row.last})`);
  }
}

function groupBy<T>(items: T[], keyOf: (item: T) => string): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const list = map.get(key);
    if (list) list.push(item);
    else map.set(key, [item]);
  }
  return map;
}
