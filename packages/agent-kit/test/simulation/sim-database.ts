// The simulator's database setup: empty every agent-kit table, add the simulator's record of
// claims, and make new ids deterministic (md5 of the seed and a counter instead of
// gen_random_uuid), because the engine orders some work by id and a replay must see the same order.
// The planner's statistics are part of the start state too: a query's plan decides the order of
// rows that tie on its ORDER BY (runs whose leases expire at the same virtual instant), so a seed
// replays only if every schedule starts with none and nothing analyzes a table during it: neither
// autovacuum on a server nor the embedded store's maintenance pass, which both honour the table's
// autovacuum_enabled (a schedule's tables are tiny; nothing needs vacuuming). Deleting from
// pg_statistic needs a superuser, which the test databases have.
import type { Db } from '../../src/store/db.js';
import { claimsTableSql } from './invariants.js';

const tablesWithUuidIds = ['agent_kit_threads', 'agent_kit_runs', 'agent_kit_messages', 'agent_kit_inputs'];
const emptied = [...tablesWithUuidIds, 'agent_kit_thread_events', 'agent_kit_jobs', 'agent_kit_effects', 'agent_kit_steps',
  'sim_claims'];
/** Every table a schedule writes: none is analyzed or vacuumed during one, and each starts without statistics. */
const unanalyzed = [...emptied, 'agent_kit_clock', 'agent_kit_passes'];

/** Bring a migrated database (fresh or used by an earlier schedule) to the start state of `seed`. */
export async function prepareDatabase(db: Db, seed: number): Promise<void> {
  if (!Number.isSafeInteger(seed)) throw new Error(`seed must be an integer, got ${seed}`);
  await db.exec(`
    ${claimsTableSql};
    create sequence if not exists sim_uuid_seq;
    create or replace function sim_uuid() returns uuid language sql volatile as
      $$ select md5('${seed}:' || nextval('sim_uuid_seq'))::uuid $$;
    ${tablesWithUuidIds.map((table) => `alter table ${table} alter column id set default sim_uuid();`).join('\n')}
    truncate ${emptied.join(', ')} restart identity cascade;
    alter sequence sim_uuid_seq restart;
    delete from agent_kit_clock;
    ${unanalyzed.map((table) => `alter table ${table} set (autovacuum_enabled = false);`).join('\n')}
    delete from pg_statistic where starelid = any(array[${unanalyzed.map((table) => `'${table}'::regclass`).join(', ')}]);
  `);
}
