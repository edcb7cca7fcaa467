// The simulator's invariant checker must be able to fail: each test plants one corruption with
// plain SQL (a gap in the event log, a fence raised without a claim, an event under a lost fence,
// a lease past its deadline, a completed run with a partial message, an effect run twice) and
// expects exactly that violation, after a clean state that has none.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { startTurn } from '../../src/queue/start-turn.js';
import { openTestDb } from '../harness/test-db.js';
import { InvariantChecker } from './invariants.js';
import { prepareDatabase } from './sim-database.js';

let db: Db;
let lines: string[];
let checker: InvariantChecker;
let runId: string;
let threadId: string;

beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});
beforeEach(async () => {
  await prepareDatabase(db, 7);
  lines = [];
  checker = new InvariantChecker(db, 5, 3, () => lines);
  ({ runId, threadId } = await startTurn(db, { ownerId: 'u', text: 'hello' }));
});

/** Claim the run as the simulator would record it: the fence, and the thread's seq at the claim. */
async function claim(owner = 'w1') {
  const [row] = await db.query<{ fence: number; attempts: number }>(`select * from agent_kit_claim_run($1, $2, '60 seconds'::interval)`, [runId, owner]);
  await db.query(
    `insert into sim_claims (run_id, fence, seq_at_claim, step, attempts)
     select $1, $2, last_seq, 0, $4 from agent_kit_threads where id = $3`,
    [runId, row!.fence, threadId, row!.attempts],
  );
  return Number(row!.fence);
}

async function kinds() {
  return (await checker.check(await checker.snapshot())).map((v) => v.kind);
}

describe('the invariant checker', () => {
  it('finds nothing wrong with a turn run by the protocol', async () => {
    const fence = await claim();
    await db.query(`select agent_kit_begin_segment($1, 'w1', $2, '')`, [runId, fence]);
    expect(await kinds()).toEqual([]);
  });

  it('flags a gap in a thread event log', async () => {
    await db.query('delete from agent_kit_thread_events where thread_id = $1 and seq = 1', [threadId]);
    expect(await kinds()).toContain('seq');
  });

  it('flags a fence raised without a claim', async () => {
    await claim();
    await db.query('update agent_kit_runs set fence = fence + 1 where id = $1', [runId]);
    expect(await kinds()).toContain('fence');
  });

  it('flags an event appended under a fence that was already superseded', async () => {
    await claim('w1');
    await db.query(`update agent_kit_runs set lease_expires_at = agent_kit_now() where id = $1`, [runId]);
    await claim('w2');
    // What an unguarded append by the first holder would leave behind.
    await db.query(`select agent_kit__append_event($1, $2, 1, 'text-delta', '{"text":"zombie"}')`, [threadId, runId]);
    expect(await kinds()).toContain('event-under-lost-fence');
  });

  it('flags a lease that outlives its deadline', async () => {
    await claim();
    await db.query(`update agent_kit_runs set lease_expires_at = deadline_at + interval '1 second' where id = $1`, [runId]);
    expect(await kinds()).toContain('lease');
  });

  it('flags a completed run whose message is marked partial, and a reply that is not the scripted one', async () => {
    const fence = await claim();
    await db.query(`select agent_kit_close_run($1, 'completed', '{"text":"not the reply"}', 'w1', $2)`, [runId, fence]);
    await db.query(`update agent_kit_messages set partial = true where run_id = $1 and role = 'assistant'`, [runId]);
    expect(await kinds()).toEqual(expect.arrayContaining(['message', 'reply']));
  });

  it('flags a run cancelled at a seq whose message is not its text through that seq (ADR-0090)', async () => {
    const fence = await claim();
    await db.query(`select agent_kit_begin_segment($1, 'w1', $2, '')`, [runId, fence]);
    const [shown] = await db.query<{ seq: number }>(
      `select seq::int from agent_kit_mirror_partial($1, 'w1', $2, 'Hello')`, [runId, fence]);
    await db.query(`select agent_kit_mirror_partial($1, 'w1', $2, ', world')`, [runId, fence]);
    await db.query('select agent_kit_request_cancel($1, $2)', [runId, shown!.seq]);
    const close = (text: string) => db.query(
      `select agent_kit_close_run($1, 'aborted', jsonb_build_object('text', $3::text, 'cancelled', true), 'w1', $2)`, [runId, fence, text]);
    await close('Hello, world'); // what the run had, not what its viewer had shown
    expect(await kinds()).toContain('cancel-text');
    await db.query(`update agent_kit_messages set content = '{"text":"Hello","cancelled":true}' where run_id = $1 and role = 'assistant'`, [runId]);
    expect(await kinds()).not.toContain('cancel-text');
  });

  describe('the conversation (ADR-0091, ADR-0096)', () => {
    /** The run answered, then its reply regenerated plainly: the opening message moves to the new run. */
    async function regenerated(): Promise<string> {
      const fence = await claim();
      await db.query(`select agent_kit_close_run($1, 'completed', '{"text":"a reply"}', 'w1', $2)`, [runId, fence]);
      const [message] = await db.query<{ id: string }>(`select id from agent_kit_messages where run_id = $1 and role = 'user'`, [runId]);
      const [row] = await db.query<{ run_id: string }>(
        `select run_id from agent_kit_regenerate_turn($1, 'u', $2, '0', null, $3)`, [threadId, message!.id, runId]);
      return row!.run_id;
    }
    const conversation = async () => (await checker.check(await checker.snapshot()))
      .filter((v) => v.kind === 'conversation').map((v) => v.detail);

    it('finds nothing wrong with a regeneration and a restore made by their functions', async () => {
      const next = await regenerated();
      expect(await conversation()).toEqual([]);
      await db.query(`update agent_kit_runs set status = 'completed', message_id = null where id = $1`, [next]);
      await db.query(`select * from agent_kit_restore_turn($1, 'u')`, [runId]);
      expect(await conversation()).toEqual([]);
    });

    it('flags a run put back without the opening message its regeneration took', async () => {
      await regenerated();
      await db.query('update agent_kit_runs set superseded_by = null where id = $1', [runId]);
      expect(await conversation()).toEqual([expect.stringMatching(/^\S+ in the conversation, but its opening message \S+ is a user message of run /)]);
    });

    it('flags a run superseded before it ended, and links that go round in a circle', async () => {
      const next = await regenerated();
      await db.query('update agent_kit_runs set superseded_by = $1 where id = $2', [runId, next]);
      const found = await conversation();
      expect(found).toContainEqual(expect.stringMatching(/superseded by \S+ while queued$/));
      expect(found).toContainEqual(expect.stringMatching(/superseded_by leads to no run in the conversation in 100 steps$/));
    });
  });

  it('flags an effect executed twice, and one executed without a ledger row', async () => {
    const fence = await claim();
    await db.query(`select * from agent_kit_record_effect($1, 'w1', $2, 'k1', 'started', 'record_effect')`, [runId, fence]);
    lines.push('k1', 'k1', 'k2');
    const found = await kinds();
    expect(found).toContain('effect-repeated');
    expect(found).toContain('effect-unledgered');
  });
});
