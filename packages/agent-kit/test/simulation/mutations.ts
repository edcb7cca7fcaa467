// Planted protocol bugs, to show the simulator finds what it claims to find: each mutation rewrites
// one guard of one SQL function in the simulation's database only (never a migration), and a
// useful simulator reports a violation within a handful of seeds.
import type { Db } from '../../src/store/db.js';

export interface Mutation {
  name: string;
  /** What the bug lets through. */
  description: string;
  /** The function to rewrite, as a regprocedure. */
  fn: string;
  /** The guard in the function's definition (text or pattern), and what it becomes. */
  from: string | RegExp;
  to: string;
  /** Seeds the search may take (default 20): more for a bug only a rare interleaving shows. */
  seeds?: number;
}

export const mutations: Mutation[] = [
  {
    name: 'mirror-unguarded',
    description: 'the stream mirror writes partial output and events without checking owner and fence',
    fn: 'agent_kit_mirror_partial(uuid, text, bigint, text)',
    from: 'owner = p_owner and fence = p_fence and ',
    to: '',
  },
  {
    name: 'reasoning-unguarded',
    description: 'the mirror writes what the model thinks without checking owner and fence',
    fn: 'agent_kit_mirror_reasoning(uuid, text, bigint, text, text)',
    from: 'owner = p_owner and fence = p_fence and ',
    to: '',
    // 11 seeds of 1–100 (10 before the stop fault); the first is 24 now, 5 before.
    seeds: 30,
  },
  {
    name: 'close-unguarded',
    description: 'closing a run checks that it is running but not who holds it',
    fn: 'agent_kit_close_run(uuid, text, jsonb, text, bigint)',
    from: 'owner = p_owner and fence = p_fence and ',
    to: '',
  },
  {
    name: 'claim-live-lease',
    description: 'a claim also takes a running run whose lease has not expired',
    fn: 'agent_kit_claim_run(uuid, text, interval, interval)',
    from: /r\.status = 'running' and r\.lease_expires_at <= (agent_kit_now\(\)|v_now)/g,
    to: "r.status = 'running'",
  },
  {
    name: 'claim-before-retry',
    description: 'a claim takes a run parked for a model retry before the provider said to come back',
    fn: 'agent_kit_claim_run(uuid, text, interval, interval)',
    from: /and \(r\.retry_due_at is null or r\.retry_due_at <= v_now or r\.cancel_requested_at is not null\)/g,
    to: 'and true',
    // It needs a retry parked past its segment, then a claim before it is due: 12 seeds of 1–100
    // find it, the first is 3 (4 seeds, the first 59, when one model call in ten failed, not one
    // in seven).
  },
  {
    name: 'step-unguarded',
    description: 'journal steps are recorded without checking owner and fence',
    fn: 'agent_kit_commit_step(uuid, text, bigint, integer, text, jsonb, text, jsonb, text, text, text, jsonb, text, jsonb, text, text, jsonb)',
    from: 'r.owner = p_owner and r.fence = p_fence and ',
    to: '',
  },
  {
    name: 'restore-while-open',
    description: 'an earlier answer is put back while a turn after it is still under way',
    fn: 'agent_kit_restore_turn(uuid, text)',
    from: "and r.status not in ('completed', 'failed', 'aborted')",
    to: 'and false',
  },
  {
    name: 'restore-message-left',
    description: 'a restored run is put back without the opening message its regeneration took',
    fn: 'agent_kit_restore_turn(uuid, text)',
    from: 'update agent_kit_messages set run_id = v_run.id, ',
    to: 'update agent_kit_messages set run_id = agent_kit_messages.run_id, ',
  },
];

export function mutationNamed(name: string): Mutation {
  const found = mutations.find((m) => m.name === name);
  if (!found) throw new Error(`unknown mutation "${name}"; known: ${mutations.map((m) => m.name).join(', ')}`);
  return found;
}

/**
 * Rewrite the function in `db`. Throws when the guard text is not in the definition, so a
 * refactored function cannot turn the mutation into a silent no-op.
 */
export async function applyMutation(db: Db, mutation: Mutation): Promise<void> {
  const rows = await db.query<{ def: string }>('select pg_get_functiondef($1::regprocedure) as def', [mutation.fn]);
  const definition = rows[0]!.def;
  const mutated = definition.replaceAll(mutation.from, mutation.to);
  if (mutated === definition) {
    throw new Error(`mutation ${mutation.name}: ${String(mutation.from)} is not in ${mutation.fn} any more; update mutations.ts`);
  }
  await db.exec(mutated);
}
