// After an incident an operator asks which runs have effects in doubt. The filter is checked at
// every door, on both stores: listRuns({ inDoubt }), `agent-kit runs --in-doubt` (parsed by the
// real command definition) and GET /api/runs?inDoubt=1, alone and with status, owner and limit;
// `agent-kit show` names a run's effects in doubt at the top. Method: every effect comes from
// the turn engine with real tools (a payment tool throws EffectInDoubtError, a plain error, or
// succeeds; one blocks mid-charge so its effect is `started` while the lists are read).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { cronSecret, headerAuth, makeRequest } from '../harness/http-harness.js';
import { parseCommandArgs } from '../harness/cli-args.js';
import { fakeRunSegment } from '../harness/fake-segment.js';
import { retryingModel, stepsModel } from '../harness/steps-model.js';
import { gate, makeRuntime } from '../harness/turn-kit.js';
import { openTestDb } from '../harness/test-db.js';
import { formatRunsCommand, type RunsOptions } from '../../src/cli/commands/runs.js';
import { formatShowCommand } from '../../src/cli/commands/show.js';
import { configFromEnv } from '../../src/config.js';
import { listRuns, type ListRunsOptions } from '../../src/event-log/read-runs.js';
import { createHandlers, type Handlers } from '../../src/http/handlers.js';
import { EffectInDoubtError } from '../../src/index.js';
import type { AgentTool, LanguageModelV3 } from '../../src/model/index.js';
import { startTurn } from '../../src/queue/start-turn.js';
import type { Db } from '../../src/store/db.js';
import { runSegment } from '../../src/turn/run-segment.js';

let db: Db;
let handlers: Handlers;

/** A charge tool whose execute does `act`: throws, succeeds, or waits. */
function chargeTool(act: () => Promise<unknown>): AgentTool<{ cents: number }, unknown> {
  const inputSchema = z.object({ cents: z.number() });
  return { name: 'charge_card', description: 'Charge the card', inputSchema, execute: act };
}
const noAnswer = () => Promise.reject(new EffectInDoubtError('no answer from the payments API'));
const declined = () => Promise.reject(new Error('card declined'));
const charged = () => Promise.resolve({ chargeId: 'ch_1' });

/** One turn of `ownerId`, run to its end by the engine; returns its run id. */
async function payTurn(ownerId: string, tool: AgentTool<{ cents: number }, unknown>, model: LanguageModelV3,
  maxSteps = 16): Promise<string> {
  const rt = makeRuntime(db, { tools: { charge_card: tool }, model, settings: { maxSteps } });
  const turn = await startTurn(db, { ownerId, text: 'pay 50 EUR' });
  await runSegment(rt, { runId: turn.runId, owner: `${ownerId}-worker` });
  return turn.runId;
}

const pay = retryingModel('charge_card', { cents: 5000 }, 1); // one call, then "Done."
const runs = {} as Record<'paid' | 'declined' | 'doubtOlga' | 'doubtFailed' | 'doubtPiet', string>;
/** `agent-kit runs --in-doubt` while the store's runs had only completed and failed effects. */
let beforeAnyDoubt = '';

beforeAll(async () => {
  db = await openTestDb();
  handlers = createHandlers({
    rt: { db, model: 'test-model', tools: {}, config: { ...configFromEnv({}), cronSecret } },
    authenticate: headerAuth, runSegment: fakeRunSegment(),
  });
  // Oldest first. A charge made, a charge declined.
  runs.paid = await payTurn('olga', chargeTool(charged), pay);
  runs.declined = await payTurn('olga', chargeTool(declined), pay);
  beforeAnyDoubt = await formatRunsCommand(db, { inDoubt: true }, new Date());
  // Completed with an effect in doubt (the model was told so and answered).
  runs.doubtOlga = await payTurn('olga', chargeTool(noAnswer), pay);
  // Failed at its step limit, its one charge in doubt.
  runs.doubtFailed = await payTurn('piet', chargeTool(noAnswer),
    stepsModel([{ calls: [{ id: 'c1', name: 'charge_card', input: { cents: 9900 } }] }]), 1);
  runs.doubtPiet = await payTurn('piet', chargeTool(noAnswer), pay);
});
afterAll(async () => {
  await handlers?.segments.settle();
  await db?.close();
});

