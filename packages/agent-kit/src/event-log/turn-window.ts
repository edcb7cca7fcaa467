// A thread read a page of turns at a time (ADR-0049): which runs are its last N turns, or the N
// before a given turn, and which span of the event log holds them. A viewer that opens a long
// thread replays only that span instead of the whole log, and reads earlier pages on request.
import type { Queryable } from '../store/db.js';
import { toRun, type RunRow } from '../lease/run-row.js';
import { findRunFirstSeq, readLastSeq } from './read-events.js';
import { toMessageView, withAnswerLinks, type MessageRow, type MessageView, type ThreadRun } from './read-threads.js';

/** Where a page of turns lies in the thread's event log. */
export interface TurnWindow {
  /** The page's first and last turn numbers: null when there is no turn in it. */
  firstTurn: number | null;
  lastTurn: number | null;
  /**
   * Replay the page from this seq (the first turn's user message; 1 when the page starts at the
   * thread's first turn). A replay from here shows each of the page's turns from its start.
   */
  fromSeq: number;
  /**
   * And through this seq: the event before the next page's first turn, or null for the latest
   * page, which runs on to the thread's end. Events about older turns can come after `fromSeq`
   * (turns interleave, and an operator's verdict on an effect comes late): a viewer sets them
   * aside until it has read their turn.
   */
  throughSeq: number | null;
  /** Whether the thread has turns before this page. */
  earlier: boolean;
}

export interface TurnPage {
  window: TurnWindow;
  /** The page's runs in turn order. */
  runs: ThreadRun[];
  /** Their user messages and answers, in order. */
  messages: MessageView[];
}

export interface ReadTurnPageOptions {
  /** How many turns: the latest ones, or those before `beforeTurn`. */
  turns: number;
  /** Read the turns before this turn number (a page's `firstTurn`); the latest page without it. */
  beforeTurn?: number;
}

/** The highest turn number: turn_no is an integer column. */
export const maxTurnNo = 2_147_483_647;

/**
 * A page of the thread's turns, superseded ones left out (ADR-0091). The latest page also reaches
 * back to the oldest turn still open (queued, running or waiting), so that a viewer of the latest
 * page sees every turn that can still change. Every read goes through the (thread_id, turn_no)
 * key or a run's own indexes.
 */
export async function readTurnPage(db: Queryable, threadId: string, options: ReadTurnPageOptions): Promise<TurnPage> {
  const { window, runs } = await readTurnWindow(db, threadId, options);
  return { window, runs, messages: await listRunsMessages(db, runs.map((run) => run.id)) };
}

/** A page of the thread's turns without their messages: where it lies in the log, and its runs. */
export async function readTurnWindow(
  db: Queryable, threadId: string, options: ReadTurnPageOptions,
): Promise<Omit<TurnPage, 'messages'>> {
  const before = options.beforeTurn ?? maxTurnNo; // a bound, not a turn: no thread reaches it
  const newest = await db.query<RunRow>(
    `select * from agent_kit_runs where thread_id = $1 and turn_no < $2 and superseded_by is null
     order by turn_no desc limit $3`,
    [threadId, before, options.turns],
  );
  let firstTurn = newest.at(-1)?.turn_no ?? null;
  if (options.beforeTurn === undefined && firstTurn !== null) {
    const open = await oldestOpenTurn(db, threadId);
    if (open !== null && open < firstTurn) firstTurn = open;
  }
  const runs = firstTurn === null || firstTurn === newest.at(-1)?.turn_no
    ? newest.reverse()
    : (await db.query<RunRow>(
      `select * from agent_kit_runs where thread_id = $1 and turn_no >= $2 and turn_no < $3 and superseded_by is null
       order by turn_no`,
      [threadId, firstTurn, before],
    ));
  const earlier = firstTurn !== null && firstTurn > await firstTurnOf(db, threadId);
  const fromSeq = earlier ? ((await findRunFirstSeq(db, runs[0]!.id)) ?? 1) : 1;
  const window: TurnWindow = {
    firstTurn,
    lastTurn: runs.at(-1)?.turn_no ?? null,
    fromSeq,
    throughSeq: options.beforeTurn === undefined ? null : await seqBeforeTurn(db, threadId, options.beforeTurn),
    earlier,
  };
  return { window, runs: await withAnswerLinks(db, runs.map(toRun)) };
}

/** The thread's first turn number (turn numbers start at 1, but a test or a tool may delete runs). */
async function firstTurnOf(db: Queryable, threadId: string): Promise<number> {
  const rows = await db.query<{ turn_no: number | null }>(
    'select min(turn_no) as turn_no from agent_kit_runs where thread_id = $1 and superseded_by is null', [threadId],
  );
  return rows[0]?.turn_no ?? 1;
}

/** The oldest turn not yet closed: the active run's, or the first queued one's. */
async function oldestOpenTurn(db: Queryable, threadId: string): Promise<number | null> {
  const rows = await db.query<{ turn_no: number | null }>(
    `select least(
       (select turn_no from agent_kit_runs
        where thread_id = $1 and status in ('running', 'waiting_input', 'waiting_takeover')),
       (select min(turn_no) from agent_kit_runs where thread_id = $1 and status = 'queued')
     ) as turn_no`,
    [threadId],
  );
  return rows[0]?.turn_no ?? null;
}

/** The seq just before the first event of the first turn from `turnNo` on (the thread's last seq when none). */
async function seqBeforeTurn(db: Queryable, threadId: string, turnNo: number): Promise<number> {
  const rows = await db.query<{ id: string }>(
    'select id from agent_kit_runs where thread_id = $1 and turn_no >= $2 order by turn_no limit 1',
    [threadId, turnNo],
  );
  const firstSeq = rows[0] ? await findRunFirstSeq(db, rows[0].id) : null;
  if (firstSeq !== null) return firstSeq - 1;
  return readLastSeq(db, threadId);
}

/**
 * The user messages and answers of these runs, in order, read through the runs' message indexes
 * (a list of ids as one text parameter: both stores take it, where an array parameter differs).
 */
async function listRunsMessages(db: Queryable, runIds: string[]): Promise<MessageView[]> {
  if (runIds.length === 0) return [];
  const columns = 'id, run_id, client_message_id, role, content, partial, created_at';
  const rows = await db.query<MessageRow>(
    `select ${columns} from agent_kit_messages where run_id = any(string_to_array($1, ',')::uuid[]) and role = 'user'
     union all
     select ${columns} from agent_kit_messages where run_id = any(string_to_array($1, ',')::uuid[]) and role = 'assistant'
     order by created_at, id`,
    [runIds.join(',')],
  );
  return rows.map(toMessageView);
}
