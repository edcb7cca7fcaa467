// Waking a thread's viewers after a commit, in two ways (ADR-0031):
// - In this process, at once: every listener registered with onLocalNotify hears the thread (the
//   event hubs of followEvents). A chat request that runs its turn and streams it is woken by its
//   own commits, with no round trip, and also where LISTEN does not work (a transaction-mode
//   pooler).
// - Everywhere else: NOTIFY on agent_kit_events in a statement of its own (see migration 0009 for
//   why not inside the writing transaction). One notifying statement is in flight per Db; threads
//   written meanwhile are all sent by the next one, after a short gap (notifyGapMs) that lets a
//   busy process gather more of them. A lone write is sent at once, so viewers of a quiet process
//   wait for nothing; a busy one sends at most one such statement per gap plus round trip, however
//   many runs it drives (ADR-0021). The statement commits with synchronous_commit off: the events
//   are already durable, and a notification lost in a crash only delays viewers to their next poll,
//   so it need not wait for a WAL flush (which, on Postgres, it would do while holding the
//   database-wide notify lock).
// The payload is "threadId:seq", seq being an event of the commit, or 0 when unknown: a viewer
// that has already read that event (woken by this process, or by its poll) need not read again.
import type { Queryable } from './db.js';

export const eventsChannel = 'agent_kit_events';

/**
 * After a notifying statement, wait this long before the next one if more threads were written
 * meanwhile: under load, ~0.3–0.4 statements per scripted turn instead of ~1.2, for at most this
 * much more latency to a viewer of a busy process (whose text deltas come in 100 ms batches).
 */
export const notifyGapMs = 10;

interface Outbox {
  /** Thread id → the seq to send (0: some write of the thread has no known seq). */
  threads: Map<string, number>;
  /** The sending loop while it runs: it ends once every thread queued meanwhile was sent. */
  sending: Promise<void> | null;
}

type LocalListener = (threadId: string, seq: number) => void;
const localListeners = new Set<LocalListener>();

/**
 * Hear every thread this process wakes, right after its write committed, whatever the Db. A
 * wake is a hint to read: nothing may depend on hearing one (a viewer also polls). Returns the
 * function that stops listening.
 */
export function onLocalNotify(listener: LocalListener): () => void {
  localListeners.add(listener);
  return () => {
    localListeners.delete(listener);
  };
}

const outboxes = new WeakMap<Queryable, Outbox>();

const notifySql = `select set_config('synchronous_commit', 'off', true), pg_notify($1, t || ':' || s)
  from unnest($2::text[], $3::bigint[]) u(t, s)`;

/**
 * Tell viewers of `threadId` that its log grew, `seq` being one event of the commit (0 if not
 * known). Fire-and-forget: a failure only delays viewers until their next poll. Call it with the
 * Db (not an open transaction) after the write committed.
 */
export function notifyThread(db: Queryable, threadId: string, seq = 0): void {
  for (const listener of localListeners) {
    try {
      listener(threadId, seq);
    } catch {
      // A wake is a hint: the write has committed, and its caller must not see this.
    }
  }
  let outbox = outboxes.get(db);
  if (!outbox) {
    outbox = { threads: new Map(), sending: null };
    outboxes.set(db, outbox);
  }
  const queued = outbox.threads.get(threadId);
  // Two writes of a thread in one notification: the later seq, unless either is unknown.
  outbox.threads.set(threadId, queued === undefined ? seq : queued === 0 || seq === 0 ? 0 : Math.max(queued, seq));
  outbox.sending ??= send(db, outbox);
}

/**
 * Wait until every notification queued on `db` has been sent (or failed): a process about to
 * close its store (a command of the CLI) calls it so that its writes' viewers hear them now, not
 * at their next poll.
 */
export async function flushNotifications(db: Queryable): Promise<void> {
  await outboxes.get(db)?.sending;
}

async function send(db: Queryable, outbox: Outbox): Promise<void> {
  await Promise.resolve(); // set outbox.sending before the loop can end and clear it
  try {
    while (outbox.threads.size > 0) {
      const threads = [...outbox.threads.keys()];
      const seqs = [...outbox.threads.values()];
      outbox.threads.clear();
      // Closed or unreachable: viewers poll.
      await db.query(notifySql, [eventsChannel, threads, seqs]).catch(() => undefined);
      if (outbox.threads.size > 0) await new Promise((resolve) => setTimeout(resolve, notifyGapMs));
    }
  } finally {
    outbox.sending = null;
  }
}

/**
 * The same for a run, after a statement that wrote to its thread's log (an answer, a cancel, an
 * operator's takeover or release): looks the thread up, then wakes as notifyThread does.
 */
export function notifyRunThread(db: Queryable, runId: string): void {
  void db
    .query<{ thread_id: string }>('select thread_id from agent_kit_runs where id = $1', [runId])
    .then((rows) => {
      if (rows[0]) notifyThread(db, String(rows[0].thread_id));
    })
    .catch(() => undefined);
}
