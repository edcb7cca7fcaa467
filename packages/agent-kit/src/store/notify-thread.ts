// Waking a thread's viewers after a commit: one NOTIFY on agent_kit_events in a statement of its
// own (see migration 0009 for why not inside the writing transaction). At most one notification
// per thread is in flight per Db; writes that land meanwhile fold into one more after it, so a
// streaming run costs at most one extra cheap statement per mirror write.
import type { Queryable } from './db.js';

export const eventsChannel = 'agent_kit_events';

interface Pending {
  again: boolean;
}

const inFlight = new WeakMap<Queryable, Map<string, Pending>>();

/**
 * Tell viewers of `threadId` that its log grew. Fire-and-forget: a failure only delays viewers
 * until their next poll. Call it with the Db (not an open transaction) after the write committed.
 */
export function notifyThread(db: Queryable, threadId: string): void {
  let threads = inFlight.get(db);
  if (!threads) {
    threads = new Map();
    inFlight.set(db, threads);
  }
  const running = threads.get(threadId);
  if (running) {
    running.again = true;
    return;
  }
  const pending: Pending = { again: false };
  threads.set(threadId, pending);
  const send = (): Promise<void> =>
    db
      .query('select pg_notify($1, $2)', [eventsChannel, `${threadId}:0`])
      .then(
        () => undefined,
        () => undefined, // store closed or unreachable: viewers poll
      )
      .then(() => {
        if (!pending.again) {
          threads.delete(threadId);
          return;
        }
        pending.again = false;
        return send();
      });
  void send();
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
