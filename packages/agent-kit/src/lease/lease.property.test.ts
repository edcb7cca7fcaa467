// Property: for any sequence of lease commands (claim, renew, mirror, park, close, inputs, cancel,
// takeover, release, effects, salvage, time passing) by 3–4 owners over 1–3 runs in 1–2 threads,
// the SQL functions return what a small reference model of the run state machine predicts and
// leave exactly the rows it predicts; the model checks DESIGN.md §6 on the way. Method: fast-check
// command arrays on one test database, fresh threads per case, the fake lease clock. A failure
// prints its seed and path; replay with FC_SEED=<seed> FC_PATH=<path> (FC_RUNS=n for more cases).
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leaseCommand, runCommand, type LeaseCommand, type World } from '../../test/harness/lease-commands.js';
import { LeaseModel, type ModelRun } from '../../test/harness/lease-model.js';
import { onPostgres, openTestDb } from '../../test/harness/test-db.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { setFakeNow } from '../store/clock.js';

// Bounded so the suite stays quick: each case is up to 40 commands, each checked with two reads.
const numRuns = Number(process.env.FC_RUNS ?? (onPostgres ? 100 : 50));
const seed = process.env.FC_SEED === undefined ? undefined : Number(process.env.FC_SEED);
const path = process.env.FC_PATH;
const startAt = new Date('2031-01-01T00:00:00.000Z');
// A case takes ~10–100 ms; the budget leaves room for a loaded machine and for shrinking, and
// keeps a long FC_RUNS soak from timing out while it still drives the shared fake clock.
const caseBudgetMs = Math.max(120_000, numRuns * 1_000);

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

const scenario = fc.record({
  threadOfRun: fc.array(fc.integer({ min: 0, max: 1 }), { minLength: 1, maxLength: 3 }),
  ownerCount: fc.integer({ min: 3, max: 4 }),
  commands: fc.array(leaseCommand, { minLength: 1, maxLength: 40, size: 'max' }),
});

/** Start the scenario's runs in order, each thread created by its first run. */
async function createWorld(threadOfRun: number[], ownerCount: number): Promise<World> {
  await setFakeNow(db, startAt);
  const model = new LeaseModel();
  const threadIds: string[] = [];
  const runIds: string[] = [];
  const dense = new Map<number, number>(); // 0/1 labels → thread indexes in order of first use
  for (const label of threadOfRun) {
    if (!dense.has(label)) dense.set(label, dense.size);
    const thread = dense.get(label)!;
    const started = await startTurn(db, { threadId: threadIds[thread], ownerId: 'user-1', text: 'hello' });
    threadIds[thread] = started.threadId;
    runIds.push(started.runId);
    model.startTurn(thread);
  }
  const owners = Array.from({ length: ownerCount }, (_, i) => `w${i + 1}`);
  return { db, model, runIds, threadIds, owners, startMs: startAt.getTime(), believed: new Map() };
}

const runsSql = `
  select r.status, r.owner, r.fence, r.attempts, r.partial, r.waiting_for as "waitingFor",
    (extract(epoch from r.lease_expires_at - $2::timestamptz) * 1000)::bigint as "leaseMs",
    (extract(epoch from r.deadline_at - $2::timestamptz) * 1000)::bigint as "deadlineMs",
    (extract(epoch from r.heartbeat_at - $2::timestamptz) * 1000)::bigint as "heartbeatMs",
    r.cancel_requested_at is not null as cancel, r.takeover_requested_at is not null as takeover,
    r.taken_over_by as "takenOverBy",
    exists (select 1 from agent_kit_jobs j where j.run_id = r.id) as "hasJob",
    (select coalesce(jsonb_agg(jsonb_build_object('text', m.content->>'text', 'partial', m.partial,
       'isRunMessage', m.id = r.message_id) order by m.created_at), '[]')
     from agent_kit_messages m where m.run_id = r.id and m.role = 'assistant') as answers,
    (select coalesce(jsonb_object_agg(i.question_id, i.consumed_fence), '{}')
     from agent_kit_inputs i where i.run_id = r.id) as inputs,
    (select coalesce(jsonb_object_agg(e.key, jsonb_build_object('status', e.status, 'fence', e.fence)), '{}')
     from agent_kit_effects e where e.run_id = r.id) as effects
  from unnest($1::uuid[]) with ordinality u(id, ord) join agent_kit_runs r on r.id = u.id
  order by u.ord`;

const eventsSql = `
  select t.last_seq as "lastSeq",
    (select count(*) from agent_kit_messages m where m.thread_id = t.id and m.role = 'user') as "userMessages",
    coalesce((select jsonb_agg(jsonb_build_object('seq', e.seq,
      'type', e.type, 'run', e.run_id, 'fence', e.fence) order by e.seq)
    from agent_kit_thread_events e where e.thread_id = t.id), '[]') as events
  from unnest($1::uuid[]) with ordinality u(id, ord) join agent_kit_threads t on t.id = u.id
  order by u.ord`;

function expectedRun(r: ModelRun) {
  const { thread: _thread, turnNo: _turnNo, answers, ...row } = r;
  return { ...row, answers: answers.map((a) => ({ ...a, isRunMessage: true })) };
}

