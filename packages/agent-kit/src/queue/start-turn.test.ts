// Starting turns on both stores: a retried POST (same client message id) never creates a second
// run, with or without a thread; another owner's thread is not found; bad input writes nothing;
// on Postgres, starting a turn races a cancel on the same thread without deadlocking; and a new
// turn's user message and its run-queued are consecutive events however many writers share the
// thread (the chat places a message by the event after it: thread-view.ts's held message).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb, onPostgres } from '../../test/harness/test-db.js';
import { InvalidArgumentError, NotFoundError } from '../errors.js';
import type { Db } from '../store/db.js';
import { readEvents } from '../event-log/read-events.js';
import { beginSegment, claimRun, mirrorPartial, parkRun } from '../lease/lease.js';
import { isBlank } from '../blank.js';
import { startTurn } from './start-turn.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

const count = async (table: string) =>
  Number((await db.query<{ n: number }>(`select count(*)::int as n from ${table}`))[0]!.n);

describe('startTurn', () => {
  it('returns the first run for a retried first message that had no thread yet', async () => {
    const first = await startTurn(db, { ownerId: 'ann', text: 'hi', clientMessageId: 'c-1' });
    const runs = await count('agent_kit_runs');
    const retry = await startTurn(db, { ownerId: 'ann', text: 'hi', clientMessageId: 'c-1' });
    expect(retry).toEqual({ ...first, created: false, kind: 'duplicate' });
    expect(await count('agent_kit_runs')).toBe(runs);
    // Another owner may use the same client id: ids are unique per owner.
    const other = await startTurn(db, { ownerId: 'bob', text: 'hi', clientMessageId: 'c-1' });
    expect(other.created).toBe(true);
    expect(other.threadId).not.toBe(first.threadId);
  });

  it('returns the first run for a retried message in an existing thread', async () => {
    const first = await startTurn(db, { ownerId: 'ann', text: 'one' });
    const second = await startTurn(db, { threadId: first.threadId, ownerId: 'ann', text: 'two', clientMessageId: 'c-2' });
    const retry = await startTurn(db, { threadId: first.threadId, ownerId: 'ann', text: 'two', clientMessageId: 'c-2' });
    expect(retry.runId).toBe(second.runId);
    expect(retry.created).toBe(false);
  });

  it('hides another owner\'s thread and refuses bad input, writing nothing', async () => {
    const mine = await startTurn(db, { ownerId: 'ann', text: 'private' });
    const before = [await count('agent_kit_runs'), await count('agent_kit_messages'), await count('agent_kit_thread_events')];
    await expect(startTurn(db, { threadId: mine.threadId, ownerId: 'eve', text: 'x' })).rejects.toBeInstanceOf(NotFoundError);
    await expect(startTurn(db, { ownerId: 'ann', text: '   ' })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(startTurn(db, { ownerId: 'ann', text: 'x'.repeat(32_001) })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(startTurn(db, { threadId: 'nope', ownerId: 'ann', text: 'x' })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(startTurn(db, { ownerId: '', text: 'x' })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(startTurn(db, { ownerId: ' \t ', text: 'x' })).rejects.toBeInstanceOf(InvalidArgumentError); // (was a thread of owner ' \t ')
    expect([await count('agent_kit_runs'), await count('agent_kit_messages'), await count('agent_kit_thread_events')]).toEqual(before);
  });
});

describe.runIf(onPostgres)('lock order on Postgres', () => {
  it('starts turns while cancels and answers hit the same waiting run, without deadlock', async () => {
    for (let round = 0; round < 10; round++) {
      const turn = await startTurn(db, { ownerId: 'ann', text: `ask ${round}` });
      const claim = await claimRun(db, { runId: turn.runId, owner: 'w', leaseTtlMs: 10_000 });
      if (!claim.claimed) throw new Error('claim');
      await parkRun(db, claim.lease, 'waiting_input', { id: 'q' });
      const results = await Promise.allSettled([
        startTurn(db, { threadId: turn.threadId, ownerId: 'ann', text: 'answer' }),
        db.query('select agent_kit_request_cancel($1)', [turn.runId]),
        startTurn(db, { threadId: turn.threadId, ownerId: 'ann', text: 'another' }),
      ]);
      const errors = results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason));
      expect(errors.filter((e) => /deadlock/i.test(e))).toEqual([]);
    }
  });
});

describe('isBlank', () => {
  it('sees white space and invisible format characters only as blank, and anything a reader sees as text', () => {
    expect(['', ' \n\t', '\u200b', '\u200c\u200d', '\ufeff\u2060', '\u00ad', '\u200e\u200f', '\u00a0\u3000'].map(isBlank))
      .toEqual([true, true, true, true, true, true, true, true]);
    // A family emoji is joined by zero-width joiners; a zero-width space inside a word is still a word.
    expect(['\u{1F468}\u200d\u{1F469}\u200d\u{1F467}', 'a\u200bb', '.', '\u05e9\u05dc\u05d5\u05dd', '\u06dd', '\u0600'].map(isBlank))
      .toEqual([false, false, false, false, false, false]);
    expect(['\u2800', '\u3164', '\u2066\u2069', '\u180e'].map(isBlank)).toEqual([true, true, true, true]);
  });

  it('is what startTurn refuses', async () => {
    await expect(startTurn(db, { ownerId: 'u', text: '\u200b\u200b' })).rejects.toThrow(InvalidArgumentError);
  });
});

describe('the events of a new turn', () => {
  it("writes a new turn's message and its run-queued as consecutive events while others write the thread", async () => {
    const first = await startTurn(db, { ownerId: 'ann', text: 'a long answer is streaming' });
    const claim = await claimRun(db, { runId: first.runId, owner: 'w', leaseTtlMs: 60_000 });
    if (!claim.claimed) throw new Error('claim');
    await beginSegment(db, claim.lease, '');
    // Twenty turns queued behind the streaming one, each racing the stream's deltas.
    const started = await Promise.all(Array.from({ length: 20 }, async (_, i) => {
      const [turn] = await Promise.all([
        startTurn(db, { threadId: first.threadId, ownerId: 'ann', text: `queued ${i}` }),
        mirrorPartial(db, claim.lease, `delta ${i} `), mirrorPartial(db, claim.lease, `more ${i} `),
      ]);
      return turn;
    }));
    const events = await readEvents(db, { threadId: first.threadId, limit: 1000 });
    expect(events.filter((e) => e.type === 'text-delta')).toHaveLength(40);
    for (const turn of started) {
      const at = events.findIndex((e) => e.type === 'message' && e.runId === turn.runId);
      expect(at, turn.runId).toBeGreaterThan(0);
      expect([events[at]!.data.role, events[at + 1]!.type, events[at + 1]!.runId]).toEqual(['user', 'run-queued', turn.runId]);
      expect(events[at + 1]!.seq).toBe(events[at]!.seq + 1);
    }
  });
});
