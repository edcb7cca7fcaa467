// The read side of the thread event log on both stores: a live follower sees exactly what a later
// replay from any cursor returns, many viewers of one thread get the same gapless sequence from
// shared reads, a follower hands out the rest of its page without reading and reads larger pages
// while it catches up, and it releases its listener and timers when closed or aborted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import { collect, countingLogReads, withoutListen } from '../../test/harness/event-viewers.js';
import { fakeRunSegment, testOwner } from '../../test/harness/fake-segment.js';
import { configFromEnv } from '../config.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import type { Runtime } from '../turn/types.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { cancelRun, replyToRun, takeOverRun } from '../queue/run-intents.js';
import { advanceFakeNow, clearFakeNow } from '../store/clock.js';
import { runSegment } from '../turn/run-segment.js';
import { followEvents } from './follow-events.js';
import { readEvents, readRunSegments, type ThreadEvent } from './read-events.js';

let db: Db;
let rt: Runtime;
beforeAll(async () => {
  db = await openTestDb();
  rt = { db, model: 'test-model', tools: {}, config: configFromEnv({}) };
});
afterAll(async () => {
  await db.close();
});

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

  it("calls a segment whose process died lost, at the next segment's start", async () => {
    // (An adopter's trial read `superseded` after a kill -9 and could not tell it was a crash.)
    const turn = await startTurn(db, { ownerId: 'u1', text: 'its holder dies mid-reply' });
    const [claim] = await db.query<{ fence: number }>(
      `select fence from agent_kit_claim_run($1, 'owner-a', interval '5 seconds')`, [turn.runId]);
    await db.query(`select agent_kit_begin_segment($1, 'owner-a', $2, '')`, [turn.runId, claim!.fence]);
    try {
      await advanceFakeNow(db, 6_000); // owner-a died: its lease runs out
      expect(await runSegment(makeRuntime(db, { tokens: 4 }), { runId: turn.runId, owner: 'owner-b' }))
        .toMatchObject({ kind: 'closed', status: 'completed' });
    } finally {
      await clearFakeNow(db);
    }
    const segments = await readRunSegments(db, turn.runId);
    expect(segments.map((s) => [s.fence, s.owner, s.endedAs])).toEqual([[1, 'owner-a', 'lost'], [2, 'owner-b', 'completed']]);
    expect(segments[0]!.endedSeq).toBe(segments[1]!.startedSeq);
  });

  it('lists the claim that closed a run cancelled while it waited, which starts no segment', async () => {
    const engine = makeRuntime(db, { tokens: 4 });
    const turn = await startTurn(db, { ownerId: 'u1', text: 'cancel me while I ask #ask' });
    expect(await runSegment(engine, { runId: turn.runId, owner: 'owner-a' })).toMatchObject({ kind: 'parked', status: 'waiting_input' });
    await cancelRun(db, { runId: turn.runId });
    expect(await runSegment(engine, { runId: turn.runId, owner: 'owner-b' })).toMatchObject({ kind: 'closed', status: 'aborted' });
    const segments = await readRunSegments(db, turn.runId);
    // Before, the list ended at fence 1, parked, though the run's fence was 2 and it had closed.
    expect(segments.map((s) => [s.fence, s.endedAs])).toEqual([[1, 'waiting_input'], [2, 'aborted']]);
  });

  it('lists a takeover asked while the holder was dead: its lost lease, the claim that parked, the reply', async () => {
    // (An outsider's trial: `show` had fence 1 "running" and then "the reaper salvaged the run".)
    const turn = await startTurn(db, { ownerId: 'u1', text: 'its holder dies' });
    const [claim] = await db.query<{ fence: number }>(
      `select fence from agent_kit_claim_run($1, 'owner-a', interval '5 seconds')`, [turn.runId]);
    await db.query(`select agent_kit_begin_segment($1, 'owner-a', $2, '')`, [turn.runId, claim!.fence]);
    expect(await takeOverRun(db, { runId: turn.runId, by: 'olga' })).toMatchObject({ status: 'running' });
    try {
      await advanceFakeNow(db, 6_000); // owner-a died: its lease runs out
      expect(await runSegment(makeRuntime(db, { tokens: 4 }), { runId: turn.runId, owner: 'owner-b' }))
        .toMatchObject({ kind: 'parked', status: 'waiting_takeover' });
    } finally {
      await clearFakeNow(db);
    }
    await replyToRun(db, { runId: turn.runId, by: 'olga', text: 'By hand.' });
    // A run taken over before any claim parks at fence 0, which is no claim: the reply's row only.
    const early = await startTurn(db, { ownerId: 'u1', text: 'taken over while queued' });
    await takeOverRun(db, { runId: early.runId, by: 'olga' });
    await replyToRun(db, { runId: early.runId, by: 'olga', text: 'By hand, at once.' });
    expect((await readRunSegments(db, early.runId)).map((s) => [s.fence, s.owner, s.endedAs])).toEqual([[1, 'operator olga', 'completed']]);
    const segments = await readRunSegments(db, turn.runId);
    expect(segments.map((s) => [s.fence, s.owner, s.endedAs])).toEqual([
      [1, 'owner-a', 'lost'],
      [2, null, 'waiting_takeover'], // (a claim that parked at once starts no segment)
      [3, 'operator olga', 'completed'],
    ]);
  });
});
