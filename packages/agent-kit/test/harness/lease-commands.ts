// Commands of the lease property test: their fast-check generators, how each runs against the
// SQL functions (through the lease API where one exists), and how the reference model predicts
// it. A failing step therefore prints as plain data: { kind: 'park', run: 0, who: 'holder', … }.
import fc from 'fast-check';
import { claimRun, closeRun, beginSegment, appendEvent, mirrorPartial, parkRun, renewLease, type Lease } from '../../src/lease/lease.js';
import { startTurn } from '../../src/queue/start-turn.js';
import { advanceFakeNow } from '../../src/store/clock.js';
import type { Db } from '../../src/store/db.js';
import type { CloseStatus, EffectStatus, LeaseModel, Outcome, ParkStatus } from './lease-model.js';

/** Who acts: an owner by index, or whoever holds the run in the model (the live segment). */
export type Who = number | 'holder';
interface Fenced { run: number; who: Who; fenceDelta: number }

export type LeaseCommand =
  | { kind: 'claim'; run: number; owner: number; ttlMs: number; budgetMs: number | null }
  | ({ kind: 'renew'; ttlMs: number } & Fenced)
  | ({ kind: 'mirror'; delta: string } & Fenced)
  | ({ kind: 'begin'; partial: string } & Fenced)
  | ({ kind: 'append' } & Fenced)
  | ({ kind: 'park'; status: ParkStatus; question: string | null } & Fenced)
  | ({ kind: 'close'; status: CloseStatus; text: string } & Fenced)
  | ({ kind: 'consume'; question: string } & Fenced)
  | ({ kind: 'effect'; key: string; status: EffectStatus } & Fenced)
  | { kind: 'submit'; run: number; question: string }
  | { kind: 'cancel'; run: number }
  | { kind: 'takeover'; run: number; operator: string }
  | { kind: 'release'; run: number }
  | { kind: 'reconcile'; run: number; fenceDelta: number; key: string; status: 'completed' | 'failed' | 'in_doubt' }
  | { kind: 'salvage'; run: number; owner: number; ttlMs: number; maxAttempts: number }
  | { kind: 'message'; thread: number }
  | { kind: 'advance'; ms: number };

/** New turns stop here, so a scenario keeps a handful of runs; a message that would add more is skipped. */
export const maxRunsPerScenario = 4;

const run = fc.integer({ min: 0, max: 2 });
const owner = fc.integer({ min: 0, max: 3 });
const fenced = fc.record({
  run,
  who: fc.oneof({ arbitrary: fc.constant<Who>('holder'), weight: 3 }, { arbitrary: owner, weight: 2 }),
  // Mostly the fence the actor believes it holds; sometimes one off, as a confused zombie.
  fenceDelta: fc.constantFrom(0, 0, 0, 0, -1, 1),
});
const ttlMs = fc.constantFrom(1_000, 5_000, 30_000);
const question = fc.constantFrom('q1', 'q2');
const key = fc.constantFrom('k1', 'k2');

/** One command; the weights favour the lease holder's writes and moving time. */
export const leaseCommand: fc.Arbitrary<LeaseCommand> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('claim' as const), run, owner, ttlMs, budgetMs: fc.option(fc.constantFrom(2_000, 10_000, 60_000)) }), weight: 6 },
  { arbitrary: fenced.chain((f) => fc.record({ kind: fc.constant('renew' as const), ttlMs }).map((c) => ({ ...f, ...c }))), weight: 3 },
  { arbitrary: fenced.chain((f) => fc.record({ kind: fc.constant('mirror' as const), delta: fc.constantFrom('', 'a', 'bc') }).map((c) => ({ ...f, ...c }))), weight: 4 },
  { arbitrary: fenced.chain((f) => fc.record({ kind: fc.constant('begin' as const), partial: fc.constantFrom('', 'resume ') }).map((c) => ({ ...f, ...c }))), weight: 2 },
  { arbitrary: fenced.map((f) => ({ ...f, kind: 'append' as const })), weight: 2 },
  { arbitrary: fenced.chain((f) => fc.record({ kind: fc.constant('park' as const), status: fc.constantFrom<ParkStatus>('queued', 'waiting_input', 'waiting_input', 'waiting_takeover'), question: fc.option(question) }).map((c) => ({ ...f, ...c }))), weight: 4 },
  { arbitrary: fenced.chain((f) => fc.record({ kind: fc.constant('close' as const), status: fc.constantFrom<CloseStatus>('completed', 'completed', 'failed', 'aborted'), text: fc.constantFrom('done', 'half') }).map((c) => ({ ...f, ...c }))), weight: 2 },
  { arbitrary: fenced.chain((f) => fc.record({ kind: fc.constant('consume' as const), question }).map((c) => ({ ...f, ...c }))), weight: 3 },
  { arbitrary: fenced.chain((f) => fc.record({ kind: fc.constant('effect' as const), key, status: fc.constantFrom<EffectStatus>('started', 'started', 'completed', 'failed', 'in_doubt') }).map((c) => ({ ...f, ...c }))), weight: 5 },
  { arbitrary: fc.record({ kind: fc.constant('submit' as const), run, question }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant('cancel' as const), run }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('takeover' as const), run, operator: fc.constantFrom('op1', 'op2') }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('release' as const), run }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('reconcile' as const), run, fenceDelta: fc.constantFrom(0, 0, -1), key, status: fc.constantFrom('completed' as const, 'failed' as const, 'in_doubt' as const) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('salvage' as const), run, owner, ttlMs, maxAttempts: fc.constantFrom(1, 2, 3) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('message' as const), thread: fc.integer({ min: 0, max: 1 }) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.constantFrom(500, 1_000, 1_000, 3_000, 10_000, 60_000) }), weight: 4 },
);

