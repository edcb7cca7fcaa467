// The read side of the thread event log on both stores: a live follower sees exactly what a later
// replay from any cursor returns, many viewers of one thread get the same gapless sequence from
// shared reads, a follower hands out the rest of its page without reading and reads larger pages
// while it catches up, and it releases its listener and timers when closed or aborted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import { fakeRunSegment, testOwner } from '../../test/harness/fake-segment.js';
import { configFromEnv } from '../config.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import type { Runtime } from '../turn/types.js';
import { followEvents, hubTiming, type EventFollower } from './follow-events.js';
import { readEvents, readRunSegments, type ThreadEvent } from './read-events.js';
import { notifyThread } from '../store/notify-thread.js';

let db: Db;
let rt: Runtime;
beforeAll(async () => {
  db = await openTestDb();
  rt = { db, model: 'test-model', tools: {}, config: configFromEnv({}) };
});
afterAll(async () => {
  await db.close();
});

async function collect(follower: EventFollower): Promise<ThreadEvent[]> {
  const seen: ThreadEvent[] = [];
  for await (const event of follower) seen.push(event);
  return seen;
}

/** The same Db, counting the statements that read the event log. */
function countingLogReads(inner: Db): { db: Db; reads: () => number } {
  let reads = 0;
  const query: Db['query'] = (sql, params) => {
    if (sql.includes('from agent_kit_thread_events')) reads++;
    return inner.query(sql, params);
  };
  return { db: { ...inner, query }, reads: () => reads };
}

/** `inner` as seen through a transaction-mode pooler: its LISTEN is accepted and hears nothing. */
function withoutListen(inner: Db): Db {
  return { ...inner, listen: async () => async () => {} };
}

const closesRun = (runId: string) => (e: ThreadEvent) => e.runId === runId && e.type === 'run-closed';

