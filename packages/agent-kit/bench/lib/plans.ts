// Query plans of agent-kit's own SQL functions as they really run: auto_explain logs the nested
// statements of a plpgsql call, and with client_min_messages = log the server sends each plan to
// this client as a notice. The calls run in a transaction that is rolled back: nothing changes.
import pg from 'pg';

export interface CapturedPlans {
  /** Each nested statement's plan, as auto_explain printed it (text format). */
  plans: string[];
  /** Sequential scans on the queue or run tables: each one is a cost that grows with the queue. */
  scans: string[];
}

const setup = [
  `load 'auto_explain'`,
  'set auto_explain.log_min_duration = 0',
  'set auto_explain.log_nested_statements = on',
  'set auto_explain.log_analyze = on',
  'set auto_explain.log_buffers = on',
  'set auto_explain.log_timing = on',
  'set client_min_messages = log',
];

/** Run `calls` (each `[sql, params]`) in a rolled-back transaction and collect their plans. */
export async function capturePlans(url: string, calls: [string, unknown[]][]): Promise<CapturedPlans> {
  const client = new pg.Client({ connectionString: url, application_name: 'agent-kit-bench-plans' });
  const plans: string[] = [];
  client.on('notice', (notice) => {
    if (notice.message?.includes('plan:')) plans.push(notice.message);
  });
  client.on('error', () => {});
  await client.connect();
  try {
    for (const statement of setup) await client.query(statement);
    await client.query('begin');
    for (const [sql, params] of calls) await client.query(sql, params);
    await client.query('rollback');
  } finally {
    await client.end();
  }
  // Notices arrive before the query's own result, so all are in by now.
  const scans = plans
    .flatMap((plan) => plan.match(/Seq Scan on agent_kit_(?!clock)\w+/g) ?? []);
  return { plans, scans };
}
