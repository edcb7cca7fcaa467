// Read views of threads for viewers (the HTTP API, the CLI): who owns a thread, its messages and
// runs. One function per query; every list is limited, so no read grows with a thread's age.
import type { Queryable } from '../store/db.js';
import { toNumber } from '../store/db.js';
import { toRun, type Run, type RunRow } from '../lease/run-row.js';
import { afterCursor, toPage } from './pages.js';

export interface ThreadSummary {
  id: string;
  ownerId: string;
  title: string | null;
  createdAt: Date;
  lastSeq: number;
  /** The status of the thread's latest run, or null when it has none. */
  lastRunStatus: string | null;
}

export interface MessageView {
  id: string;
  runId: string | null;
  /** The id the client sent the message with (`clientMessageId`), if it sent one. */
  clientMessageId: string | null;
  role: string;
  text: string;
  content: Record<string, unknown>;
  partial: boolean;
  createdAt: Date;
}

/** Most messages or runs one thread read returns (the newest ones). */
export const maxThreadItems = 1_000;

/**
 * The thread's owner and the seq of its last event, or null when there is no such thread: the
 * access check of every route, and where a reader's cursor must not pass (ADR-0119).
 */
export async function readThreadHead(db: Queryable, threadId: string): Promise<{ ownerId: string; lastSeq: number } | null> {
  const rows = await db.query<{ owner_id: string; last_seq: number | string }>(
    'select owner_id, last_seq from agent_kit_threads where id = $1',
    [threadId],
  );
  return rows[0] ? { ownerId: rows[0].owner_id, lastSeq: toNumber(rows[0].last_seq) } : null;
}

/** The thread's owner, or null when there is no such thread. */
export async function readThreadOwner(db: Queryable, threadId: string): Promise<string | null> {
  return (await readThreadHead(db, threadId))?.ownerId ?? null;
}

interface ThreadRow {
  id: string;
  owner_id: string;
  title: string | null;
  created_at: Date;
  last_seq: number | string;
  last_run_status: string | null;
}

function toThreadSummary(row: ThreadRow): ThreadSummary {
  return {
    id: row.id,
    ownerId: row.owner_id,
    title: row.title,
    createdAt: new Date(row.created_at),
    lastSeq: toNumber(row.last_seq),
    lastRunStatus: row.last_run_status,
  };
}

const threadColumns = `t.id, t.owner_id, t.title, t.created_at, t.last_seq,
  (select r.status from agent_kit_runs r where r.thread_id = t.id order by r.turn_no desc limit 1)
    as last_run_status`;

export interface ListThreadsOptions {
  /** One owner's threads, or everyone's (null: operators). */
  ownerId: string | null;
  /** A thread of this list: only the threads listed after it (the next page; ADR-0044). */
  before?: string;
  limit: number;
}

/** A page of threads and the `before` of the next (older) page, or null when this is the last. */
export interface ThreadsPage {
  threads: ThreadSummary[];
  next: string | null;
}

/**
 * Threads, newest first: one owner's, or everyone's when `ownerId` is null (operators), from the
 * start or after `before`.
 * @throws InvalidArgumentError when `before` is not a thread this list could show.
 */
export async function listThreads(db: Queryable, options: ListThreadsOptions): Promise<ThreadSummary[]> {
  return queryThreads(db, options, Math.min(options.limit, maxThreadItems));
}

/** `listThreads` and whether older threads follow (`next`, the next page's `before`). */
export async function listThreadsPage(db: Queryable, options: ListThreadsOptions): Promise<ThreadsPage> {
  const limit = Math.min(options.limit, maxThreadItems);
  const { items, next } = toPage(await queryThreads(db, options, limit + 1), limit);
  return { threads: items, next };
}

const threadList = { table: 'agent_kit_threads', alias: 't', noun: 'thread' } as const;

async function queryThreads(db: Queryable, options: ListThreadsOptions, limit: number): Promise<ThreadSummary[]> {
  const params: unknown[] = [options.ownerId, limit];
  const page = await afterCursor(threadList, options, params, (id) => readThreadOwner(db, id));
  const rows = await db.query<ThreadRow>(
    `select ${threadColumns} from agent_kit_threads t
     where ($1::text is null or t.owner_id = $1)
       ${page}
     order by t.created_at desc, t.id limit $2`,
    params,
  );
  return rows.map(toThreadSummary);
}

