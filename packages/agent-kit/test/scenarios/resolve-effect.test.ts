// An operator who has checked the outside system records the verdict on an effect in doubt
// (`agent-kit resolve-effect`, resolveEffect): the run leaves the in-doubt list, the earlier
// result is kept beside the verdict, and only an effect in doubt can be resolved. Both stores;
// the effects come from the turn engine with a tool that throws EffectInDoubtError.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { retryingModel, stepsModel } from '../harness/steps-model.js';
import { fakeRunSegment } from '../harness/fake-segment.js';
import { headerAuth, makeRequest, payload, readSse } from '../harness/http-harness.js';
import { makeRuntime } from '../harness/turn-kit.js';
import { openTestDb } from '../harness/test-db.js';
import { resolveVerdict } from '../../src/cli/commands/resolve-effect.js';
import { formatShowCommand } from '../../src/cli/commands/show.js';
import { resolveEffect } from '../../src/effect-ledger/index.js';
import { createHandlers } from '../../src/http/handlers.js';
import { ConflictError, EffectInDoubtError, NotFoundError } from '../../src/index.js';
import { listRuns } from '../../src/event-log/read-runs.js';
import type { AgentTool } from '../../src/model/index.js';
import { startTurn } from '../../src/queue/start-turn.js';
import { reapExpiredRuns } from '../../src/reaper/index.js';
import { advanceFakeNow, clearFakeNow } from '../../src/store/clock.js';
import type { Db } from '../../src/store/db.js';
import { runSegment } from '../../src/turn/run-segment.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await clearFakeNow(db);
  await db.close();
});

/** A finished turn whose one charge_card call ended in doubt (or, `ok`, completed). */
async function payTurn(ok = false): Promise<{ runId: string; key: string }> {
  const tool: AgentTool<{ cents: number }, unknown> = {
    name: 'charge_card', description: 'Charge the card', inputSchema: z.object({ cents: z.number() }),
    execute: () => (ok ? Promise.resolve({ chargeId: 'ch_1' }) : Promise.reject(new EffectInDoubtError('no answer'))),
  };
  const rt = makeRuntime(db, { tools: { charge_card: tool }, model: retryingModel('charge_card', { cents: 500 }, 1) });
  const turn = await startTurn(db, { ownerId: 'olga', text: 'pay 5 EUR' });
  await runSegment(rt, { runId: turn.runId, owner: 'w1' });
  const [effect] = await db.query<{ key: string }>('select key from agent_kit_effects where run_id = $1', [turn.runId]);
  return { runId: turn.runId, key: effect!.key };
}

const inDoubtRuns = async () => (await listRuns(db, { ownerId: null, inDoubt: true, limit: 50 })).map((r) => r.id);

it('records the verdict, keeps what was known before, and takes the run off the in-doubt list', async () => {
  const charged = await payTurn();
  const notCharged = await payTurn();
  expect(await inDoubtRuns()).toEqual(expect.arrayContaining([charged.runId, notCharged.runId]));

  const done = await resolveEffect(db, { ...charged, happened: true, by: 'ops-anna', note: 'ch_9 in the dashboard' });
  expect(done).toMatchObject({ status: 'completed', tool: 'charge_card' });
  expect(done.result).toMatchObject({
    resolved: { by: 'ops-anna', note: 'ch_9 in the dashboard', happened: true },
    inDoubt: { key: charged.key },
  });
  const failed = await resolveEffect(db, { ...notCharged, happened: false, by: 'ops-anna' });
  expect(failed).toMatchObject({ status: 'failed', result: { resolved: { happened: false, note: null } } });
  const listed = await inDoubtRuns();
  expect(listed).not.toContain(charged.runId);
  expect(listed).not.toContain(notCharged.runId);
  // agent-kit show says it in words, and no longer names the effect in doubt at the top.
  const shown = await formatShowCommand(db, charged.runId, {}, new Date());
  expect(shown).toMatch(new RegExp(`${charged.key}\\s+charge_card\\s+completed\\s+\\d+\\s+ops-anna checked: happened \\(ch_9 in the dashboard\\)`));
  expect(shown).not.toMatch(/in doubt/);
  expect(await formatShowCommand(db, notCharged.runId, {}, new Date())).toMatch(/failed\s+\d+\s+ops-anna checked: did not happen\n/);
});

it('refuses to resolve an effect that is not in doubt, or that does not exist, changing nothing', async () => {
  const doubtful = await payTurn();
  await resolveEffect(db, { ...doubtful, happened: true, by: 'ops' });
  const again = resolveEffect(db, { ...doubtful, happened: false, by: 'ops-ben' });
  await expect(again).rejects.toThrow(ConflictError);
  // A second verdict names the first, not only the status it left.
  await expect(again).rejects.toThrow(new RegExp(`^effect ${doubtful.key} was resolved already: ops said it happened at \\d{4}-\\d\\d-\\d\\dT.*; nothing changed$`));
  const paid = await payTurn(true);
  await expect(resolveEffect(db, { ...paid, happened: false, by: 'ops' }))
    .rejects.toThrow(/is completed, not in doubt/);
  await expect(resolveEffect(db, { runId: paid.runId, key: 'no-such-key', happened: true, by: 'ops' }))
    .rejects.toThrow(NotFoundError);
  const rows = await db.query<{ run_id: string; status: string }>(
    'select run_id, status from agent_kit_effects where run_id in ($1, $2)', [doubtful.runId, paid.runId]);
  expect(rows.map((r) => [r.run_id, r.status]).sort()).toEqual(
    [[doubtful.runId, 'completed'], [paid.runId, 'completed']].sort());
});

