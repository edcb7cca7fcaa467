// Waking a thread's viewers after a commit: NOTIFY on agent_kit_events in a statement of its own
// (see migration 0009 for why not inside the writing transaction). One notifying statement is in
// flight per Db; threads written meanwhile are all sent by the next one, after a short gap
// (notifyGapMs) that lets a busy process gather more of them. A lone write is sent at once, so
// viewers of a quiet process wait for nothing; a busy one sends at most one such statement per
// gap plus round trip, however many runs it drives (ADR-0021). The statement
// commits with synchronous_commit off: the events are already durable, and a notification lost in
// a crash only delays viewers to their next poll, so it need not wait for a WAL flush (which,
// on Postgres, it would do while holding the database-wide notify lock).
import type { Queryable } from './db.js';

export const eventsChannel = 'agent_kit_events';

/**
 * After a notifying statement, wait this long before the next one if more threads were written
 * meanwhile: under load, ~0.3–0.4 statements per scripted turn instead of ~1.2, for at most this
 * much more latency to a viewer of a busy process (whose text deltas come in 100 ms batches).
 */
export const notifyGapMs = 10;

interface Outbox {
  threads: Set<string>;
  sending: boolean;
}

const outboxes = new WeakMap<Queryable, Outbox>();

const notifySql = `select set_config('synchronous_commit', 'off', true), pg_notify($1, t || ':0')
  from unnest($2::text[]) t`;

/**
 * Tell viewers of `threadId` that its log grew. Fire-and-forget: a failure only delays viewers
 * until their next poll. Call it with the Db (not an open transaction) after the write committed.
 */
export function notifyThread(db: Queryable, threadId: string): void {
  let outbox = outboxes.get(db);
  if (!outbox) {
    outbox = { threads: new Set(), sending: false };
    outboxes.set(db, outbox);
  }
  outbox.threads.add(threadId);
  if (!outbox.sending) void send(db, outbox);
}

async function send(db: Queryable, outbox: Outbox): Promise<void> {
  outbox.sending = true;
  try {
    while (outbox.threads.size > 0) {
      const threads = [...outbox.threads];
      outbox.threads.clear();
      await db.query(notifySql, [eventsChannel, threads]).catch(() => undefined); // closed or unreachable: viewers poll
      if (outbox.threads.size > 0) await new Promise((resolve) => setTimeout(resolve, notifyGapMs));
    }
  } finally {
    outbox.sending = false;
  }
}

/** The same for a run: looks its thread up in the notifying statement itself. */
export function notifyRunThread(db: Queryable, runId: string): void {
  void db
    .query(
      `select pg_notify($1, thread_id::text || ':0') from agent_kit_runs where id = $2`,
      [eventsChannel, runId],
    )
    .catch(() => undefined);
}
