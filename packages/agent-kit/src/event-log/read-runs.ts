// Read views of runs for operators and the run page: the run list with its lease and effect
// counts (all, and in doubt), and one run's effects, journal steps and segments. One function
// per query, all limited.
import type { Queryable } from '../store/db.js';
import { toNumber } from '../store/db.js';
import { toRun, type Run, type RunRow } from '../lease/run-row.js';
import { afterCursor, toPage } from './pages.js';
import { findRunFirstSeq, readRunSegments, type RunSegmentView } from './read-events.js';
import { listRunMessages, readAnswerLinks, readRunQuestion, type MessageView, type Regenerated } from './read-threads.js';
import { runUsage, type RunUsage } from './token-usage.js';

export interface RunSummary {
  id: string;
  threadId: string;
  ownerId: string;
  turnNo: number;
  status: string;
  /** The lease holder while running. */
  owner: string | null;
  fence: number;
  attempts: number;
  leaseExpiresAt: Date | null;
  /** Queued to wait out a model provider's Retry-After: no claim takes it before then (ADR-0098). */
  retryDueAt: Date | null;
  effects: number;
  /** Effects in doubt: nobody knows whether they happened (see the operating guide). */
  inDoubt: number;
  /**
   * The tokens in and out its journalled model steps reported, added up, named as in
   * RunDetail.usage; null when none reported (ADR-0065).
   */
  usage: { inputTokens: number; outputTokens: number } | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface EffectView {
  key: string;
  status: string;
  fence: number;
  tool: string;
  input: unknown;
  result: unknown;
  startedAt: Date;
  finishedAt: Date | null;
}

export interface StepView {
  stepNo: number;
  kind: string;
  fence: number;
  data: Record<string, unknown>;
  createdAt: Date;
}

export interface RunDetail {
  run: Run;
  ownerId: string;
  effects: EffectView[];
  steps: StepView[];
  segments: RunSegmentView[];
  messages: MessageView[];
  /**
   * The message the run answers: its first, or the edit its regeneration made (ADR-0091). It is
   * among `messages` unless a regeneration took it along (`question.runId` is then the run that has
   * it now); null for a run without one.
   */
  question: MessageView | null;
  /** The seq of the run's first event (its user message): a replay of the run starts there. */
  firstSeq: number | null;
  /** When the run's job is due (a drain may claim it from then), or null when it has none. */
  jobDueAt: Date | null;
  /** The tokens of the run's journalled model steps, added up; null when none reported any (ADR-0065). */
  usage: RunUsage | null;
  /**
   * For a run that asks an earlier turn again (ADR-0091), the run whose reply it replaced, and
   * whether the message was edited; null for any other run. (`run.supersededBy` is the other way.)
   */
  regenerates: Regenerated | null;
  /** For a run put back in the conversation (ADR-0096), the run it was last put back in place of; else null. */
  restoredOver: string | null;
}

/** Most rows one list returns. */
export const maxRunListSize = 1_000;

/** Who may see a run, where it stands, and what it waits for (kept after its answer). */
export interface RunAccess {
  threadId: string;
  ownerId: string;
  status: string;
  waitingFor: { id?: string; kind?: string } | null;
}

/** The run's thread and its owner, or null when there is no such run. The access check. */
export async function readRunAccess(
  db: Queryable, runId: string,
): Promise<RunAccess | null> {
  const rows = await db.query<{ thread_id: string; owner_id: string; status: string; waiting_for: RunAccess['waitingFor'] }>(
    `select r.thread_id, t.owner_id, r.status, r.waiting_for from agent_kit_runs r
     join agent_kit_threads t on t.id = r.thread_id where r.id = $1`,
    [runId],
  );
  const row = rows[0];
  return row ? { threadId: row.thread_id, ownerId: row.owner_id, status: row.status, waitingFor: row.waiting_for } : null;
}

/** The next queued turn of `runId`'s thread (the one its close made runnable), or null. */
export async function findNextQueuedRun(db: Queryable, runId: string): Promise<string | null> {
  const rows = await db.query<{ id: string }>(
    `select n.id from agent_kit_runs r
     join agent_kit_runs n on n.thread_id = r.thread_id and n.status = 'queued'
     where r.id = $1 order by n.turn_no limit 1`,
    [runId],
  );
  return rows[0]?.id ?? null;
}

interface RunSummaryRow {
  id: string;
  thread_id: string;
  owner_id: string;
  turn_no: number;
  status: string;
  owner: string | null;
  fence: number | string;
  attempts: number;
  lease_expires_at: Date | null;
  retry_due_at: Date | null;
  effects: number | string;
  in_doubt: number | string;
  usage: { input: number | string | null; output: number | string | null; reported: number | string } | null;
  created_at: Date;
  updated_at: Date;
}

export interface ListRunsOptions {
  /** One thread owner's runs, or everyone's (null). */
  ownerId: string | null;
  status?: string;
  /** Only runs with at least one effect in doubt (read through migration 0025's index). */
  inDoubt?: boolean;
  /** Only this thread's runs (its turns, regenerated ones included), read by the thread's index. */
  threadId?: string;
  /**
   * A run of this list (same owner scope): only the runs listed after it, older or as old with a
   * greater id. The next page starts before the last run of the one before; see `listRunsPage`.
   */
  before?: string;
  limit: number;
}

/** A page of runs and the `before` of the next (older) page, or null when this is the last. */
export interface RunsPage {
  runs: RunSummary[];
  next: string | null;
}

// A top-level EXISTS becomes a semi-join the planner can drive from the in-doubt index; written
// as `(not $4 or exists …)` it stays a filter on every run walked (220 ms, not 3, at 200,000
// runs). So the clause is added only when asked for. See ADR-0042.
const inDoubtClause =
  `and exists (select 1 from agent_kit_effects d where d.run_id = r.id and d.status = 'in_doubt')`;

/**
 * Runs, newest first: of one thread owner's threads, or all (null), optionally of one thread, by
 * status and only those with an effect in doubt, from the start or after `before`.
 * @throws InvalidArgumentError when `before` is not a run this list could show.
 */
export async function listRuns(db: Queryable, options: ListRunsOptions): Promise<RunSummary[]> {
  return queryRuns(db, options, Math.min(options.limit, maxRunListSize));
}

/**
 * `listRuns` and whether older runs follow: `next` is the `before` of the next page, or null
 * when this page holds the oldest run of the list.
 */
export async function listRunsPage(db: Queryable, options: ListRunsOptions): Promise<RunsPage> {
  const limit = Math.min(options.limit, maxRunListSize);
  const { items, next } = toPage(await queryRuns(db, options, limit + 1), limit);
  return { runs: items, next };
}

const runList = { table: 'agent_kit_runs', alias: 'r', noun: 'run' } as const;

async function queryRuns(db: Queryable, options: ListRunsOptions, limit: number): Promise<RunSummary[]> {
  const params: unknown[] = [options.ownerId, options.status ?? null, limit];
  // One thread's runs are read by the thread's index and then sorted: as a filter on the list's
  // created_at order, the planner walked the table back to an old thread's runs (32 ms for a
  // thread of 10,000 among 110k runs; 4.6 ms read by the thread, ADR-0095). `offset 0` keeps the
  // subquery apart so that it is read that way; the thread is named again for the join, which
  // the planner cannot see through that fence (else it scans every thread).
  let runs = 'agent_kit_runs r';
  let ofThread = '';
  if (options.threadId !== undefined) {
    params.push(options.threadId);
    const thread = `$${params.length}::uuid`;
    runs = `(select * from agent_kit_runs where thread_id = ${thread} offset 0) r`;
    ofThread = `and t.id = ${thread}`;
  }
  const page = await afterCursor(runList, options, params, async (id) => (await readRunAccess(db, id))?.ownerId ?? null);
  const rows = await db.query<RunSummaryRow>(
    `select r.id, r.thread_id, t.owner_id, r.turn_no, r.status, r.owner, r.fence, r.attempts,
            r.lease_expires_at, r.retry_due_at, r.created_at, r.updated_at,
            -- Subqueries in the select list run for the listed rows only, after the sort and
            -- limit; each reads the run's effects by run (the key, or the in-doubt index).
            (select count(*) from agent_kit_effects e where e.run_id = r.id) as effects,
            (select count(*) from agent_kit_effects e where e.run_id = r.id and e.status = 'in_doubt') as in_doubt,
            -- The journal's token counts (ADR-0065), read by run like the effects above.
            (select json_build_object('input', sum((s.data->'usage'->>'inputTokens')::numeric),
                                      'output', sum((s.data->'usage'->>'outputTokens')::numeric), 'reported', count(*))
             from agent_kit_steps s where s.run_id = r.id and s.kind = 'model' and s.data ? 'usage') as usage
     from ${runs} join agent_kit_threads t on t.id = r.thread_id
     where ($1::text is null or t.owner_id = $1) and ($2::text is null or r.status = $2)
       ${ofThread}
       ${options.inDoubt ? inDoubtClause : ''}
       ${page}
     order by r.created_at desc, r.id limit $3`,
    params,
  );
  return rows.map((row) => ({
    id: row.id,
    threadId: row.thread_id,
    ownerId: row.owner_id,
    turnNo: toNumber(row.turn_no),
    status: row.status,
    owner: row.owner,
    fence: toNumber(row.fence),
    attempts: toNumber(row.attempts),
    leaseExpiresAt: row.lease_expires_at ? new Date(row.lease_expires_at) : null,
    retryDueAt: row.retry_due_at ? new Date(row.retry_due_at) : null,
    effects: toNumber(row.effects),
    inDoubt: toNumber(row.in_doubt),
    usage: row.usage && toNumber(row.usage.reported) > 0
      ? { inputTokens: toNumber(row.usage.input ?? 0), outputTokens: toNumber(row.usage.output ?? 0) } : null,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  }));
}

/** A run's effect ledger, by start. */
export async function listRunEffects(db: Queryable, runId: string): Promise<EffectView[]> {
  const rows = await db.query<{
    key: string; status: string; fence: number | string; tool: string; input: unknown; result: unknown;
    started_at: Date; finished_at: Date | null;
  }>(
    `select key, status, fence, tool, input, result, started_at, finished_at from agent_kit_effects
     where run_id = $1 order by started_at, key limit $2`,
    [runId, maxRunListSize],
  );
  return rows.map((row) => ({
    key: row.key,
    status: row.status,
    fence: toNumber(row.fence),
    tool: row.tool,
    input: row.input,
    result: row.result,
    startedAt: new Date(row.started_at),
    finishedAt: row.finished_at ? new Date(row.finished_at) : null,
  }));
}

/** A run's step journal, in order. */
export async function listRunSteps(db: Queryable, runId: string): Promise<StepView[]> {
  const rows = await db.query<{
    step_no: number; kind: string; fence: number | string; data: Record<string, unknown>; created_at: Date;
  }>(
    `select step_no, kind, fence, data, created_at from agent_kit_steps
     where run_id = $1 order by step_no limit $2`,
    [runId, maxRunListSize],
  );
  return rows.map((row) => ({
    stepNo: toNumber(row.step_no),
    kind: row.kind,
    fence: toNumber(row.fence),
    data: row.data,
    createdAt: new Date(row.created_at),
  }));
}

/** Everything about one run, or null when there is no such run. */
export async function readRunDetail(db: Queryable, runId: string): Promise<RunDetail | null> {
  const rows = await db.query<RunRow & { thread_owner_id: string; job_due_at: Date | string | null }>(
    `select r.*, t.owner_id as thread_owner_id, j.due_at as job_due_at from agent_kit_runs r
     join agent_kit_threads t on t.id = r.thread_id
     left join agent_kit_jobs j on j.run_id = r.id where r.id = $1`,
    [runId],
  );
  const row = rows[0];
  if (!row) return null;
  const [effects, steps, segments, messages, question, firstSeq, links] = [
    await listRunEffects(db, runId),
    await listRunSteps(db, runId),
    await readRunSegments(db, runId),
    await listRunMessages(db, runId),
    await readRunQuestion(db, runId),
    await findRunFirstSeq(db, runId),
    (await readAnswerLinks(db, [runId])).get(runId),
  ];
  const jobDueAt = row.job_due_at === null ? null : new Date(row.job_due_at);
  return {
    run: toRun(row), ownerId: row.thread_owner_id, effects, steps, segments, messages, question, firstSeq, jobDueAt,
    usage: runUsage(steps),
    regenerates: links?.regenerates ?? null, restoredOver: links?.restoredOver ?? null,
  };
}
