// agent_kit_take_jobs on both stores: it takes at most its limit even when the planner believes
// the queue is empty (statistics gathered while it was), the case where an IN-subquery form
// re-ran its locking subquery per row and took a whole burst.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import type { Db } from '../store/db.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

describe('agent_kit_take_jobs', () => {
  it('takes exactly its limit after a burst on a queue analyzed while empty', async () => {
    await db.exec('analyze agent_kit_jobs; analyze agent_kit_runs');
    await db.exec(`
      insert into agent_kit_threads (id, owner_id) values ('00000000-0000-0000-0000-0000000000b1', 'burst');
      insert into agent_kit_runs (thread_id, turn_no)
        select '00000000-0000-0000-0000-0000000000b1', n from generate_series(1, 2000) n;
      insert into agent_kit_jobs (run_id, due_at)
        select id, agent_kit_now() - interval '1 second' from agent_kit_runs
        where thread_id = '00000000-0000-0000-0000-0000000000b1';`);
    const one = await db.query(`select * from agent_kit_take_jobs(1, interval '30 seconds')`);
    expect(one).toHaveLength(1);
    const ten = await db.query(`select * from agent_kit_take_jobs(10, interval '30 seconds')`);
    expect(ten).toHaveLength(10);
    const [left] = await db.query<{ n: number }>(
      `select count(*)::int as n from agent_kit_jobs where due_at <= agent_kit_now()`,
    );
    expect(left!.n).toBe(2000 - 11);
  });
});