it("tells the run's thread: an effect-resolved event (fence 0) after the run closed, and none when refused", async () => {
  const charged = await payTurn();
  const [run] = await db.query<{ thread_id: string; status: string }>(
    'select thread_id, status from agent_kit_runs where id = $1', [charged.runId]);
  const events = () => db.query<{ seq: string; type: string; fence: string; run_id: string; data: Record<string, unknown> }>(
    'select seq, type, fence, run_id, data from agent_kit_thread_events where thread_id = $1 order by seq', [run!.thread_id]);
  const before = await events();
  expect(before.at(-1)!.type).toBe('run-closed');

  await resolveEffect(db, { ...charged, happened: false, by: 'ops-anna', note: 'no charge in the dashboard' });
  const after = await events();
  expect(after.slice(0, -1)).toEqual(before);
  const resolved = after.at(-1)!;
  expect(Number(resolved.seq)).toBe(Number(before.at(-1)!.seq) + 1);
  expect(resolved).toMatchObject({ type: 'effect-resolved', run_id: charged.runId });
  expect(Number(resolved.fence)).toBe(0);
  // The note is for operators (it stays in the ledger); the thread's events are the user's to read.
  expect(resolved.data).toEqual({ runId: charged.runId, key: charged.key, tool: 'charge_card', happened: false, by: 'ops-anna' });
  const [thread] = await db.query<{ last_seq: string }>('select last_seq from agent_kit_threads where id = $1', [run!.thread_id]);
  expect(Number(thread!.last_seq)).toBe(after.length);

  await expect(resolveEffect(db, { ...charged, happened: true, by: 'ops' })).rejects.toThrow(ConflictError);
  expect(await events()).toEqual(after);
});

it('eight operators resolving one effect at once: one verdict wins, the others are refused, one event', async () => {
  const paid = await payTurn();
  const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) =>
    resolveEffect(db, { ...paid, happened: i % 2 === 0, by: `ops-${i}` })));
  const won = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  expect(won).toHaveLength(1);
  expect(results.filter((r) => r.status === 'rejected' && r.reason instanceof ConflictError)).toHaveLength(7);
  const [effect] = await db.query<{ status: string; by: string }>(
    `select status, result->'resolved'->>'by' as by from agent_kit_effects where run_id = $1`, [paid.runId]);
  expect(effect).toEqual({ status: won[0]!.status, by: (won[0]!.result as { resolved: { by: string } }).resolved.by });
  const events = await db.query<{ data: { by: string } }>(
    `select data from agent_kit_thread_events where run_id = $1 and type = 'effect-resolved'`, [paid.runId]);
  expect(events.map((e) => e.data.by)).toEqual([effect!.by]);
});

