// Group commit (ADR-0021). A process driving many runs sends the writes of one kind that pile up
// while such a write is in flight as ONE statement: one round trip and one transaction instead
// of one each. A write made while none of its kind is in flight goes out at once in its
// one-run form, so a quiet process waits for nothing and sends exactly what it sent before.
// Each grouped element is the one-run SQL function called for that element, with its own
// (owner, fence) guard, so a rejected guard affects only its element. If the database refused
// the grouped statement, it wrote nothing, and each write is sent again on its own: every caller
// gets its own result or its own error; so too if the database cancelled it (a statement timeout).
// If the connection failed instead, the statement may have committed, so nothing is sent again:
// every caller gets the store error it would have got alone.
import { coerceError, StoreUnavailableError } from '../errors.js';
import type { Db, Queryable } from './db.js';

/** One kind of groupable write: its one-run statement and its grouped statement. */
export interface GroupedWrite<A, R> {
  /** A name for the queue; writes of one kind on one Db share it. */
  name: string;
  /** Send one write on its own. */
  one(db: Queryable, args: A): Promise<R>;
  /** Send several in one statement; results in the order of `args`. Throws = nothing written. */
  many(db: Queryable, args: A[]): Promise<R[]>;
}

/** The most writes in one grouped statement; the SQL functions refuse more. */
export const groupMax = 100;

interface Waiting<A, R> {
  args: A;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

interface Queue<A, R> {
  waiting: Waiting<A, R>[];
  inFlight: boolean;
}

const queues = new WeakMap<Db, Map<string, Queue<any, any>>>();

/**
 * Send `args` as `kind`: at once if no write of this kind is in flight on `db`, else with the
 * others waiting when that one returns. Inside a transaction (`db` is not a Db) always alone.
 */
export function writeGrouped<A, R>(db: Queryable, kind: GroupedWrite<A, R>, args: A): Promise<R> {
  if (!isDb(db)) return kind.one(db, args);
  let byKind = queues.get(db);
  if (!byKind) {
    byKind = new Map();
    queues.set(db, byKind);
  }
  let queue: Queue<A, R> | undefined = byKind.get(kind.name);
  if (!queue) {
    queue = { waiting: [], inFlight: false };
    byKind.set(kind.name, queue);
  }
  const q = queue;
  return new Promise<R>((resolve, reject) => {
    q.waiting.push({ args, resolve, reject });
    if (!q.inFlight) void drain(db, kind, q);
  });
}

async function drain<A, R>(db: Db, kind: GroupedWrite<A, R>, q: Queue<A, R>): Promise<void> {
  q.inFlight = true;
  try {
    while (q.waiting.length > 0) {
      const batch = q.waiting.splice(0, groupMax);
      if (batch.length === 1) await sendOne(db, kind, batch[0]!);
      else await sendMany(db, kind, batch);
    }
  } finally {
    q.inFlight = false;
  }
}

async function sendOne<A, R>(db: Queryable, kind: GroupedWrite<A, R>, w: Waiting<A, R>): Promise<void> {
  try {
    w.resolve(await kind.one(db, w.args));
  } catch (error) {
    w.reject(error);
  }
}

async function sendMany<A, R>(db: Queryable, kind: GroupedWrite<A, R>, batch: Waiting<A, R>[]): Promise<void> {
  let results: R[];
  try {
    results = await kind.many(db, batch.map((w) => w.args));
  } catch (raw) {
    const error = coerceError(raw);
    if (error instanceof StoreUnavailableError && !cancelled(error)) {
      // Lost connection: the outcome is unknown, as for a write sent alone. Sending again could
      // write a step twice; each segment handles the store error as it always does.
      for (const w of batch) w.reject(error);
      return;
    }
    // The database refused the statement (one element's bad argument, say) or cancelled it (a
    // statement timeout), and rolled it back: each write on its own now, so each caller sees its
    // own outcome, instead of every segment of the group stopping until its lease expires.
    await Promise.all(batch.map((w) => sendOne(db, kind, w)));
    return;
  }
  batch.forEach((w, i) => w.resolve(results[i]!));
}

/**
 * The server cancelled the statement at its statement timeout (57014, "canceling statement due to
 * statement timeout"). Postgres stops that timer before it commits, so the statement's implicit
 * transaction was rolled back: nothing of it was written. A cancel request (also 57014) is not
 * taken as proof, nor is a message in another language: those keep the cautious path.
 */
function cancelled(error: StoreUnavailableError): boolean {
  const cause = error.cause as { code?: unknown; message?: unknown } | undefined;
  return cause?.code === '57014' && /statement timeout/.test(String(cause.message));
}

function isDb(q: Queryable): q is Db {
  return typeof (q as Partial<Db>).transaction === 'function' && typeof (q as Partial<Db>).listen === 'function';
}

/** Rows of a grouped statement, each with `i` (its element's index), spread back into order. */
export function byIndex<T extends { i: number | string }>(rows: T[], count: number): (T | undefined)[] {
  const out: (T | undefined)[] = new Array(count).fill(undefined);
  for (const row of rows) out[Number(row.i)] = row;
  return out;
}