/** One scenario's world: its runs, owners and what each owner believes it holds. */
export interface World {
  db: Db;
  model: LeaseModel;
  runIds: string[];
  threadIds: string[];
  owners: string[];
  startMs: number;
  /** owner → run index → the fence it last obtained. */
  believed: Map<string, Map<number, number>>;
}

const msSince = (world: World, at: Date | null) => (at === null ? null : at.getTime() - world.startMs);

async function outcomeOf(fn: () => Promise<Outcome>): Promise<Outcome> {
  try {
    return await fn();
  } catch (error) {
    return { error: (error as Error).name };
  }
}

/** Run `command` against SQL and against the model; returns both outcomes. */
export async function runCommand(world: World, command: LeaseCommand): Promise<{ actual: Outcome; predicted: Outcome }> {
  const { db, model } = world;
  if (command.kind === 'advance') {
    model.advance(command.ms);
    await advanceFakeNow(db, command.ms);
    return { actual: null, predicted: null };
  }
  if (command.kind === 'message') return sendMessage(world, command.thread % world.threadIds.length);
  const index = command.run % world.runIds.length;
  const runId = world.runIds[index]!;
  const pick = (i: number) => world.owners[i % world.owners.length]!;

  if (command.kind === 'claim' || command.kind === 'salvage') {
    const who = pick(command.owner);
    const predicted = command.kind === 'claim'
      ? model.claim(index, who, command.ttlMs, command.budgetMs ?? command.ttlMs)
      : model.takeForSalvage(index, who, command.ttlMs, command.maxAttempts);
    const actual = await outcomeOf(async () => {
      if (command.kind === 'claim') {
        const result = await claimRun(db, { runId, owner: who, leaseTtlMs: command.ttlMs, budgetMs: command.budgetMs ?? undefined });
        if (!result.claimed) return result;
        const { lease } = result;
        return { claimed: true, owner: lease.owner, fence: lease.fence, attempts: lease.attempts, leaseMs: msSince(world, lease.expiresAt), deadlineMs: msSince(world, lease.deadlineAt) };
      }
      const rows = await db.query<{ owner: string; fence: number; attempts: number; lease_expires_at: Date; deadline_at: Date }>(
        `select * from agent_kit_take_for_salvage($1, $2, $3::interval, $4)`,
        [runId, who, `${command.ttlMs} milliseconds`, command.maxAttempts]);
      const row = rows[0];
      if (!row) return { claimed: false };
      return { claimed: true, owner: row.owner, fence: row.fence, attempts: row.attempts, leaseMs: msSince(world, new Date(row.lease_expires_at)), deadlineMs: msSince(world, new Date(row.deadline_at)) };
    });
    const won = actual as { claimed?: boolean; fence?: number };
    if (won.claimed) {
      if (!world.believed.has(who)) world.believed.set(who, new Map());
      world.believed.get(who)!.set(index, won.fence!);
    }
    return { actual, predicted };
  }

  if ('who' in command) {
    // The holder acts on a run it holds: the chosen one if running, else the next running one.
    const held = command.who === 'holder' ? heldRunFrom(model, index) : index;
    const who = command.who === 'holder' ? (model.runs[held]!.owner ?? world.owners[0]!) : pick(command.who);
    const fence = (world.believed.get(who)?.get(held) ?? 0) + command.fenceDelta;
    const lease: Lease = {
      runId: world.runIds[held]!, threadId: world.threadIds[model.runs[held]!.thread]!, owner: who, fence,
      attempts: 0, expiresAt: new Date(0), deadlineAt: new Date(0),
    };
    return runFenced(world, command, held, lease);
  }
  return runUnfenced(world, command, index, runId);
}