it('POST /api/runs/:id/resolve-effect: the operator resolves, a live viewer of the thread sees it', async () => {
  const paid = await payTurn();
  const [run] = await db.query<{ thread_id: string }>('select thread_id from agent_kit_runs where id = $1', [paid.runId]);
  const handlers = createHandlers({ rt: makeRuntime(db), authenticate: headerAuth, runSegment: fakeRunSegment() });
  const path = `/api/runs/${paid.runId}/resolve-effect`;
  const send = (body: unknown, user = 'ops-anna', operator = true) =>
    handlers.handle(makeRequest('POST', path, { user, operator, body }));
  const statusOf = async (response: Response) => [response.status, ((await response.json()) as { error?: { code: string } }).error?.code];

  // Refused, writing nothing: the owner is no operator, a stranger does not see the run, bad bodies, an unknown key.
  expect(await statusOf(await send({ key: paid.key, happened: true }, 'olga', false))).toEqual([403, 'FORBIDDEN']);
  expect(await statusOf(await send({ key: paid.key, happened: true }, 'mallory', false))).toEqual([404, 'NOT_FOUND']);
  for (const body of [{ key: paid.key }, { key: paid.key, happened: 'yes' }, { key: '', happened: true },
    { key: paid.key, happened: true, by: 'someone-else' }, { key: paid.key, happened: true, note: 'x'.repeat(2001) }]) {
    expect(await statusOf(await send(body))).toEqual([400, 'INVALID_ARGUMENT']);
  }
  expect(await statusOf(await send({ key: 'no-such-key', happened: true }))).toEqual([404, 'NOT_FOUND']);
  const [{ status: still } = { status: '' }] = await db.query<{ status: string }>(
    'select status from agent_kit_effects where run_id = $1 and key = $2', [paid.runId, paid.key]);
  expect(still).toBe('in_doubt');

  // A viewer following the thread from its end hears the verdict.
  const [{ last_seq: lastSeq } = { last_seq: '0' }] = await db.query<{ last_seq: string }>(
    'select last_seq from agent_kit_threads where id = $1', [run!.thread_id]);
  const follow = await handlers.handle(makeRequest('GET', `/api/threads/${run!.thread_id}/events?after=${lastSeq}`,
    { user: 'olga' }));
  const heard = readSse(follow, { until: (event) => payload(event).type === 'effect-resolved' });

  const answer = await send({ key: paid.key, happened: true, note: 'ch_9 in the dashboard' });
  expect(answer.status).toBe(200);
  expect(await answer.json()).toMatchObject({
    runId: paid.runId, key: paid.key, tool: 'charge_card', status: 'completed',
    result: { resolved: { by: 'ops-anna', happened: true, note: 'ch_9 in the dashboard' } },
  });
  const [event] = (await heard).events.map(payload);
  expect(event).toMatchObject({
    seq: Number(lastSeq) + 1, runId: paid.runId, fence: 0, type: 'effect-resolved',
    data: { runId: paid.runId, key: paid.key, tool: 'charge_card', happened: true, by: 'ops-anna' },
  });
  expect(event!.data).not.toHaveProperty('note');
  // The run's detail gives the owner the verdict, and only operators the note.
  const resolvedAs = async (user: string, operator: boolean) => {
    const detail = await (await handlers.handle(makeRequest('GET', `/api/runs/${paid.runId}`, { user, operator }))).json() as
      { effects: { key: string; result: { resolved: Record<string, unknown> } }[] };
    return detail.effects.find((e) => e.key === paid.key)!.result.resolved;
  };
  expect(await resolvedAs('olga', false)).toEqual({ by: 'ops-anna', happened: true, at: expect.any(String) });
  expect(await resolvedAs('ops-anna', true)).toMatchObject({ note: 'ch_9 in the dashboard' });
  expect(await statusOf(await send({ key: paid.key, happened: false }))).toEqual([409, 'CONFLICT']);
  await handlers.segments.settle();
});

/**
 * A turn whose charge hangs (its process is killed); a reaper without a hook marks it in doubt
 * and requeues the run; the operator gives `happened`; the next segment settles the call from
 * the ledger. Returns the journal's tool steps.
 */
async function resolvedThenMetAgain(happened: boolean, note: string) {
  let hung = false;
  const charge = (hook?: () => void): AgentTool<{ cents: number }, unknown> => ({
    name: 'charge_card', description: 'Charge the card', inputSchema: z.object({ cents: z.number() }),
    execute: () => {
      hook?.();
      return new Promise(() => {});
    },
  });
  const model = () => stepsModel([{ calls: [{ id: 'c1', name: 'charge_card', input: { cents: 900 } }] }, { text: 'Sorry.' }]);
  const turn = await startTurn(db, { ownerId: 'olga', text: 'pay 9 EUR' });
  const first = makeRuntime(db, { tools: { charge_card: charge(() => (hung = true)) }, model: model() });
  void runSegment(first, { runId: turn.runId, owner: 'web-1', budgetMs: 60_000 });
  while (!hung) await new Promise((resolve) => setTimeout(resolve, 20));
  await advanceFakeNow(db, 120_000);
  const next = makeRuntime(db, { tools: { charge_card: charge() }, model: model() });
  expect(await reapExpiredRuns(next)).toMatchObject({ requeued: 1, inDoubt: 1 });
  const [effect] = await db.query<{ key: string }>('select key from agent_kit_effects where run_id = $1', [turn.runId]);
  await resolveEffect(db, { runId: turn.runId, key: effect!.key, happened, by: 'ops', note });
  expect(await runSegment(next, { runId: turn.runId, owner: 'web-2' })).toMatchObject({ kind: 'closed', status: 'completed' });
  await clearFakeNow(db);
  return db.query<{ outcome: string; output: unknown }>(
    `select data->>'outcome' as outcome, data->'output' as output from agent_kit_steps where run_id = $1 and kind = 'tool'`,
    [turn.runId]);
}

it("a run that meets a resolved effect again tells its model the operator's finding, not the ledger's JSON", async () => {
  expect(await resolvedThenMetAgain(false, 'no charge at the bank')).toEqual([{
    outcome: 'failed',
    output: 'An operator checked the outside system: this side effect did not happen.', // not the note
  }]);
  expect(await resolvedThenMetAgain(true, 'ch_9')).toEqual([{
    outcome: 'completed',
    output: { status: 'completed', message: 'An operator checked the outside system: this side effect happened.' },
  }]);
}, 30_000);

it('the command takes exactly one verdict', () => {
  expect(resolveVerdict({ happened: true, by: 'x' })).toBe(true);
  expect(resolveVerdict({ didNotHappen: true, by: 'x' })).toBe(false);
  expect(() => resolveVerdict({ by: 'x' })).toThrow(/exactly one of --happened and --did-not-happen/);
  expect(() => resolveVerdict({ happened: true, didNotHappen: true, by: 'x' })).toThrow(/exactly one/);
});