async function listed(options: Partial<ListRunsOptions>): Promise<string[]> {
  const found = await listRuns(db, { ownerId: null, limit: 50, ...options });
  return found.map((run) => run.id);
}

describe('the fixture, as the engine left it', () => {
  it('has the effect statuses each run is named for', async () => {
    const rows = await db.query<{ run_id: string; status: string }>(
      'select run_id, status from agent_kit_effects order by started_at');
    const statusesOf = (runId: string) => rows.filter((r) => r.run_id === runId).map((r) => r.status);
    expect(Object.fromEntries(Object.entries(runs).map(([name, id]) => [name, statusesOf(id)]))).toEqual({
      paid: ['completed'], declined: ['failed'],
      doubtOlga: ['in_doubt'], doubtFailed: ['in_doubt'], doubtPiet: ['in_doubt'],
    });
    const statuses = await db.query<{ id: string; status: string }>('select id, status from agent_kit_runs');
    expect(statuses.find((r) => r.id === runs.doubtFailed)?.status).toBe('failed');
    expect(statuses.filter((r) => r.id !== runs.doubtFailed).every((r) => r.status === 'completed')).toBe(true);
  });
});

describe('listRuns({ inDoubt: true })', () => {
  it('lists only runs with an effect in doubt, newest first, and counts them', async () => {
    expect(await listed({ inDoubt: true })).toEqual([runs.doubtPiet, runs.doubtFailed, runs.doubtOlga]);
    const [newest] = await listRuns(db, { ownerId: null, inDoubt: true, limit: 1 });
    expect(newest).toMatchObject({ id: runs.doubtPiet, effects: 1, inDoubt: 1 });
    expect(await listed({ inDoubt: false })).toHaveLength(5);
  });

  it('combines with status, owner and limit', async () => {
    expect(await listed({ inDoubt: true, status: 'failed' })).toEqual([runs.doubtFailed]);
    expect(await listed({ inDoubt: true, status: 'completed' })).toEqual([runs.doubtPiet, runs.doubtOlga]);
    expect(await listed({ inDoubt: true, status: 'aborted' })).toEqual([]);
    expect(await listed({ inDoubt: true, ownerId: 'olga' })).toEqual([runs.doubtOlga]);
    expect(await listed({ inDoubt: true, limit: 2 })).toEqual([runs.doubtPiet, runs.doubtFailed]);
  });

  it('leaves out a run whose effect is only started (its tool still running)', async () => {
    const entered = gate();
    const release = gate();
    const blocking = chargeTool(async () => {
      entered.open();
      await release.wait();
      return { chargeId: 'ch_2' };
    });
    const running = payTurn('quinn', blocking, pay);
    try {
      await entered.wait();
      const [effect] = await db.query<{ status: string }>(
        `select e.status from agent_kit_effects e join agent_kit_runs r on r.id = e.run_id
         join agent_kit_threads t on t.id = r.thread_id where t.owner_id = 'quinn'`);
      expect(effect?.status).toBe('started');
      expect(await listed({ inDoubt: true, ownerId: 'quinn' })).toEqual([]);
      expect(await listed({ inDoubt: true, status: 'running' })).toEqual([]);
      expect(await listed({ status: 'running' })).toHaveLength(1);
    } finally {
      release.open(); // the segment ends, whatever the checks said
    }
    const runId = await running;
    expect(await listed({ inDoubt: true })).not.toContain(runId);
  });
});

/** Parse `args` with the real `runs` command definition; returns the options it would act on. */
const parseRunsArgs = (args: string[]) => parseCommandArgs<RunsOptions>('runs', args);

