// Helpers for tests of the event log's viewers: a Db that hears no NOTIFY, one that counts its
// log reads, and draining a follower.
import type { EventFollower } from '../../src/event-log/follow-events.js';
import type { ThreadEvent } from '../../src/event-log/read-events.js';
import type { Db } from '../../src/store/db.js';

/** Every event the follower yields until it ends. */
export async function collect(follower: EventFollower): Promise<ThreadEvent[]> {
  const seen: ThreadEvent[] = [];
  for await (const event of follower) seen.push(event);
  return seen;
}

/** The same Db, counting the statements that read the event log. */
export function countingLogReads(inner: Db): {
  db: Db; reads: () => number; inFlight: () => number;
  /** Resolves once a LISTEN through this Db is in place (on Postgres, its connection's first wake). */
  listening: () => Promise<void>;
} {
  let reads = 0;
  let inFlight = 0;
  const query: Db['query'] = async (sql, params) => {
    if (!sql.includes('from agent_kit_thread_events')) return inner.query(sql, params);
    reads++;
    inFlight++;
    try {
      return await inner.query(sql, params);
    } finally {
      inFlight--;
    }
  };
  // The pg driver's listen resolves before its connection listens, and says so with an empty payload.
  let listened: () => void = () => {};
  const inPlace = new Promise<void>((resolve) => (listened = resolve));
  const listen: Db['listen'] = (channel, onNotify) => inner.listen(channel, (payload) => {
    if (payload === '') listened();
    onNotify(payload);
  });
  return {
    db: { ...inner, query, listen }, reads: () => reads, inFlight: () => inFlight,
    listening: () => (inner.kind === 'pg' ? inPlace : Promise.resolve()),
  };
}

/** `inner` as seen through a transaction-mode pooler: its LISTEN is accepted and hears nothing. */
export function withoutListen(inner: Db): Db {
  return { ...inner, listen: async () => async () => {} };
}
