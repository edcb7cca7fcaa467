// The SQL contract from outside, in plain SQL that names only the contract's columns (ADR-0073):
// a thread, its runs and an effect written by hand, as a test, an import or an operator's repair
// would, then claimed, renewed and closed through the pinned functions. The columns the library
// adds to the contract's tables are never required of such a writer: a run gets its thread's
// next turn number, one at a time however many are inserted at once, and an effect an empty tool
// name. On both stores.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../harness/test-db.js';
import type { Db } from '../../src/store/db.js';

let db: Db;

beforeAll(async () => {
  db = await openTestDb();
});

afterAll(async () => {
  await db.close();
});

async function newThread(): Promise<string> {
  const [thread] = await db.query<{ id: string }>(`insert into agent_kit_threads (owner_id) values ('plain-sql') returning id`);
  return thread!.id;
}

async function insertRun(threadId: string): Promise<{ id: string; turn_no: number }> {
  const [run] = await db.query<{ id: string; turn_no: number }>(
    `insert into agent_kit_runs (thread_id) values ($1) returning id, turn_no`, [threadId]);
  return run!;
}

describe('the SQL contract in plain SQL', () => {
  it('claims, renews and closes a run inserted with only the contract\'s columns, in turn order', async () => {
    const threadId = await newThread();
    const first = await insertRun(threadId);
    const second = await insertRun(threadId);
    expect([first.turn_no, second.turn_no]).toEqual([1, 2]);

    const claim = (runId: string, owner: string) => db.query<{ status: string; owner: string; fence: string; attempts: number }>(
      `select status, owner, fence, attempts from agent_kit_claim_run($1, $2, interval '30 seconds')`, [runId, owner]);
    // One active run per thread: the second turn waits for the first.
    expect(await claim(second.id, 'w2')).toEqual([]);
    const [claimed] = await claim(first.id, 'w1');
    expect(claimed).toMatchObject({ status: 'running', owner: 'w1', attempts: 1 });
    expect(Number(claimed!.fence)).toBe(1);

    const [renewed] = await db.query<{ ok: boolean }>(
      `select agent_kit_renew_lease($1, 'w1', 1, interval '30 seconds') as ok`, [first.id]);
    expect(renewed!.ok).toBe(true);
    const [closed] = await db.query<{ message_id: string | null }>(
      `select agent_kit_close_run($1, 'completed', '{"text": "done by hand"}'::jsonb, 'w1', 1) as message_id`, [first.id]);
    expect(closed!.message_id).not.toBeNull();
    const [message] = await db.query<{ text: string; partial: boolean; role: string }>(
      `select content->>'text' as text, partial, role from agent_kit_messages where id = $1`, [closed!.message_id]);
    expect(message).toEqual({ text: 'done by hand', partial: false, role: 'assistant' });

    const [next] = await claim(second.id, 'w2');
    expect(next).toMatchObject({ status: 'running', owner: 'w2' });
  });

  it('numbers runs inserted into one thread at once one after another, and a started turn after them', async () => {
    const threadId = await newThread();
    const runs = await Promise.all(Array.from({ length: 8 }, () => insertRun(threadId)));
    expect(runs.map((run) => run.turn_no).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    // A number given is kept; the library's own turns go on after the hand-written ones.
    const [given] = await db.query<{ turn_no: number }>(
      `insert into agent_kit_runs (thread_id, turn_no) values ($1, 20) returning turn_no`, [threadId]);
    expect(given!.turn_no).toBe(20);
    const [started] = await db.query<{ run_id: string }>(
      `select run_id from agent_kit_start_turn($1, 'plain-sql', 'and now a turn')`, [threadId]);
    const [turn] = await db.query<{ turn_no: number }>(`select turn_no from agent_kit_runs where id = $1`, [started!.run_id]);
    expect(turn!.turn_no).toBe(21);
    // A thread that does not exist is refused by its foreign key, not numbered.
    await expect(insertRun('00000000-0000-4000-8000-000000000000')).rejects.toThrow(/foreign key|agent_kit_runs/);
  });

  it('records an effect with only the contract\'s columns, and still refuses a status outside the four', async () => {
    const run = await insertRun(await newThread());
    await db.query(`insert into agent_kit_effects (run_id, key, status, fence) values ($1, 'charge:1', 'started', 1)`, [run.id]);
    const [effect] = await db.query<{ status: string; tool: string }>(
      `select status, tool from agent_kit_effects where run_id = $1 and key = 'charge:1'`, [run.id]);
    expect(effect).toEqual({ status: 'started', tool: '' });
    await expect(db.query(`insert into agent_kit_effects (run_id, key, status, fence) values ($1, 'charge:2', 'maybe', 1)`, [run.id]))
      .rejects.toThrow(/check constraint|agent_kit_effects/);
  });
});
