// The simulator's database setup: empty every agent-kit table, add the simulator's record of
// claims, and make new ids deterministic (md5 of the seed and a counter instead of
// gen_random_uuid), because the engine orders some work by id and a replay must see the same order.
import type { Db } from '../../src/store/db.js';
import { claimsTableSql } from './invariants.js';

const tablesWithUuidIds = ['agent_kit_threads', 'agent_kit_runs', 'agent_kit_messages', 'agent_kit_inputs'];

/** Bring a migrated database (fresh or used by an earlier schedule) to the start state of `seed`. */
export async function prepareDatabase(db: Db, seed: number): Promise<void> {
  if (!Number.isSafeInteger(seed)) throw new Error(`seed must be an integer, got ${seed}`);
  await db.exec(`
    ${claimsTableSql};
    create sequence if not exists sim_uuid_seq;
    create or replace function sim_uuid() returns uuid language sql volatile as
      $$ select md5('${seed}:' || nextval('sim_uuid_seq'))::uuid $$;
    ${tablesWithUuidIds.map((table) => `alter table ${table} alter column id set default sim_uuid();`).join('\n')}
    truncate agent_kit_threads, agent_kit_runs, agent_kit_messages, agent_kit_thread_events, agent_kit_jobs,
      agent_kit_effects, agent_kit_steps, agent_kit_inputs, sim_claims restart identity cascade;
    alter sequence sim_uuid_seq restart;
    delete from agent_kit_clock;
  `);
}
