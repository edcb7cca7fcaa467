// Reading the durable thread event log (ADR-0003): one page after a cursor, in seq order. Seq is
// gap-free per thread and appends commit in seq order, so a page that skips a seq is a bug.
import { assert, InvalidArgumentError } from '../errors.js';
import type { Queryable } from '../store/db.js';
import { toNumber, uuidPattern } from '../store/db.js';

/** One event of a thread's log, as viewers receive it. */
export interface ThreadEvent {
  threadId: string;
  /** Position in the thread: 1, 2, 3, … with no gaps. The SSE `id:`. */
  seq: number;
  runId: string | null;
  /** The segment (lease fence) that wrote it; 0 = no segment (a user's message, an intent). */
  fence: number;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

/** agent_kit_thread_events as selected. */
export interface ThreadEventRow {
  thread_id: string;
  seq: number | string;
  run_id: string | null;
  fence: number | string;
  type: string;
  data: Record<string, unknown> | null;
  created_at: Date | string;
}

export function toThreadEvent(row: ThreadEventRow): ThreadEvent {
  return {
    threadId: row.thread_id,
    seq: toNumber(row.seq),
    runId: row.run_id,
    fence: toNumber(row.fence),
    type: row.type,
    data: row.data ?? {},
    createdAt: new Date(row.created_at),
  };
}

/** The wire shape of an event (SSE `data:`, `agent-kit events` lines): JSON-safe, no thread id. */
export interface ThreadEventJson {
  seq: number;
  runId: string | null;
  fence: number;
  type: string;
  data: Record<string, unknown>;
  createdAt: string;
}

export function toEventJson(event: ThreadEvent): ThreadEventJson {
  return {
    seq: event.seq,
    runId: event.runId,
    fence: event.fence,
    type: event.type,
    data: event.data,
    createdAt: event.createdAt.toISOString(),
  };
}

/** Largest page a caller may ask for: a viewer holds one page, so this bounds its memory. */
export const maxEventPageSize = 1_000;
/** Default page: large enough to replay a long turn in a few round trips. */
export const defaultEventPageSize = 200;

export interface ReadEventsOptions {
  threadId: string;
  /** Return events with seq > afterSeq (0 = from the start). */
  afterSeq?: number;
  /** At most this many (1..maxEventPageSize). */
  limit?: number;
}

const pageAsRows = `select thread_id, seq, run_id, fence, type, data, created_at from agent_kit_thread_events
  where thread_id = $1 and seq > $2 order by seq limit $3`;

// The same page as one JSON value: [[seq, run_id, fence, type, data, created_at], …]. PGlite hands
// every row and column through its wire protocol and type parsers in this thread, so a page of
// 1,000 events read 2.5–3× faster as one value (one JSON.parse); on Postgres the rows are faster
// (the server builds the JSON, the driver streams rows). Both forms give the same events: a test
// reads every page both ways. ADR-0025.
const pageAsJson = `select coalesce(json_agg(json_build_array(seq, run_id, fence, type, data, created_at)
  order by seq), '[]') as page from (select seq, run_id, fence, type, data, created_at
  from agent_kit_thread_events where thread_id = $1 and seq > $2 order by seq limit $3) p`;

type JsonEventTuple = [number, string | null, number, string, Record<string, unknown> | null, string];

/** One page read as rows or as one JSON value (unchecked: `readEvents` validates and checks). */
export async function readEventPage(
  db: Queryable, form: 'rows' | 'json', threadId: string, afterSeq: number, limit: number,
): Promise<ThreadEvent[]> {
  const params = [threadId, afterSeq, limit];
  if (form === 'rows') return (await db.query<ThreadEventRow>(pageAsRows, params)).map(toThreadEvent);
  const [row] = await db.query<{ page: JsonEventTuple[] | string }>(pageAsJson, params);
  const page = typeof row?.page === 'string' ? JSON.parse(row.page) as JsonEventTuple[] : row?.page ?? [];
  return page.map(([seq, runId, fence, type, data, createdAt]) => ({
    threadId, seq, runId, fence, type, data: data ?? {}, createdAt: new Date(createdAt),
  }));
}

/**
 * One page of a thread's events after a cursor, in seq order.
 * @throws InvalidArgumentError for a negative cursor or a limit outside 1..maxEventPageSize.
 * @throws AgentKitBug if the page skips a seq (the log must be gap-free).
 */
export async function readEvents(db: Queryable, options: ReadEventsOptions): Promise<ThreadEvent[]> {
  const afterSeq = options.afterSeq ?? 0;
  const limit = options.limit ?? defaultEventPageSize;
  if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) {
    throw new InvalidArgumentError(`the event cursor must be a non-negative integer, got ${afterSeq}`);
  }
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > maxEventPageSize) {
    throw new InvalidArgumentError(`the page size must be 1..${maxEventPageSize}, got ${limit}`);
  }
  const form = (db as { kind?: unknown }).kind === 'pglite' ? 'json' : 'rows';
  const events = await readEventPage(db, form, options.threadId, afterSeq, limit);
  events.forEach((event, index) => {
    const expected = afterSeq + index + 1;
    assert(event.seq === expected, `thread ${options.threadId} event seq is gap-free after ${afterSeq}`);
  });
  return events;
}

