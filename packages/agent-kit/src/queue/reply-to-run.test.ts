// An operator answers in a held run's place (replyToRun, agent_kit_reply_to_run; ADR-0114), on
// both stores: the run closes completed with the operator's text as its one message, the
// run-closed event names the operator under a fence one higher, the next turn of the thread goes
// on and reads the reply as its history; nothing else is refused without a write, and a segment
// still holding the older fence writes nothing after it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConflictError, InvalidArgumentError, NotFoundError } from '../errors.js';
import { claimRun, closeRun, parkRun, type Lease } from '../lease/index.js';
import { readRunSegments } from '../event-log/read-events.js';
import type { Db } from '../store/db.js';
import { flushNotifications, onLocalNotify } from '../store/notify-thread.js';
import { formatReplyCommand } from '../cli/commands/run-intents.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { replyToRun, takeOverRun } from './run-intents.js';
import { startTurn } from './start-turn.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

async function eventsOf(runId: string): Promise<Array<{ type: string; fence: number; data: Record<string, unknown> }>> {
  const rows = await db.query<{ type: string; fence: number | string; data: Record<string, unknown> }>(
    'select type, fence, data from agent_kit_thread_events where run_id = $1 order by seq', [runId]);
  return rows.map((row) => ({ ...row, fence: Number(row.fence) }));
}

async function runOf(runId: string) {
  const [row] = await db.query<{ status: string; fence: number | string; owner: string | null; message_id: string | null; jobs: number | string }>(
    `select status, fence, owner, message_id, (select count(*) from agent_kit_jobs j where j.run_id = r.id) as jobs
     from agent_kit_runs r where id = $1`, [runId]);
  return { ...row!, fence: Number(row!.fence), jobs: Number(row!.jobs) };
}