/** One thread's summary, or null. */
export async function readThread(db: Queryable, threadId: string): Promise<ThreadSummary | null> {
  const rows = await db.query<ThreadRow>(
    `select ${threadColumns} from agent_kit_threads t where t.id = $1`,
    [threadId],
  );
  return rows[0] ? toThreadSummary(rows[0]) : null;
}

export interface MessageRow {
  id: string;
  run_id: string | null;
  client_message_id: string | null;
  role: string;
  content: Record<string, unknown>;
  partial: boolean;
  created_at: Date;
}

export function toMessageView(row: MessageRow): MessageView {
  return {
    id: row.id,
    runId: row.run_id,
    clientMessageId: row.client_message_id,
    role: row.role,
    text: typeof row.content.text === 'string' ? row.content.text : '',
    content: row.content,
    partial: row.partial,
    createdAt: new Date(row.created_at),
  };
}

/** A thread's messages in order (the newest maxThreadItems), without those of superseded turns (ADR-0091). */
export async function listThreadMessages(db: Queryable, threadId: string): Promise<MessageView[]> {
  const rows = await db.query<MessageRow>(
    `select * from (
       select id, run_id, client_message_id, role, content, partial, created_at from agent_kit_messages m
       where thread_id = $1 and not exists (
         select 1 from agent_kit_runs r where r.id = m.run_id and r.superseded_by is not null)
       order by created_at desc, id desc limit $2
     ) m order by created_at, id`,
    [threadId, maxThreadItems],
  );
  return rows.map(toMessageView);
}

/**
 * A run's messages in order: its user message(s) and its final answer. Read through the thread's
 * messages (agent_kit_messages__thread_id_idx): messages have no index by run of their own, and
 * one would cost every close an index entry.
 */
export async function listRunMessages(db: Queryable, runId: string): Promise<MessageView[]> {
  const rows = await db.query<MessageRow>(
    `select id, run_id, client_message_id, role, content, partial, created_at from agent_kit_messages
     where thread_id = (select thread_id from agent_kit_runs where id = $1) and run_id = $1
     order by created_at, id limit $2`,
    [runId, maxThreadItems],
  );
  return rows.map(toMessageView);
}

/**
 * The message a run answers, wherever it is now: the one the run was started with, or the edit
 * its regeneration made (ADR-0091). A plain regeneration takes that message along to the new run
 * and a restore brings it back (ADR-0096), so it is not always among the run's own messages.
 * Null for a run with no such event (a row written by hand).
 */
export async function readRunQuestion(db: Queryable, runId: string): Promise<MessageView | null> {
  const rows = await db.query<MessageRow>(
    `select id, run_id, client_message_id, role, content, partial, created_at from agent_kit_messages
     where id = agent_kit__opening_message($1)`,
    [runId],
  );
  return rows[0] ? toMessageView(rows[0]) : null;
}

/** A thread's runs by turn (the newest maxThreadItems), but superseded turns (ADR-0091). */
export async function listThreadRuns(db: Queryable, threadId: string): Promise<ThreadRun[]> {
  const rows = await db.query<RunRow>(
    `select * from (
       select * from agent_kit_runs where thread_id = $1 and superseded_by is null order by turn_no desc limit $2
     ) r order by turn_no`,
    [threadId, maxThreadItems],
  );
  return withAnswerLinks(db, rows.map(toRun));
}

/** What a regenerated run replaced: the run whose reply it asked again, and whether it edited the message. */
export interface Regenerated {
  runId: string;
  edited: boolean;
}

/** How a run came to hold its place in the conversation (ADR-0093, ADR-0096). */
export interface AnswerLinks {
  /** A regenerated run's: the run whose reply it replaced, and whether it edited the message; else null. */
  regenerates: Regenerated | null;
  /** A restored run's: the run it was last put back in place of; else null. */
  restoredOver: string | null;
}

/** A run as a thread's read has it, with its answer links. */
export type ThreadRun = Run & AnswerLinks;

/**
 * The answer links of these runs, by run id: their turn-regenerated and turn-restored events, in
 * the run-boundary index (a run without either has none in the map).
 */