describe('followEvents', () => {
  it('a live follower sees what a replay from any cursor returns, with no gaps', async () => {
    const turn = await startTurn(db, { ownerId: 'u1', text: 'hi' });
    // A one-minute poll: every event must come by a wake, so a lost one fails the test by timeout.
    // The second follower hears no NOTIFY either (a pooler): only this process's wakes reach it.
    const deaf = withoutListen(db);
    const followers = [db, deaf].map((viewerDb) => followEvents(viewerDb, {
      threadId: turn.threadId, until: closesRun(turn.runId), pollIntervalMs: 60_000,
    }));
    const live = Promise.all(followers.map(collect));
    const deltas = Array.from({ length: 12 }, (_, i) => `w${i} `);
    await fakeRunSegment({ deltas, delayMs: 2 })(rt, { runId: turn.runId, owner: testOwner() });
    const [seen = [], seenWithoutListen] = await live;
    expect(seenWithoutListen).toEqual(seen);
    expect(seen.map((e) => e.seq)).toEqual(seen.map((_, i) => i + 1));
    expect(seen.map((e) => e.type)).toEqual([
      'message', 'run-queued', 'segment-started', ...deltas.map(() => 'text-delta'), 'run-closed',
    ]);
    expect(seen.at(-1)!.data.text).toBe(deltas.join(''));
    for (let cursor = 0; cursor <= seen.length; cursor++) {
      const replay = await readEvents(db, { threadId: turn.threadId, afterSeq: cursor, limit: 1000 });
      expect(replay).toEqual(seen.slice(cursor));
    }
  });

  it('fifty viewers of one thread all receive the same gapless sequence', async () => {
    const turn = await startTurn(db, { ownerId: 'u1', text: 'many' });
    // Count the log reads the viewers make: shared reads make it far fewer than viewers × events.
    const { db: counted, reads } = countingLogReads(db);
    // A one-minute poll: every event must come by a wake, so a lost one fails the test by timeout.
    const followers = Array.from({ length: 50 }, (_, i) => followEvents(counted, {
      threadId: turn.threadId, afterSeq: i % 3, until: closesRun(turn.runId), pollIntervalMs: 60_000,
    }));
    const views = Promise.all(followers.map(collect));
    const deltas = Array.from({ length: 20 }, (_, i) => `t${i}`);
    await fakeRunSegment({ deltas, delayMs: 1 })(rt, { runId: turn.runId, owner: testOwner() });
    const all = await views;
    const full = await readEvents(db, { threadId: turn.threadId, limit: 1000 });
    all.forEach((seen, i) => expect(seen).toEqual(full.slice(i % 3)));
    console.log(`50 viewers, ${full.length} events: ${reads()} log reads`);
    expect(reads()).toBeLessThan(50 * full.length / 4);
  });

  it('replays a long log page by page when the page is small', async () => {
    const turn = await startTurn(db, { ownerId: 'u1', text: 'pages' });
    const deltas = Array.from({ length: 25 }, (_, i) => `p${i}`);
    await fakeRunSegment({ deltas })(rt, { runId: turn.runId, owner: testOwner() });
    const seen = await collect(followEvents(db, { threadId: turn.threadId, pageSize: 4, until: closesRun(turn.runId) }));
    expect(seen).toEqual(await readEvents(db, { threadId: turn.threadId, limit: 1000 }));
  });

  it('hands out the rest of a page without a read, then catches up in pages of 1,000', async () => {
    const turn = await startTurn(db, { ownerId: 'u1', text: 'catch up' });
    // startTurn wrote two events (the message, run-queued): 1,498 more make 1,500.
    await db.query(
      `select count(agent_kit__append_event($1, $2, 1, 'text-delta',
         jsonb_build_object('text', 't' || g))) from generate_series(1, 1498) g`,
      [turn.threadId, turn.runId],
    );
    const limits: unknown[] = [];
    const counted: Db = {
      ...db,
      query: (sql, params) => {
        if (sql.includes('from agent_kit_thread_events')) limits.push(params?.[2]);
        return db.query(sql, params);
      },
    };
    const follower = followEvents(counted, { threadId: turn.threadId });
    const seen: ThreadEvent[] = [];
    const takeBuffered = () => {
      for (let e = follower.nextBuffered(); e; e = follower.nextBuffered()) seen.push(e);
    };
    expect(follower.nextBuffered()).toBeUndefined(); // nothing read yet, and it does not read
    for (const pageSize of [200, 1000, 300]) {
      const before = seen.length;
      seen.push((await follower.next()).value!);
      takeBuffered();
      expect(seen.length - before).toBe(pageSize);
      expect(follower.cursor).toBe(seen.length);
    }
    expect(limits).toEqual([200, 1000, 1000]);
    follower.close();
    expect(seen.map((e) => e.seq)).toEqual(seen.map((_, i) => i + 1));
  });

  it('nextBuffered stops at the event `until` accepts and ends the follower', async () => {
    const turn = await startTurn(db, { ownerId: 'u1', text: 'until' });
    const owner = testOwner();
    await fakeRunSegment({ deltas: ['a', 'b', 'c'] })(rt, { runId: turn.runId, owner });
    const until = (e: ThreadEvent) => e.type === 'segment-started';
    const follower = followEvents(db, { threadId: turn.threadId, until });
    const seen = [(await follower.next()).value!];
    for (let e = follower.nextBuffered(); e; e = follower.nextBuffered()) seen.push(e);
    expect(seen.map((e) => e.type)).toEqual(['message', 'run-queued', 'segment-started']);
    expect(follower.cursor).toBe(3);
    expect(await follower.next()).toEqual({ value: undefined, done: true });
  });

  it('an abort ends a waiting follower and leaves no timer behind', async () => {
    const turn = await startTurn(db, { ownerId: 'u1', text: 'idle' });
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const followThenAbort = async () => {
      const controller = new AbortController();
      const follower = followEvents(db, { threadId: turn.threadId, afterSeq: 2, signal: controller.signal });
      const pending = follower.next();
      await new Promise((resolve) => setTimeout(resolve, 30));
      controller.abort();
      expect(await pending).toEqual({ value: undefined, done: true });
      expect(await follower.next()).toEqual({ value: undefined, done: true });
      // The LISTEN connection goes back to the pool asynchronously, where pg-pool arms its idle
      // timer: let that settle so only the follower's own timers are counted.
      await new Promise((resolve) => setTimeout(resolve, 50));
    };
    await followThenAbort(); // the pool now holds the connections a follower uses, idle
    const timersBefore = timers();
    await followThenAbort();
    expect(timers()).toBeLessThanOrEqual(timersBefore);
  });

  it('keeps one LISTEN for viewers that come one after another, and drops it after the linger', async () => {
    const saved = hubTiming.listenLingerMs;
    hubTiming.listenLingerMs = 300;
    let listens = 0;
    let unlistens = 0;
    // A Db of its own (its own hub), counting the LISTEN connections it opens and closes.
    const counted: Db = {
      ...db,
      listen: async (channel, onNotify) => {
        listens++;
        const unlisten = await db.listen(channel, onNotify);
        return async () => {
          unlistens++;
          await unlisten();
        };
      },
    };
    try {
      const turn = await startTurn(db, { ownerId: 'u1', text: 'one chat after another' });
      for (let chat = 0; chat < 3; chat++) { // a process serving one chat at a time
        const follower = followEvents(counted, { threadId: turn.threadId, pollIntervalMs: 60_000 });
        expect((await follower.next()).value).toMatchObject({ seq: 1 });
        follower.close();
        await new Promise((resolve) => setTimeout(resolve, 100)); // under the linger
      }
      expect([listens, unlistens]).toEqual([1, 0]);
      await new Promise((resolve) => setTimeout(resolve, 500)); // past it
      expect([listens, unlistens]).toEqual([1, 1]);
      // The next viewer listens again, and still hears a NOTIFY from another process.
      const follower = followEvents(counted, { threadId: turn.threadId, afterSeq: 2, pollIntervalMs: 60_000 });
      const pending = follower.next();
      await new Promise((resolve) => setTimeout(resolve, 200)); // the listener connects
      await db.query(`select agent_kit__append_event($1, $2, 0, 'note', '{}')`, [turn.threadId, turn.runId]);
      expect((await pending).value).toMatchObject({ seq: 3 });
      follower.close();
      expect(listens).toBe(2);
    } finally {
      hubTiming.listenLingerMs = saved;
    }
  });

  it('picks up an event appended after it started waiting', async () => {
    const turn = await startTurn(db, { ownerId: 'u1', text: 'wake' });
    const follower = followEvents(db, { threadId: turn.threadId, afterSeq: 2, pollIntervalMs: 60_000 });
    const pending = follower.next();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const startedAt = Date.now();
    await db.query(`select agent_kit__append_event($1, $2, 0, 'note', '{"n":1}')`, [turn.threadId, turn.runId]);
    notifyThread(db, turn.threadId); // appends through plain SQL notify themselves (migration 0009)
    const next = await pending;
    follower.close();
    expect(next.value).toMatchObject({ seq: 3, type: 'note', data: { n: 1 } });
    // With a one-minute poll, only the notify can have woken it this fast.
    expect(Date.now() - startedAt).toBeLessThan(5_000);
  });

  it('wakes on a NOTIFY from another process', async () => {
    const turn = await startTurn(db, { ownerId: 'u1', text: 'remote' });
    const follower = followEvents(db, { threadId: turn.threadId, afterSeq: 2, pollIntervalMs: 60_000 });
    const pending = follower.next();
    await new Promise((resolve) => setTimeout(resolve, 50));
    // What another process's notifyThread sends; nothing in this process is told.
    await db.query(`select agent_kit__append_event($1, $2, 0, 'note', '{"n":2}')`, [turn.threadId, turn.runId]);
    await db.query(`select pg_notify('agent_kit_events', $1 || ':0')`, [turn.threadId]);
    const next = await pending;
    follower.close();
    expect(next.value).toMatchObject({ seq: 3, type: 'note' });
  });

  it("wakes its own process's viewers at once where LISTEN delivers nothing (a transaction pooler)", async () => {
    const deaf = withoutListen(db);
    const turn = await startTurn(db, { ownerId: 'u1', text: 'pooled' });
    const follower = followEvents(deaf, { threadId: turn.threadId, afterSeq: 2, pollIntervalMs: 60_000 });
    const pending = follower.next();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const [row] = await db.query<{ seq: number }>(
      `select agent_kit__append_event($1, $2, 0, 'note', '{"n":3}') as seq`, [turn.threadId, turn.runId],
    );
    notifyThread(db, turn.threadId, Number(row!.seq)); // any Db of this process
    // With a one-minute poll and no LISTEN, only the local wake can come within five seconds.
    const late = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), 5_000).unref());
    const next = await Promise.race([pending, late]);
    follower.close();
    expect(next).not.toBe('late');
    expect(next).toMatchObject({ value: { seq: 3, type: 'note' } });
  });

  it('polls at the mirror cadence while polls find events no notification announced, then backs off', async () => {
    // A viewer in another process behind a transaction pooler: its LISTEN hears nothing and the
    // writer's local wake never reaches it, so only its poll can find the events.
    const deaf = withoutListen(db);
    const { db: counting, reads } = countingLogReads(deaf);
    const turn = await startTurn(db, { ownerId: 'u1', text: 'unheard' });
    // Written long ago, so the viewer does not start at the quick pace (the next test does).
    await db.query(`update agent_kit_thread_events set created_at = now() - interval '1 hour' where thread_id = $1`,
      [turn.threadId]);
    const follower = followEvents(counting, { threadId: turn.threadId, afterSeq: 2, pollIntervalMs: 2_000 });
    const appendedAt = new Map<number, number>();
    const received: Array<{ seq: number; at: number }> = [];
    const viewing = (async () => {
      for await (const event of follower) received.push({ seq: event.seq, at: Date.now() });
    })();
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    await sleep(100); // the viewer has read nothing and waits for its 2 s poll
    for (const end = Date.now() + 3_000; Date.now() < end;) {
      const [row] = await db.query<{ seq: number }>(
        `select agent_kit__append_event($1, $2, 0, 'note', '{}') as seq`, [turn.threadId, turn.runId],
      ); // no notification: the writer is elsewhere
      appendedAt.set(Number(row!.seq), Date.now());
      await sleep(50);
    }
    await sleep(300);
    const readsAtStop = reads();
    await sleep(2_000);
    const idleReads = reads() - readsAtStop;
    follower.close();
    await viewing;
    expect(received.map((r) => r.seq)).toEqual([...appendedAt.keys()]);
    // The first poll (2 s) finds a batch; after it the viewer polls every 100 ms while events keep
    // coming. With the 2 s poll alone, the events appended after that would wait 0.5-2 s each.
    const discoveredAt = received[0]!.at;
    expect(discoveredAt - appendedAt.get(received[0]!.seq)!).toBeGreaterThan(1_000); // by the poll
    const rest = received.filter((r) => appendedAt.get(r.seq)! > discoveredAt)
      .map((r) => r.at - appendedAt.get(r.seq)!).sort((a, b) => a - b);
    console.log(`unheard viewer: median lag ${rest[rest.length >> 1]} ms over ${rest.length} events after the first poll; ${idleReads} reads in 2 s idle`);
    expect(rest.length).toBeGreaterThan(5);
    expect(rest[rest.length >> 1]).toBeLessThan(700);
    // Once polls find nothing the interval doubles back to 2 s: a few reads, not one per 100 ms.
    expect(idleReads).toBeLessThanOrEqual(6);
  });

  it('joins a thread written moments ago at the fast pace, and an old one at its interval', async () => {
    // A reload mid-answer on another instance behind a pooler: no LISTEN, no wake from the writer.
    const deaf = withoutListen(db);
    // Replaying from the start, or resuming at the log's end (an EventSource reconnecting after
    // its response was cut: its first page is empty).
    const waitForNextEvent = async (age: string, from: 'start' | 'end' = 'start') => {
      const turn = await startTurn(db, { ownerId: 'u1', text: 'joining' });
      await db.query(`update agent_kit_thread_events set created_at = now() - $2::interval where thread_id = $1`,
        [turn.threadId, age]);
      const afterSeq = from === 'start' ? 0 : 2;
      const follower = followEvents(deaf, { threadId: turn.threadId, afterSeq, pollIntervalMs: 2_000 });
      if (from === 'start') {
        expect((await follower.next()).value).toMatchObject({ seq: 1 });
        expect((await follower.next()).value).toMatchObject({ seq: 2 });
      }
      const pending = follower.next(); // at the end: waits
      await new Promise((resolve) => setTimeout(resolve, 20));
      await db.query(`select agent_kit__append_event($1, $2, 0, 'note', '{}')`, [turn.threadId, turn.runId]);
      const startAt = Date.now();
      expect((await pending).value).toMatchObject({ seq: 3 });
      follower.close();
      return Date.now() - startAt;
    };
    expect(await waitForNextEvent('0 seconds')).toBeLessThan(1_000); // ~100 ms
    expect(await waitForNextEvent('1 hour')).toBeGreaterThan(1_000); // the 2 s poll
    expect(await waitForNextEvent('0 seconds', 'end')).toBeLessThan(1_000);
    expect(await waitForNextEvent('1 hour', 'end')).toBeGreaterThan(1_000);
  });

  it('stops polling quickly once a wake brings the events of a thread it joined', async () => {
    const { db: counting, reads } = countingLogReads(db);
    const turn = await startTurn(db, { ownerId: 'u1', text: 'heard after joining' }); // moments ago
    const follower = followEvents(counting, { threadId: turn.threadId, pollIntervalMs: 2_000 });
    expect((await follower.next()).value).toMatchObject({ seq: 1 });
    expect((await follower.next()).value).toMatchObject({ seq: 2 });
    const pending = follower.next();
    const [row] = await db.query<{ seq: number }>(
      `select agent_kit__append_event($1, $2, 0, 'note', '{}') as seq`, [turn.threadId, turn.runId],
    );
    notifyThread(db, turn.threadId, Number(row!.seq)); // as the writing process does
    expect((await pending).value).toMatchObject({ seq: 3 });
    const idle = follower.next();
    const readsAfterWake = reads();
    await new Promise((resolve) => setTimeout(resolve, 1_200)); // under the 2 s poll
    // Quick polls (100, 200, 400 ms…) would have read three times by now; the NOTIFY that
    // follows the local wake may cause one read if it arrives while the first is in flight.
    expect(reads() - readsAfterWake).toBeLessThanOrEqual(1);
    follower.close();
    expect(await idle).toEqual({ value: undefined, done: true });
  });

  it('reads once per notification and polls no faster where notifications arrive', async () => {
    const { db: counting, reads } = countingLogReads(db);
    const turn = await startTurn(db, { ownerId: 'u1', text: 'heard' });
    const follower = followEvents(counting, { threadId: turn.threadId, afterSeq: 2, pollIntervalMs: 2_000 });
    const viewing = collect(follower);
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    await sleep(300); // listening, and waiting after its first (empty) read
    const readsAtStart = reads();
    for (let n = 0; n < 10; n++) {
      await db.query(`select agent_kit__append_event($1, $2, 0, 'note', '{}')`, [turn.threadId, turn.runId]);
      await db.query(`select pg_notify('agent_kit_events', $1 || ':0')`, [turn.threadId]);
      await sleep(50);
    }
    await sleep(300);
    const readsAtStop = reads();
    // One read per notification: the page it returns ends the log, and the next read waits for
    // the next notification instead of finding nothing (two reads per event before).
    expect(readsAtStop - readsAtStart).toBe(10);
    await sleep(1_200); // under the 2 s poll: a woken viewer has no reason to read
    expect(reads()).toBe(readsAtStop);
    follower.close();
    expect((await viewing).length).toBe(10);
  });

  it('does not read again for a notification of an event it has already read', async () => {
    const { db: counting, reads } = countingLogReads(db);
    const turn = await startTurn(db, { ownerId: 'u1', text: 'dedupe' });
    // Written long ago: a viewer joining a thread written moments ago polls quickly at first.
    await db.query(`update agent_kit_thread_events set created_at = now() - interval '1 hour' where thread_id = $1`,
      [turn.threadId]);
    const follower = followEvents(counting, { threadId: turn.threadId, afterSeq: 0, pollIntervalMs: 60_000 });
    expect((await follower.next()).value).toMatchObject({ seq: 1 });
    expect((await follower.next()).value).toMatchObject({ seq: 2 });
    const pending = follower.next(); // caught up at seq 2: reads, finds nothing, waits
    const settle = () => new Promise((resolve) => setTimeout(resolve, 300));
    await settle();
    const waiting = reads();
    const notify = (hint: number) =>
      db.query(`select pg_notify('agent_kit_events', $1 || ':' || $2)`, [turn.threadId, hint]);
    await notify(2); // an event it has: no read
    await notify(1);
    await settle();
    expect(reads()).toBe(waiting);
    await notify(0); // unknown: read
    await settle();
    expect(reads()).toBe(waiting + 1);
    await notify(3); // one it has not seen: read
    await settle();
    expect(reads()).toBe(waiting + 2);
    follower.close();
    expect(await pending).toEqual({ value: undefined, done: true });
  });

  it('rejects a negative cursor', async () => {
    const turn = await startTurn(db, { ownerId: 'u1', text: 'bad' });
    const follower = followEvents(db, { threadId: turn.threadId, afterSeq: -1 });
    await expect(follower.next()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('readRunSegments', () => {
  it('derives one segment per claim and how it ended', async () => {
    const turn = await startTurn(db, { ownerId: 'u1', text: 'segments' });
    await fakeRunSegment({ askQuestionId: 'q1' })(rt, { runId: turn.runId, owner: 'owner-a' });
    await db.query(`select agent_kit_submit_input($1, 'q1', '{"text":"savings"}')`, [turn.runId]);
    await fakeRunSegment({ askQuestionId: 'q1' })(rt, { runId: turn.runId, owner: 'owner-b' });
    const segments = await readRunSegments(db, turn.runId);
    expect(segments.map((s) => [s.fence, s.owner, s.endedAs])).toEqual([
      [1, 'owner-a', 'waiting_input'],
      [2, 'owner-b', 'completed'],
    ]);
  });
});
