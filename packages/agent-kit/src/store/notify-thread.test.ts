// notifyThread on both stores: this process's listeners hear a commit at once, a listener that
// throws reaches neither the writer nor the other listeners, and the NOTIFY for other processes
// carries a seq of the commit, merged as documented when writes of a thread are gathered.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import type { Db } from './db.js';
import { eventsChannel, notifyRunThread, notifyThread, onLocalNotify } from './notify-thread.js';
import { startTurn } from '../queue/start-turn.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

/**
 * LISTEN on the events channel, resolving once notifications are delivered: the pg driver's
 * listen resolves before its connection listens, and says so with an empty payload.
 */
async function listenToEvents(payloads: string[]): Promise<() => Promise<void>> {
  let ready: () => void = () => {};
  const listening = new Promise<void>((resolve) => (ready = resolve));
  const unlisten = await db.listen(eventsChannel, (payload) => {
    if (payload === '') ready();
    else payloads.push(payload);
  });
  if (db.kind === 'pg') await listening;
  return unlisten;
}

describe('notifyThread', () => {
  it("tells this process's listeners at once, even when one of them throws", () => {
    const heard: string[] = [];
    const stopThrowing = onLocalNotify(() => {
      throw new Error('a broken listener');
    });
    const stop = onLocalNotify((threadId, seq) => heard.push(`${threadId}:${seq}`));
    const threadId = randomUUID();
    try {
      expect(() => notifyThread(db, threadId, 7)).not.toThrow();
      notifyThread(db, threadId);
    } finally {
      stopThrowing();
      stop();
    }
    notifyThread(db, threadId, 9); // after stop: not heard
    expect(heard).toEqual([`${threadId}:7`, `${threadId}:0`]);
  });

  it('sends other processes one notification per thread, with the later seq or 0 if one is unknown', async () => {
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    const payloads: string[] = [];
    const unlisten = await listenToEvents(payloads);
    try {
      notifyThread(db, a, 3); // sent at once
      notifyThread(db, b, 7); // these wait for it, then go out together
      notifyThread(db, b, 5);
      notifyThread(db, c, 4);
      notifyThread(db, c);
      const ours = () => payloads.filter((p) => [a, b, c].some((id) => p.startsWith(id))).sort();
      for (let i = 0; i < 100 && ours().length < 3; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(ours()).toEqual([`${a}:3`, `${b}:7`, `${c}:0`].sort());
    } finally {
      await unlisten();
    }
  });

  it("wakes a run's thread, in this process and elsewhere, from the run's id", async () => {
    const payloads: string[] = [];
    const unlisten = await listenToEvents(payloads);
    const turn = await startTurn(db, { ownerId: 'u1', text: 'run actions' });
    const ours = () => payloads.filter((p) => p.startsWith(turn.threadId));
    const heard = async () => {
      for (let i = 0; i < 100 && ours().length < 1; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    };
    // startTurn wakes the thread too, without waiting for its NOTIFY to go out: heard before
    // counting, it is not taken for the wake under test (it once arrived late, as a second one).
    await heard();
    payloads.length = 0;
    const local: string[] = [];
    const stop = onLocalNotify((threadId, seq) => local.push(`${threadId}:${seq}`));
    try {
      notifyRunThread(db, turn.runId);
      notifyRunThread(db, randomUUID()); // no such run: nothing, and no error
      await heard();
      expect(local).toEqual([`${turn.threadId}:0`]);
      expect(ours()).toEqual([`${turn.threadId}:0`]);
    } finally {
      stop();
      await unlisten();
    }
  });
});