async function sendMessage(world: World, thread: number): Promise<{ actual: Outcome; predicted: Outcome }> {
  const { db, model } = world;
  if (model.waitingRunOf(thread) < 0 && model.runs.length >= maxRunsPerScenario) {
    return { actual: 'skipped', predicted: 'skipped' };
  }
  const predicted = model.sendMessage(thread);
  const actual = await outcomeOf(async () => {
    const result = await startTurn(db, { threadId: world.threadIds[thread], ownerId: 'user-1', text: 'hello' });
    if (result.kind === 'turn') world.runIds.push(result.runId);
    return { kind: result.kind, run: world.runIds.indexOf(result.runId) };
  });
  return { actual, predicted };
}

function heldRunFrom(model: LeaseModel, index: number): number {
  const count = model.runs.length;
  for (let i = 0; i < count; i++) {
    if (model.runs[(index + i) % count]!.status === 'running') return (index + i) % count;
  }
  return index;
}

async function runFenced(
  world: World, command: Extract<LeaseCommand, Fenced>, index: number, lease: Lease,
): Promise<{ actual: Outcome; predicted: Outcome }> {
  const { db, model } = world;
  const { owner, fence } = lease;
  switch (command.kind) {
    case 'renew':
      return { predicted: model.renew(index, owner, fence, command.ttlMs), actual: await outcomeOf(() => renewLease(db, lease, command.ttlMs)) };
    case 'mirror':
      return { predicted: model.mirror(index, owner, fence, command.delta), actual: await outcomeOf(() => mirrorPartial(db, lease, command.delta)) };
    case 'begin':
      return { predicted: model.beginSegment(index, owner, fence, command.partial), actual: await outcomeOf(() => beginSegment(db, lease, command.partial)) };
    case 'append':
      return { predicted: model.appendEvent(index, owner, fence), actual: await outcomeOf(() => appendEvent(db, lease, 'note', {})) };
    case 'park':
      return {
        predicted: model.park(index, owner, fence, command.status, command.question),
        actual: await outcomeOf(() => parkRun(db, lease, command.status, command.question === null ? undefined : { id: command.question })),
      };
    case 'close':
      return {
        predicted: model.close(index, owner, fence, command.status, command.text),
        actual: await outcomeOf(async () => ((await closeRun(db, lease, command.status, { text: command.text })) === null ? null : 'message-id')),
      };
    case 'consume':
      return {
        predicted: model.consumeInput(index, owner, fence, command.question),
        actual: await outcomeOf(async () => ((await db.query<{ data: unknown }>(
          'select agent_kit_consume_input($1, $2, $3, $4) as data', [lease.runId, owner, fence, command.question]))[0]!.data === null ? null : 'data')),
      };
    case 'effect':
      return {
        predicted: model.recordEffect(index, owner, fence, command.key, command.status),
        actual: await outcomeOf(() => db.query(
          `select key, status, fence from agent_kit_record_effect($1, $2, $3, $4, $5, 'tool')`,
          [lease.runId, owner, fence, command.key, command.status])),
      };
  }
}

async function runUnfenced(
  world: World, command: Exclude<LeaseCommand, Fenced | { kind: 'claim' | 'salvage' | 'advance' | 'message' }>, index: number,
  runId: string,
): Promise<{ actual: Outcome; predicted: Outcome }> {
  const { db, model } = world;
  const scalar = async (sql: string, params: unknown[]) => (await db.query<{ v: unknown }>(sql, params))[0]!.v;
  switch (command.kind) {
    case 'submit':
      return {
        predicted: model.submitInput(index, command.question),
        actual: await outcomeOf(() => scalar('select agent_kit_submit_input($1, $2, $3::jsonb) as v',
          [runId, command.question, JSON.stringify({ answer: command.question })])),
      };
    case 'cancel':
      return { predicted: model.requestCancel(index), actual: await outcomeOf(() => scalar('select agent_kit_request_cancel($1) as v', [runId])) };
    case 'takeover':
      return {
        predicted: model.takeover(index, command.operator),
        actual: await outcomeOf(() => scalar('select agent_kit_takeover_run($1, $2) as v', [runId, command.operator])),
      };
    case 'release':
      return { predicted: model.release(index), actual: await outcomeOf(() => scalar('select agent_kit_release_run($1) as v', [runId])) };
    case 'reconcile': {
      const fence = model.runs[index]!.fence + command.fenceDelta;
      return {
        predicted: model.reconcileEffect(index, fence, command.key, command.status),
        actual: await outcomeOf(() => scalar('select agent_kit_reconcile_effect($1, $2, $3, $4) as v', [runId, fence, command.key, command.status])),
      };
    }
  }
}
