// A thread's 3,001st turn is claimed and closed without reading its 3,000 earlier turns (migration
// 0019): the claim's "is an earlier turn open" and the close's "which queued turn is next" are
// lookups in the partial indexes of open runs. On Postgres only: the plans of the statements
// inside the SQL functions come from auto_explain, which the embedded store does not ship.
import crypto from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminQuery, databasePrefix, onPostgres, templateName, urlForDatabase } from '../../test/harness/test-db.js';

const earlierTurns = 3_000;
const name = `${databasePrefix}${crypto.randomBytes(6).toString('hex')}`;
let client: pg.Client;
const plans: string[] = [];

describe.skipIf(!onPostgres)('a long thread', () => {
  beforeAll(async () => {
    await adminQuery(`create database ${name} template ${templateName}`);
    client = new pg.Client({ connectionString: urlForDatabase(name) });
    client.on('notice', (notice) => {
      if (notice.message?.includes('plan:')) plans.push(notice.message);
    });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await adminQuery(`drop database if exists ${name} with (force)`);
  });

  it('claims and closes its next turn through index lookups, reading none of the earlier turns', async () => {
    const { rows: [first] } = await client.query(`select thread_id, run_id from agent_kit_start_turn(null, 'u', 'turn 1')`);
    await client.query(
      `insert into agent_kit_runs (thread_id, turn_no, status) select $1, g, 'completed' from generate_series(2, $2::int) g`,
      [first.thread_id, earlierTurns],
    );
    await client.query('delete from agent_kit_jobs');
    await client.query(`update agent_kit_runs set status = 'completed' where id = $1`, [first.run_id]);
    const { rows: [next] } = await client.query(`select run_id from agent_kit_start_turn($1, 'u', 'next')`, [first.thread_id]);
    await client.query(`select run_id from agent_kit_start_turn($1, 'u', 'after that')`, [first.thread_id]);
    await client.query('analyze agent_kit_runs');

    for (const setting of [`load 'auto_explain'`, 'set auto_explain.log_min_duration = 0',
      'set auto_explain.log_nested_statements = on', 'set auto_explain.log_analyze = on', 'set client_min_messages = log']) {
      await client.query(setting);
    }
    await client.query('begin');
    const { rows: [claimed] } = await client.query(
      `select owner, fence from agent_kit_claim_run($1, 'o', interval '1 minute')`, [next.run_id]);
    expect(claimed).toMatchObject({ owner: 'o' });
    const { rows: [closed] } = await client.query(
      `select agent_kit_close_run($1, 'completed', '{"text":"ok"}', 'o', $2) as id`, [next.run_id, claimed.fence]);
    expect(closed.id).toEqual(expect.any(String));
    await client.query('rollback');

    const text = plans.join('\n');
    expect(text).toContain('agent_kit_runs__queued_turn_idx'); // the plans were captured, and use it
    expect(text).not.toMatch(/Seq Scan on agent_kit_runs/);
    const removed = [...text.matchAll(/Rows Removed by (?:Index Recheck|Filter|Join Filter): (\d+)/g)].map((m) => Number(m[1]));
    expect(Math.max(0, ...removed)).toBeLessThan(10);
  });
});
