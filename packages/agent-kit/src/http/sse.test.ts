// The SSE body of eventStreamResponse, chunk by chunk. Method: on both stores, a real follower
// over a seeded 1,500-event thread shows that each page becomes one chunk; a scripted follower
// (events handed over when the test says) pins down the rest: a keep-alive timer only while
// waiting, keep-alives while idle, order after a keep-alive, the error event, cancel, the budget.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import { followEvents, type EventFollower } from '../event-log/follow-events.js';
import { readEvents, type ThreadEvent } from '../event-log/read-events.js';
import type { Db } from '../store/db.js';
import { createEventEncoder, eventStreamResponse, formatSseEvent } from './sse.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

/**
 * A follower whose events arrive when the test hands them over (`deliver`) or fail (`fail`), or,
 * with `refill`, one whose page never runs out (an endless log already read).
 */
class ScriptedFollower implements EventFollower {
  cursor = 0;
  isClosed = false;
  private buffered: ThreadEvent[] = [];
  private waiting:
    { resolve: (events: ThreadEvent[]) => void; reject: (e: Error) => void } | undefined;

  constructor(private readonly refill?: () => ThreadEvent[]) {}

  [Symbol.asyncIterator]() {
    return this;
  }

  async next(): Promise<IteratorResult<ThreadEvent, undefined>> {
    if (this.buffered.length === 0 && !this.refill && !this.isClosed) {
      this.buffered = await new Promise<ThreadEvent[]>((resolve, reject) => {
        this.waiting = { resolve, reject };
      });
    }
    const event = this.nextBuffered();
    return event ? { value: event, done: false } : { value: undefined, done: true };
  }

  nextBuffered(): ThreadEvent | undefined {
    if (this.buffered.length === 0 && this.refill) this.buffered = this.refill();
    const event = this.isClosed ? undefined : this.buffered.shift();
    if (event) this.cursor = event.seq;
    return event;
  }

  deliver(events: ThreadEvent[]) {
    this.waiting?.resolve(events);
  }

  fail(error: Error) {
    this.waiting?.reject(error);
  }

  async return(): Promise<IteratorResult<ThreadEvent, undefined>> {
    this.close();
    return { value: undefined, done: true };
  }

  close() {
    this.isClosed = true;
    this.deliver([]);
  }
}

function makeEvents(fromSeq: number, count: number): ThreadEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    threadId: 't', seq: fromSeq + i, runId: 'r', fence: 1, type: 'text-delta',
    data: { text: `token ${fromSeq + i} ` }, createdAt: new Date(0),
  }));
}

function openStream(
  follower: EventFollower, options: { keepAliveMs?: number; maxStreamMs?: number } = {},
) {
  const response = eventStreamResponse(follower, {
    encoder: createEventEncoder(),
    keepAliveMs: options.keepAliveMs ?? 60_000,
    retryMs: 2_000,
    maxStreamMs: options.maxStreamMs ?? 60_000,
  });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  return {
    reader,
    /** The next chunk as text, or undefined when the stream ended. */
    async chunk(): Promise<string | undefined> {
      const { done, value } = await reader.read();
      return done ? undefined : decoder.decode(value);
    },
  };
}

const idsOf = (text: string) => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));

describe('eventStreamResponse over a real follower', () => {
  it('sends each page the follower reads as one chunk, in seq order', async () => {
    const [turn] = await db.query<{ thread_id: string; run_id: string }>(
      `select thread_id, run_id from agent_kit_start_turn(null, 'u1', 'a long turn')`,
    );
    const threadId = turn!.thread_id;
    // agent_kit_start_turn wrote two events (the message, run-queued): 1,498 more make 1,500.
    await db.query(
      `select count(agent_kit__append_event($1, $2, 1, 'text-delta',
         jsonb_build_object('text', 't' || g))) from generate_series(1, 1498) g`,
      [threadId, turn!.run_id],
    );
    const stream = openStream(followEvents(db, { threadId }));
    expect(await stream.chunk()).toBe('retry: 2000\n\n');
    const chunks = [await stream.chunk(), await stream.chunk(), await stream.chunk()] as string[];
    await stream.reader.cancel();
    // The first page is a quick one of 200; full pages mean catching up, so then pages of 1,000.
    expect(chunks.map((c) => idsOf(c).length)).toEqual([200, 1000, 300]);
    const log = await readEvents(db, { threadId, limit: 1000 });
    log.push(...(await readEvents(db, { threadId, afterSeq: 1000, limit: 1000 })));
    expect(chunks.join('')).toBe(log.map(formatSseEvent).join(''));
  });
});