async function assistantMessages(runId: string) {
  return db.query<{ id: string; content: Record<string, unknown>; partial: boolean }>(
    `select id, content, partial from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId]);
}

async function held(ownerId: string, text: string) {
  const turn = await startTurn(db, { ownerId, text });
  await takeOverRun(db, { runId: turn.runId, by: 'olga' });
  return turn;
}

describe('replyToRun', () => {
  it("closes a held run completed with the operator's text, names the operator, and lets the thread go on", async () => {
    const turn = await held('ivy', 'I want a refund');
    const next = await startTurn(db, { ownerId: 'ivy', threadId: turn.threadId, text: 'and quickly' });
    const before = await runOf(turn.runId);
    const woken: string[] = [];
    const stop = onLocalNotify((threadId) => woken.push(threadId));
    const result = await replyToRun(db, { runId: turn.runId, by: 'olga', text: 'Refunded: 12 € back on your card.' });
    await flushNotifications(db);
    stop();
    expect(woken).toEqual([turn.threadId]);

    expect(result).toEqual({ runId: turn.runId, status: 'completed', messageId: expect.any(String), nextRunId: next.runId });
    expect(await runOf(turn.runId)).toEqual({
      status: 'completed', fence: before.fence + 1, owner: null, message_id: result.messageId, jobs: 0,
    });
    expect(await assistantMessages(turn.runId)).toEqual([{
      id: result.messageId, content: { text: 'Refunded: 12 € back on your card.', operator: 'olga' }, partial: false,
    }]);
    const closed = (await eventsOf(turn.runId)).at(-1)!;
    expect(closed).toEqual({
      type: 'run-closed', fence: before.fence + 1,
      data: {
        runId: turn.runId, status: 'completed', messageId: result.messageId, text: 'Refunded: 12 € back on your card.',
        partial: false, fence: before.fence + 1, operator: 'olga',
      },
    });
    // `agent-kit show` and the operator page list it as its own row, the run's last fence.
    expect((await readRunSegments(db, turn.runId)).at(-1)).toMatchObject({
      fence: before.fence + 1, owner: 'operator olga', endedAs: 'completed',
    });
    // The next turn was queued behind it: it has its job now, and its model reads the reply.
    expect((await runOf(next.runId)).jobs).toBe(1);
    const [history] = await db.query<{ h: Array<{ role: string; text: string }> }>(
      'select agent_kit__history($1, 2) as h', [turn.threadId]);
    expect(history!.h).toEqual([
      { role: 'user', text: 'I want a refund' },
      { role: 'assistant', text: 'Refunded: 12 € back on your card.' },
      { role: 'user', text: 'and quickly' },
    ]);
    // Once is all: the same reply again (its answer lost) gets the same message, and no next turn
    // to start (the first gave it its job); another is refused.
    expect(await replyToRun(db, { runId: turn.runId, by: 'olga', text: 'Refunded: 12 € back on your card.' }))
      .toEqual({ ...result, nextRunId: null });
    await expect(replyToRun(db, { runId: turn.runId, by: 'olga', text: 'again' }))
      .rejects.toThrow(new ConflictError(`run ${turn.runId} is completed and has ended: there is nothing to reply in its place`));
    expect(await assistantMessages(turn.runId)).toHaveLength(1);
  });

  it('refuses bad arguments and runs that are not held, writing nothing', async () => {
    const turn = await held('ivy', 'hold me');
    const eventsBefore = await eventsOf(turn.runId);
    await expect(replyToRun(db, { runId: 'x', by: 'olga', text: 'hi' })).rejects.toThrow(InvalidArgumentError);
    await expect(replyToRun(db, { runId: turn.runId, by: ' ', text: 'hi' })).rejects.toThrow(/names its operator/);
    for (const text of ['', '  \n', '\u200b\u200d']) {
      await expect(replyToRun(db, { runId: turn.runId, by: 'olga', text })).rejects.toThrow(InvalidArgumentError);
    }
    await expect(replyToRun(db, { runId: turn.runId, by: 'olga', text: 'x'.repeat(32_001) })).rejects.toThrow(/32000/);
    await expect(replyToRun(db, { runId: crypto.randomUUID(), by: 'olga', text: 'hi' })).rejects.toThrow(NotFoundError);
    await expect(replyToRun(db, { runId: turn.runId, by: 'bob', text: 'hi' }))
      .rejects.toThrow(new ConflictError(`run ${turn.runId} is held by olga: only the operator who holds it replies`));
    const queued = await startTurn(db, { ownerId: 'ivy', text: 'not held' });
    await expect(replyToRun(db, { runId: queued.runId, by: 'olga', text: 'hi' }))
      .rejects.toThrow(`run ${queued.runId} is queued and not held by an operator: take it over first`);
    expect(await eventsOf(turn.runId)).toEqual(eventsBefore);
    expect((await runOf(turn.runId)).status).toBe('waiting_takeover');
  });

  it('waits for a running run to park, and leaves its segment nothing to write after the reply', async () => {
    const turn = await startTurn(db, { ownerId: 'ivy', text: 'running' });
    const claim = await claimRun(db, { runId: turn.runId, owner: 'w', leaseTtlMs: 60_000 });
    if (!claim.claimed) throw new Error('not claimed');
    expect(await takeOverRun(db, { runId: turn.runId, by: 'olga' })).toMatchObject({ status: 'running' });
    // (Not "take it over first": the operator who asked went round in a loop, an outsider's trial.)
    await expect(replyToRun(db, { runId: turn.runId, by: 'olga', text: 'hi' })).rejects.toThrow(new ConflictError(
      `run ${turn.runId} is running: the takeover olga asked for is not honoured yet. The run parks at its next write ` +
      '(within a moment while it streams, after a tool call under way), or, its holder dead, once its lease runs out and ' +
      'a worker or drain claims it; reply once it is waiting_takeover'));
    expect(await parkRun(db, claim.lease, 'waiting_takeover')).toBe(true);
    await replyToRun(db, { runId: turn.runId, by: 'olga', text: 'Done by hand.' });
    // The segment's lease (the fence before the reply's) closes nothing.
    expect(await closeRun(db, claim.lease, 'completed', { text: 'late model text' })).toBeNull();
    expect((await assistantMessages(turn.runId)).map((m) => m.content.text)).toEqual(['Done by hand.']);
  });

  it('refuses while a tool call started and was not settled, naming the tool', async () => {
    const turn = await startTurn(db, { ownerId: 'ivy', text: 'pay' });
    const claim = await claimRun(db, { runId: turn.runId, owner: 'w', leaseTtlMs: 60_000 });
    if (!claim.claimed) throw new Error('not claimed');
    const lease: Lease = claim.lease;
    await db.query("select agent_kit_record_effect($1, $2, $3, 'pay-1', 'started', 'transfer_funds', '{}'::jsonb)",
      [lease.runId, lease.owner, lease.fence]);
    await takeOverRun(db, { runId: turn.runId, by: 'olga' });
    expect(await parkRun(db, lease, 'waiting_takeover')).toBe(true);
    await expect(replyToRun(db, { runId: turn.runId, by: 'olga', text: 'paid' }))
      .rejects.toThrow(/a call of transfer_funds that started and was not settled/);
    expect((await runOf(turn.runId)).status).toBe('waiting_takeover');
  });

});

describe('agent-kit reply', () => {
  it('says what it did, and prints JSON for scripts', async () => {
    const turn = await held('ivy', 'by hand, please');
    expect(await formatReplyCommand(db, turn.runId, 'By hand.', { by: 'olga' }))
      .toBe(`replied: run ${turn.runId} is completed, with olga's text as its answer\n`);
    expect((await assistantMessages(turn.runId))[0]!.content).toEqual({ text: 'By hand.', operator: 'olga' });
    const other = await held('ivy', 'and again');
    expect(JSON.parse(await formatReplyCommand(db, other.runId, 'Again.', { by: 'olga', json: true })))
      .toEqual({ runId: other.runId, status: 'completed', messageId: expect.any(String), nextRunId: null });
  });
});