describe('agent-kit runs --in-doubt', () => {
  it('parses with --json, --status and --limit', async () => {
    expect(await parseRunsArgs(['--in-doubt'])).toEqual({ inDoubt: true });
    expect(await parseRunsArgs(['--json', '--in-doubt', '--status', 'failed', '--limit', '1']))
      .toEqual({ json: true, inDoubt: true, status: 'failed', limit: 1 });
    expect(await parseRunsArgs([])).toEqual({});
  });

  it('prints the runs in doubt as a table and as JSON', async () => {
    const table = await formatRunsCommand(db, await parseRunsArgs(['--in-doubt']), new Date());
    const [header, ...rows] = table.trimEnd().split('\n');
    expect(header).toMatch(/\bIN DOUBT\b/);
    expect(rows.map((row) => row.split(/\s{2,}/)[0])).toEqual([runs.doubtPiet, runs.doubtFailed, runs.doubtOlga]);
    expect(rows.every((row) => row.split(/\s{2,}/)[8] === '1')).toBe(true);
    const json = JSON.parse(await formatRunsCommand(db,
      await parseRunsArgs(['--in-doubt', '--json', '--status', 'completed', '--limit', '1']), new Date()));
    expect(json).toEqual([expect.objectContaining({ id: runs.doubtPiet, status: 'completed', inDoubt: 1 })]);
  });

  it('says so when no run has an effect in doubt', async () => {
    expect(beforeAnyDoubt).toBe('no runs with effects in doubt\n');
    expect(await formatRunsCommand(db, { inDoubt: true, status: 'aborted' }, new Date()))
      .toBe('no runs with effects in doubt (status aborted)\n');
  });
});

describe('agent-kit show', () => {
  it('names each effect in doubt, key and tool, at the top', async () => {
    const key = `${runs.doubtOlga}:0:0`;
    const text = await formatShowCommand(db, runs.doubtOlga, {}, new Date());
    const top = text.slice(0, text.indexOf('\nsegments'));
    expect(top).toMatch(new RegExp(`\\n  in doubt  ${key}  tool charge_card\\n`));
    // And the command that records the verdict, as printed, key included.
    expect(top).toContain(`\n  verdict   agent-kit resolve-effect ${runs.doubtOlga} ${key} --happened (or --did-not-happen,`);
    expect(text).toMatch(new RegExp(`${key}\\s+charge_card\\s+in_doubt`));
    expect(await formatShowCommand(db, runs.paid, {}, new Date())).not.toContain('in doubt');
  });
});

describe('GET /api/runs?inDoubt=', () => {
  async function get(path: string, user = 'ops', operator = true) {
    return handlers.handle(makeRequest('GET', path, { user, operator }));
  }
  async function ids(path: string, user?: string, operator?: boolean): Promise<string[]> {
    const response = await get(path, user, operator);
    expect(response.status, path).toBe(200);
    return ((await response.json()) as { runs: { id: string }[] }).runs.map((run) => run.id);
  }

  it('filters the list, with status, limit and the caller\'s own runs', async () => {
    const inDoubt = [runs.doubtPiet, runs.doubtFailed, runs.doubtOlga];
    expect(await ids('/api/runs?inDoubt=1')).toEqual(inDoubt);
    expect(await ids('/api/runs?inDoubt=true')).toEqual(inDoubt);
    expect(await ids('/api/runs?inDoubt=1&status=failed')).toEqual([runs.doubtFailed]);
    expect(await ids('/api/runs?inDoubt=1&limit=1')).toEqual([runs.doubtPiet]);
    expect(await ids('/api/runs?inDoubt=1', 'olga', false)).toEqual([runs.doubtOlga]);
    for (const off of ['/api/runs', '/api/runs?inDoubt=0', '/api/runs?inDoubt=false']) {
      expect(await ids(off)).toEqual(expect.arrayContaining([runs.paid, runs.declined, ...inDoubt]));
    }
  });

  it('refuses a value that is not a flag with a 400 naming the parameter', async () => {
    for (const value of ['yes', '2', '', 'TRUE']) {
      const response = await get(`/api/runs?inDoubt=${value}`);
      expect(response.status, value).toBe(400);
      const { error } = await response.json();
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toMatch(/^invalid query parameter "inDoubt"/);
    }
  });
});