export async function readAnswerLinks(db: Queryable, runIds: string[]): Promise<Map<string, AnswerLinks>> {
  if (runIds.length === 0) return new Map();
  const rows = await db.query<{ run_id: string; type: string; regenerates: string | null; replaces: string | null; edited: boolean | null }>(
    `select run_id, type, data->>'regenerates' as regenerates, data->>'replaces' as replaces, (data->>'edited')::boolean as edited
     from agent_kit_thread_events
     where run_id = any(string_to_array($1, ',')::uuid[]) and type in ('turn-regenerated', 'turn-restored')
     order by seq`, [runIds.join(',')]);
  const links = new Map<string, AnswerLinks>();
  for (const row of rows) {
    const link = links.get(row.run_id) ?? { regenerates: null, restoredOver: null };
    if (row.type === 'turn-regenerated' && row.regenerates) link.regenerates = { runId: row.regenerates, edited: row.edited === true };
    if (row.type === 'turn-restored' && row.replaces) link.restoredOver = row.replaces; // the latest
    links.set(row.run_id, link);
  }
  return links;
}

/** These runs, each with its answer links (nulls for a run that neither regenerated nor was restored). */
export async function withAnswerLinks(db: Queryable, runs: Run[]): Promise<ThreadRun[]> {
  const links = await readAnswerLinks(db, runs.map((run) => run.id));
  return runs.map((run) => ({ ...run, regenerates: null, restoredOver: null, ...links.get(run.id) }));
}

/** The id of the thread's latest run, or null when it has none. */
export async function findLatestRunId(db: Queryable, threadId: string): Promise<string | null> {
  const rows = await db.query<{ id: string }>(
    'select id from agent_kit_runs where thread_id = $1 order by turn_no desc limit 1',
    [threadId],
  );
  return rows[0]?.id ?? null;
}

/** Most runs `findRunsUnderWay` returns: the one under way and the turns queued behind it. */
export const maxRunsUnderWay = 20;

/**
 * The thread's runs not yet closed, in turn order, at most $2 of them: its one active run (running
 * or parked for the user or an operator) and its first queued ones. Two index lookups (0019).
 */
const openRunsSql = `select id, turn_no from (
    (select id, turn_no from agent_kit_runs
      where thread_id = $1 and status in ('running', 'waiting_input', 'waiting_takeover'))
    union all
    (select id, turn_no from agent_kit_runs
      where thread_id = $1 and status = 'queued' order by turn_no limit $2)
  ) open_runs order by turn_no limit $2`;

/**
 * The thread's runs not yet closed, in turn order (the one running or parked first, then the turns
 * queued behind it), at most `maxRunsUnderWay`.
 */
export async function findRunsUnderWay(db: Queryable, threadId: string): Promise<string[]> {
  const rows = await db.query<{ id: string }>(openRunsSql, [threadId, maxRunsUnderWay]);
  return rows.map((row) => row.id);
}

/**
 * The thread's first open run, when a segment may claim it, and how long until it may (<= 0: now):
 * queued (parked as a slice, for a model retry, or not yet claimed) when its job is due, or
 * running when its lease expires (its process died or froze, and a claim takes it over). Null
 * when the first open run waits for an answer or an operator, or the thread has none. One statement.
 */
export async function findNextTurnToRun(
  db: Queryable, threadId: string,
): Promise<{ runId: string; status: 'queued' | 'running'; dueInMs: number } | null> {
  const rows = await db.query<{ id: string; status: 'queued' | 'running'; due_in_ms: number | string }>(
    `select r.id, r.status,
       extract(epoch from coalesce(j.due_at, r.lease_expires_at) - agent_kit_now()) * 1000 as due_in_ms
     from (${openRunsSql}) first_open
     join agent_kit_runs r on r.id = first_open.id
     left join agent_kit_jobs j on j.run_id = r.id and r.status = 'queued'
     where (r.status = 'queued' and j.run_id is not null) or (r.status = 'running' and r.lease_expires_at is not null)`,
    [threadId, 1],
  );
  const [row] = rows;
  return row ? { runId: row.id, status: row.status, dueInMs: toNumber(row.due_in_ms) } : null;
}

/**
 * The run a viewer of the thread should see now: its earliest run not yet closed (the one running,
 * parked or next to run; later turns queue behind it), else its latest. One statement.
 */
export async function findCurrentRunId(db: Queryable, threadId: string): Promise<string | null> {
  const rows = await db.query<{ id: string | null }>(
    `select coalesce(
       (select id from (${openRunsSql}) first_open),
       (select id from agent_kit_runs where thread_id = $1 order by turn_no desc limit 1)
     ) as id`,
    [threadId, 1],
  );
  return rows[0]?.id ?? null;
}