/** Compare every row the model knows about with the database. */
async function expectRowsMatch(world: World, where: string) {
  const runs = await db.query('select * from (' + runsSql + ') s', [world.runIds, startAt.toISOString()]);
  expect(runs, `runs after ${where}`).toEqual(world.model.runs.map(expectedRun));
  const threads = await db.query<{ lastSeq: number; userMessages: number; events: { run: string | null }[] }>(
    eventsSql, [world.threadIds]);
  const actual = threads.map((t) => ({
    lastSeq: t.lastSeq,
    userMessages: t.userMessages,
    events: t.events.map((e) => ({ ...e, run: e.run === null ? null : world.runIds.indexOf(e.run) })),
  }));
  const expected = world.model.events.map((log, thread) => ({
    lastSeq: log.length,
    userMessages: world.model.userMessages[thread],
    events: log.map((e, i) => ({ seq: i + 1, ...e })),
  }));
  expect(actual, `thread event logs after ${where}`).toEqual(expected);
}

async function runScenario(threadOfRun: number[], ownerCount: number, commands: LeaseCommand[]) {
  const world = await createWorld(threadOfRun, ownerCount);
  await expectRowsMatch(world, 'the runs were started');
  for (const [step, command] of commands.entries()) {
    const before = world.model.runs.map((r) => ({ fence: r.fence, status: r.status }));
    const where = `step ${step} ${JSON.stringify(command)}`;
    const { actual, predicted } = await runCommand(world, command);
    expect(actual, `result of ${where}`).toEqual(predicted);
    expect(world.model.brokenInvariants(before), `invariants after ${where}`).toEqual([]);
    await expectRowsMatch(world, where);
  }
}

describe('the lease state machine', () => {
  it('matches the reference model on random command sequences, returns and rows alike', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, ({ threadOfRun, ownerCount, commands }) => runScenario(threadOfRun, ownerCount, commands)),
      { numRuns, seed, path, endOnFailure: path !== undefined },
    );
  }, caseBudgetMs);

  it('matches the model on a hand-picked path through every branch of park', async () => {
    // Waiting with an answer already stored, cancel beating takeover, takeover beating the request.
    const commands: LeaseCommand[] = [
      { kind: 'claim', run: 0, owner: 0, ttlMs: 5_000, budgetMs: null },
      { kind: 'submit', run: 0, question: 'q1' },
      { kind: 'park', run: 0, who: 'holder', fenceDelta: 0, status: 'waiting_input', question: 'q1' },
      { kind: 'claim', run: 0, owner: 1, ttlMs: 5_000, budgetMs: 10_000 },
      { kind: 'takeover', run: 0, operator: 'op1' },
      { kind: 'park', run: 0, who: 'holder', fenceDelta: 0, status: 'queued', question: null },
      { kind: 'cancel', run: 0 },
      { kind: 'claim', run: 0, owner: 2, ttlMs: 5_000, budgetMs: null },
      { kind: 'takeover', run: 0, operator: 'op2' },
      { kind: 'park', run: 0, who: 'holder', fenceDelta: 0, status: 'waiting_input', question: 'q2' },
      { kind: 'claim', run: 0, owner: 0, ttlMs: 5_000, budgetMs: null },
      { kind: 'close', run: 0, who: 'holder', fenceDelta: 0, status: 'aborted', text: 'half' },
      { kind: 'claim', run: 1, owner: 1, ttlMs: 1_000, budgetMs: null },
    ];
    await runScenario([0, 0], 3, commands);
  });

  it('matches the model on a hand-picked path through reconcile, salvage and answers by message', async () => {
    const commands: LeaseCommand[] = [
      { kind: 'claim', run: 0, owner: 0, ttlMs: 1_000, budgetMs: null },
      { kind: 'effect', run: 0, who: 'holder', fenceDelta: 0, key: 'k1', status: 'started' },
      { kind: 'advance', ms: 3_000 },
      { kind: 'reconcile', run: 0, fenceDelta: -1, key: 'k1', status: 'completed' },
      { kind: 'reconcile', run: 0, fenceDelta: 0, key: 'k1', status: 'in_doubt' },
      { kind: 'reconcile', run: 0, fenceDelta: 0, key: 'k1', status: 'completed' },
      { kind: 'effect', run: 0, who: 'holder', fenceDelta: 0, key: 'k1', status: 'completed' },
      { kind: 'salvage', run: 0, owner: 1, ttlMs: 5_000, maxAttempts: 2 },
      { kind: 'salvage', run: 0, owner: 1, ttlMs: 5_000, maxAttempts: 1 },
      { kind: 'mirror', run: 0, who: 0, fenceDelta: 0, delta: 'zombie' },
      { kind: 'close', run: 0, who: 'holder', fenceDelta: 0, status: 'aborted', text: 'half' },
      { kind: 'message', thread: 0 },
      { kind: 'claim', run: 1, owner: 2, ttlMs: 5_000, budgetMs: null },
      { kind: 'park', run: 1, who: 'holder', fenceDelta: 0, status: 'waiting_input', question: 'q1' },
      { kind: 'message', thread: 0 },
      { kind: 'message', thread: 0 },
      { kind: 'claim', run: 1, owner: 0, ttlMs: 5_000, budgetMs: null },
      { kind: 'consume', run: 1, who: 'holder', fenceDelta: 0, question: 'q1' },
      { kind: 'park', run: 1, who: 'holder', fenceDelta: 0, status: 'waiting_input', question: 'q2' },
      { kind: 'submit', run: 1, question: 'q1' },
      { kind: 'submit', run: 1, question: 'q2' },
    ];
    await runScenario([0], 3, commands);
  });
});