describe('eventStreamResponse', () => {
  it('arms a keep-alive timer only when the follower has to wait, not once per event', async () => {
    const follower = new ScriptedFollower();
    const setTimeoutSpy = vi.spyOn(globalThis, 'setTimeout');
    try {
      const stream = openStream(follower);
      await stream.chunk(); // the retry hint
      const reading = stream.chunk();
      follower.deliver(makeEvents(1, 1000));
      expect(idsOf((await reading)!)).toEqual(makeEvents(1, 1000).map((e) => e.seq));
      // One wait for the page, one for whatever comes after it (the stream pulls ahead by one).
      expect(setTimeoutSpy.mock.calls.length).toBeLessThanOrEqual(2);
      await stream.reader.cancel();
    } finally {
      setTimeoutSpy.mockRestore();
    }
  });

  it('sends keep-alives while idle, then the awaited event before those read with it', async () => {
    const follower = new ScriptedFollower();
    const stream = openStream(follower, { keepAliveMs: 20 });
    await stream.chunk(); // the retry hint
    expect(await stream.chunk()).toBe(': keep-alive\n\n');
    // Let the stream queue its next keep-alive and stop pulling, its next() still pending; then
    // that next() yields seq 1 while seqs 2 and 3 stay buffered, all before the client reads on.
    await new Promise((resolve) => setTimeout(resolve, 100));
    follower.deliver(makeEvents(1, 3));
    await new Promise((resolve) => setImmediate(resolve));
    let text = await stream.chunk();
    while (text === ': keep-alive\n\n') text = await stream.chunk();
    expect(idsOf(text!)).toEqual([1, 2, 3]);
    await stream.reader.cancel();
  });

  it('ends with an error event when a read fails, and closes the follower', async () => {
    const follower = new ScriptedFollower();
    const stream = openStream(follower);
    await stream.chunk(); // the retry hint
    const reading = stream.chunk();
    follower.fail(new Error('connection lost'));
    const error = { error: { code: 'INTERNAL', message: 'internal error' } };
    expect(await reading).toBe(`event: error\ndata: ${JSON.stringify(error)}\n\n`);
    expect(await stream.chunk()).toBeUndefined();
    expect(follower.isClosed).toBe(true);
  });

  it('cancelling the body closes the follower', async () => {
    const follower = new ScriptedFollower();
    const stream = openStream(follower);
    await stream.chunk();
    await stream.reader.cancel();
    expect(follower.isClosed).toBe(true);
  });

  it('ends at its stream budget while events keep coming, in chunks of bounded size', async () => {
    let seq = 0;
    const follower = new ScriptedFollower(() => makeEvents((seq += 500) - 499, 500));
    const stream = openStream(follower, { maxStreamMs: 50 });
    await stream.chunk(); // the retry hint
    const sizes: number[] = [];
    for (let text = await stream.chunk(); text !== undefined; text = await stream.chunk()) {
      sizes.push(text.length);
    }
    expect(follower.isClosed).toBe(true);
    expect(sizes.length).toBeGreaterThan(0);
    const longestEvent = formatSseEvent(makeEvents(seq, 1)[0]!).length;
    expect(Math.max(...sizes)).toBeLessThanOrEqual(1_048_576 + longestEvent);
  });
});