/**
 * The event types agent_kit_thread_events__run_boundary_idx holds per run (migrations 0020, 0035,
 * 0037). A run's first event is one of them: agent_kit_start_turn appends its message before
 * anything else, and agent_kit_regenerate_turn its turn-regenerated (a turn-restored is never first).
 */
const boundaryTypes = `'message', 'segment-started', 'run-parked', 'run-closed', 'segment-failed', 'turn-regenerated', 'turn-restored'`;

/**
 * The seq of the `message` event that carried a user message, or null if there is none. The chat
 * stream starts just before it, so the viewer sees its own message and everything after.
 */
export async function findMessageSeq(
  db: Queryable, threadId: string, messageId: string,
): Promise<number | null> {
  if (!uuidPattern.test(messageId)) return null;
  // Through the message's run: the boundary index holds each run's messages (migration 0020).
  const rows = await db.query<{ seq: number | string }>(
    `select e.seq from agent_kit_thread_events e
     where e.run_id = (select m.run_id from agent_kit_messages m where m.id = $2::text::uuid and m.thread_id = $1)
       and e.type = 'message' and e.data->>'messageId' = $2::text
     order by e.seq limit 1`,
    [threadId, messageId],
  );
  return rows[0] ? toNumber(rows[0].seq) : null;
}

/** A thread's events with afterSeq < seq <= throughSeq, read a page at a time. */
export async function readEventsThrough(
  db: Queryable, threadId: string, afterSeq: number, throughSeq: number,
): Promise<ThreadEvent[]> {
  const events: ThreadEvent[] = [];
  let cursor = afterSeq;
  while (cursor < throughSeq) {
    const page = await readEvents(db, { threadId, afterSeq: cursor, limit: maxEventPageSize });
    for (const event of page) if (event.seq <= throughSeq) events.push(event);
    if (page.length < maxEventPageSize) break;
    cursor = page.at(-1)!.seq;
  }
  return events;
}

/** The seq of a run's first event (its user message, or its turn-regenerated), or null when it has none. */
export async function findRunFirstSeq(db: Queryable, runId: string): Promise<number | null> {
  const rows = await db.query<{ seq: number | string | null }>(
    `select min(seq) as seq from agent_kit_thread_events
     where run_id = $1 and type in (${boundaryTypes})`,
    [runId],
  );
  const seq = rows[0]?.seq;
  return seq === null || seq === undefined ? null : toNumber(seq);
}

/**
 * The run's status and the seq of its latest park or close event (0 when none), read together
 * so a replay knows which boundary is the run's current one.
 */
export async function readRunBoundary(
  db: Queryable, runId: string,
): Promise<{ status: string; lastBoundarySeq: number } | null> {
  const rows = await db.query<{ status: string; seq: number | string | null }>(
    `select r.status, (select max(e.seq) from agent_kit_thread_events e
       where e.run_id = r.id and e.type in ('run-parked', 'run-closed')) as seq
     from agent_kit_runs r where r.id = $1`,
    [runId],
  );
  const row = rows[0];
  return row ? { status: row.status, lastBoundarySeq: toNumber(row.seq ?? 0) } : null;
}

/** One claim's worth of a run, reconstructed from its events. */
export interface RunSegmentView {
  fence: number;
  attempt: number | null;
  owner: string | null;
  startedSeq: number;
  startedAt: Date;
  /** When the segment stops itself (its invocation's deadline); null for a claim without a segment. */
  deadlineAt: string | null;
  /**
   * How it ended: the park or close status, `failed` (gave its lease up), `lost` (it wrote no end:
   * its process died or froze, or its deadline cut a tool call, which leaves the lease to run out;
   * and a later claim took the run on, with a
   * segment or without one: parked it for an operator, closed it cancelled, or salvaged it), or
   * null while it is live (or its lease ran out and nothing has happened to the run since).
   */
  endedAs: string | null;
  endedSeq: number | null;
  /** Parked until a model retry's wait ends, too long for the segment (ADR-0062): when. */
  retryDueAt?: string;
  /**
   * Why a segment parked the run queued (ADR-0121): `slice` (its invocation's time ran out),
   * `stop` (its process was stopping), `store-error`, `started-late` (ADR-0113). Absent on parks
   * written before migration 0046, and on other parks.
   */
  parkReason?: string;
  /** Why a `failed` segment failed: its error's name and message (ADR-0100: no stack). */
  error?: string;
  /** The claim gave the run up after its crash budget (ADR-0007): the run-salvaged event's reason. */
  salvaged?: string;
}

// Segment boundaries are few per run (one start and at most one end per claim): bounded. They
// are read through agent_kit_thread_events__run_boundary_idx, as a run's message and ends are.
const maxSegmentEvents = 2_000;

/** The run's segments, from its segment-started, run-parked, run-closed, segment-failed events (and run-salvaged). */
export async function readRunSegments(db: Queryable, runId: string): Promise<RunSegmentView[]> {
  const rows = await db.query<ThreadEventRow>(
    `select thread_id, seq, run_id, fence, type, data, created_at from agent_kit_thread_events
     where run_id = $1 and type in ('segment-started', 'run-parked', 'run-closed', 'segment-failed')
     order by seq limit $2`,
    [runId, maxSegmentEvents],
  );
  const segments: RunSegmentView[] = [];
  for (const event of rows.map(toThreadEvent)) {
    const current = segments[segments.length - 1];
    if (event.type === 'segment-started') {
      // (The claim after a crash or a freeze: the one before never ended, and lost its lease.)
      if (current && current.endedAs === null) [current.endedAs, current.endedSeq] = ['lost', event.seq];
      segments.push({
        fence: event.fence,
        attempt: typeof event.data.attempt === 'number' ? event.data.attempt : null,
        owner: typeof event.data.owner === 'string' ? event.data.owner : null,
        startedSeq: event.seq,
        startedAt: event.createdAt,
        deadlineAt: typeof event.data.deadlineAt === 'string' ? new Date(event.data.deadlineAt).toISOString() : null,
        endedAs: null,
        endedSeq: null,
      });
      continue;
    }
    if (event.fence > (current?.fence ?? 0)) {
      // A claim that ended or parked the run without starting a segment: a salvage past the crash
      // budget, a cancel of a run that waited, a takeover asked while the holder was dead, or an
      // operator's reply (ADR-0114). Its own row, so that the run's last fence is in the list; a
      // segment still open before it had lost its lease.
      if (current && current.endedAs === null) [current.endedAs, current.endedSeq] = ['lost', event.seq];
      const owner = typeof event.data.operator === 'string' ? `operator ${event.data.operator}` : null;
      segments.push({
        fence: event.fence, attempt: null, owner, startedSeq: event.seq, startedAt: event.createdAt, deadlineAt: null,
        endedAs: null, endedSeq: null,
      });
    }
    // (A takeover of a run never claimed parks it at fence 0: no claim, no row.)
    const segment = segments[segments.length - 1];
    if (!segment || event.fence !== segment.fence || segment.endedAs !== null) continue;
    const failed = event.type === 'segment-failed';
    segment.endedAs = failed ? 'failed' : String(event.data.status ?? event.type);
    // A run closed failed (the provider refused the request for good) says why in its close.
    if (failed || event.data.error !== undefined) segment.error = describeFailure(event.data.error);
    if (event.type === 'run-parked' && typeof event.data.dueAt === 'string') segment.retryDueAt = event.data.dueAt;
    if (event.type === 'run-parked' && typeof event.data.reason === 'string') segment.parkReason = event.data.reason;
    segment.endedSeq = event.seq;
  }
  await readSalvage(db, runId, rows[0]?.thread_id, segments);
  return segments;
}

/**
 * Why the run was salvaged, on the segment its salvage closed: a salvage writes its run-salvaged
 * event just before the run-closed one, in one transaction (salvageRun), so it is read by the
 * thread's key at that seq (the run-boundary index leaves run-salvaged out).
 */
async function readSalvage(db: Queryable, runId: string, threadId: string | undefined, segments: RunSegmentView[]): Promise<void> {
  const closed = segments.find((s) => s.endedAs === 'aborted' && s.endedSeq !== null);
  if (!closed || threadId === undefined) return;
  const [row] = await db.query<{ reason: string | null }>(
    `select data->>'reason' as reason from agent_kit_thread_events
     where thread_id = $1 and seq = $2 and run_id = $3 and type = 'run-salvaged'`,
    [threadId, closed.endedSeq! - 1, runId],
  );
  if (row) closed.salvaged = row.reason ?? 'salvaged';
}

/** "Name: message" of a segment-failed event's error. */
function describeFailure(error: unknown): string {
  const { name, message } = (typeof error === 'object' && error !== null ? error : {}) as { name?: unknown; message?: unknown };
  const said = typeof message === 'string' ? message : 'no message';
  return typeof name === 'string' && name !== '' && name !== 'Error' ? `${name}: ${said}` : said;
}

/** The seq of the thread's last event: 0 when it has none (or there is no such thread). */
export async function readLastSeq(db: Queryable, threadId: string): Promise<number> {
  const [row] = await db.query<{ last_seq: number | string }>('select last_seq from agent_kit_threads where id = $1', [threadId]);
  return toNumber(row?.last_seq ?? 0);
}
