// The inspection commands (runs, show, events) on both stores: the table and JSON list the
// run's lease and effect count, show prints segments, steps and messages (and when a queued run's
// job is due), events prints one JSON line per event from a cursor; on Postgres, the real CLI
// follows live until SIGINT.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testRuntime } from '../../../test/chaos/null-turn.js';
import { fakeRunSegment } from '../../../test/harness/fake-segment.js';
import { effectsFile, makeRuntime } from '../../../test/harness/turn-kit.js';
import { adminQuery, onPostgres, openTestDb, templateName, urlForDatabase } from '../../../test/harness/test-db.js';
import { configFromEnv } from '../../config.js';
import { readEvents } from '../../event-log/read-events.js';
import { scriptedAskQuestion } from '../../model/index.js';
import { regenerateTurn } from '../../queue/regenerate-turn.js';
import { reapExpiredRuns } from '../../reaper/reap-expired-runs.js';
import { advanceFakeNow, clearFakeNow } from '../../store/clock.js';
import { startTurn } from '../../queue/start-turn.js';
import { runSegment } from '../../turn/run-segment.js';
import { newOwner } from '../../turn/runtime.js';
import { openPgDb } from '../../store/pg-driver.js';
import type { Db } from '../../store/db.js';
import { printEvents } from './events.js';
import { formatRunsCommand } from './runs.js';
import { formatResolveEffectCommand } from './resolve-effect.js';
import { formatShowCommand } from './show.js';

let db: Db;
let turn: Awaited<ReturnType<typeof startTurn>>;
beforeAll(async () => {
  db = await openTestDb();
  const rt = { db, model: 'test-model', tools: {}, config: configFromEnv({}) };
  turn = await startTurn(db, { ownerId: 'dora', text: 'inspect me' });
  await fakeRunSegment({ askQuestionId: 'q1' })(rt, { runId: turn.runId, owner: 'cli-test-a' });
  await db.query(`select agent_kit_submit_input($1, 'q1', '{"answer":"yes"}')`, [turn.runId]);
  await fakeRunSegment({ deltas: ['All ', 'done.'] })(rt, { runId: turn.runId, owner: 'cli-test-b' });
});
afterAll(async () => {
  await db.close();
});

describe('agent-kit runs', () => {
  it('prints a table with the run, its fence, attempts, effect count and effects in doubt', async () => {
    const text = await formatRunsCommand(db, {}, new Date());
    const [header, row] = text.trimEnd().split('\n');
    expect(header).toMatch(/^RUN\s+STATUS\s+TURN\s+FENCE\s+ATT\s+LEASE HOLDER\s+LEASE\s+EFFECTS\s+IN DOUBT\s+TOKENS IN\/OUT\s+UPDATED/);
    expect(row!.split(/\s{2,}/)).toEqual([turn.runId, 'completed', '1', '2', '1', '-', '-', '0', '-', '-', expect.stringMatching(/ago$/), 'dora']);
  });

  it('prints JSON for scripts, filtered by status', async () => {
    const runs = JSON.parse(await formatRunsCommand(db, { json: true }, new Date()));
    expect(runs).toEqual([expect.objectContaining({ id: turn.runId, status: 'completed', fence: 2, effects: 0, inDoubt: 0, usage: null })]);
    expect(JSON.parse(await formatRunsCommand(db, { json: true, status: 'running' }, new Date()))).toEqual([]);
    expect(await formatRunsCommand(db, { status: 'running' }, new Date())).toBe('no runs\n');
  });
});

describe('agent-kit show', () => {
  it('prints the run, its segments and its messages', async () => {
    const text = await formatShowCommand(db, turn.runId, {}, new Date());
    expect(text).toContain(`run ${turn.runId}`);
    expect(text).toMatch(/status\s+completed\s+fence 2\s+attempts 1/);
    expect(text).toMatch(/segments \(2\)\n.*FENCE.*\n\s+1\s+1\s+cli-test-a\s+\S+\s+\S+\s+waiting_input\n\s+2\s+1\s+cli-test-b\s+\S+\s+\S+\s+completed/);
    expect(text).toContain('user: inspect me');
    expect(text).toContain('assistant: All done.');
    expect(text).toContain('effects: none');
    const json = JSON.parse(await formatShowCommand(db, turn.runId, { json: true }, new Date()));
    expect(json.run).toMatchObject({ id: turn.runId, status: 'completed' });
  });

  it('says when a run parked for a model retry is due, and why its segment ended', async () => {
    const parked = await startTurn(db, { ownerId: 'dora', text: 'busy provider' });
    const [claim] = await db.query<{ owner: string; fence: number }>(
      `select owner, fence from agent_kit_claim_run($1, 'cli-test-d', interval '30 seconds')`, [parked.runId]);
    await db.query(`select agent_kit_begin_segment($1, $2, $3, '')`, [parked.runId, claim!.owner, claim!.fence]);
    await db.query(`select agent_kit_park_for_retry($1, $2, $3, interval '30 seconds', '{"retry":1}')`,
      [parked.runId, claim!.owner, claim!.fence]);
    const [clock] = await db.query<{ now: Date | string }>('select agent_kit_now() as now');
    const now = new Date(clock!.now).getTime();
    const text = await formatShowCommand(db, parked.runId, {}, new Date(now + 3_000));
    expect(text).toMatch(/status\s+queued\s+fence 1\s+attempts 1\n/);
    expect(text).toContain('  job       due in 27s\n');
    expect(text).toMatch(/\n\s+1\s+1\s+cli-test-d\s+\S+\s+\S+\s+queued \(model retry\)\n/);
    const later = await formatShowCommand(db, parked.runId, {}, new Date(now + 35_000));
    expect(later).toContain('  job       due since 5s\n'); // waiting for a drain
    const json = JSON.parse(await formatShowCommand(db, parked.runId, { json: true }, new Date()));
    expect(json.segments).toMatchObject([{ endedAs: 'queued', retryDueAt: expect.any(String) }]); // the status stays a status
    const dueMs = Date.parse(json.segments[0].retryDueAt);
    expect(Date.parse(json.run.retryDueAt)).toBe(dueMs);
    // The run list says when it may be claimed again (ADR-0098), and nothing once that time passed.
    const listed = async (at: number) => (await formatRunsCommand(db, {}, new Date(at))).split('\n')
      .find((line) => line.startsWith(parked.runId))!.split(/\s{2,}/);
    expect((await listed(now + 3_000))[6]).toBe('retry in 27s');
    expect((await listed(now + 35_000))[6]).toBe('-');
    const [row] = JSON.parse(await formatRunsCommand(db, { json: true, status: 'queued' }, new Date()))
      .filter((r: { id: string }) => r.id === parked.runId);
    expect(Date.parse(row.retryDueAt)).toBe(dueMs);
  });

  it("says why a segment failed, that a live one's lease ran out, and which one the reaper salvaged the run after", async () => {
    const dying = await startTurn(db, { ownerId: 'dora', text: 'fails, then dies' });
    const begin = async (owner: string) => {
      const [claim] = await db.query<{ fence: number }>(
        `select fence from agent_kit_claim_run($1, $2, interval '5 seconds')`, [dying.runId, owner]);
      await db.query(`select agent_kit_begin_segment($1, $2, $3, '')`, [dying.runId, owner, claim!.fence]);
      return claim!.fence;
    };
    const first = await begin('cli-test-f1');
    const error = { name: 'StepPastBudgetError', message: 'the model step ran past the 1 s budget', stack: 'StepPastBudgetError: …\n    at step' };
    await db.query('select agent_kit_fail_segment($1, $2, $3, $4::jsonb)', [dying.runId, 'cli-test-f1', first, JSON.stringify(error)]);
    await begin('cli-test-f2');
    const segmentRows = (text: string) => text.split('\n').filter((line) => / cli-test-f\d /.test(line)).map((l) => l.trim().split(/\s{2,}/));
    try {
      const later = new Date((await advanceFakeNow(db, 6_000)).getTime() + 100);
      expect(segmentRows(await formatShowCommand(db, dying.runId, {}, later)).map((row) => row.slice(-1))).toEqual([
        ['failed: StepPastBudgetError: the model step ran past the 1 s budget'],
        ['lease expired (dead or frozen: the reaper hands the run on)'],
      ]);
      expect(await reapExpiredRuns(testRuntime(db, { maxRunAttempts: 2 }))).toMatchObject({ salvaged: 1 });
    } finally {
      await clearFakeNow(db);
    }
    const text = await formatShowCommand(db, dying.runId, {}, new Date());
    expect(text).toMatch(/status\s+aborted\s+fence 3\s+attempts 2\n/);
    expect(segmentRows(text).map((row) => row.slice(-1))).toEqual([
      ['failed: StepPastBudgetError: the model step ran past the 1 s budget'],
      ['lost (no end written: its process died or froze, or its deadline cut a tool call; the next fence took the run on)'],
    ]);
    // The salvage's claim has a row of its own, and the run says why it was given up.
    expect(text).toMatch(/\n\s+3\s+-\s+-\s+\S+\s+-\s+aborted \(salvaged: the crash budget was spent\)\n/);
    expect(text).toMatch(/\n {2}salvaged {2}the run's segments ended unfinished 2 times in a row \(.*lacked a tool the run needed; AGENT_KIT_MAX_RUN_ATTEMPTS=2\)\n/);
    const json = JSON.parse(await formatShowCommand(db, dying.runId, { json: true }, new Date()));
    expect(json.segments).toMatchObject([
      { fence: 1, endedAs: 'failed', error: 'StepPastBudgetError: the model step ran past the 1 s budget' },
      { fence: 2, endedAs: 'lost', endedSeq: expect.any(Number) },
      { fence: 3, owner: null, endedAs: 'aborted', salvaged: expect.stringContaining('2 times in a row') },
    ]);
    expect(JSON.stringify(json)).not.toContain('at step'); // the stack stays in last_error
  });

  it('says why each segment handed its run on: a slice, a stop, a store error (ADR-0121)', async () => {
    const handedOn = await startTurn(db, { ownerId: 'dora', text: 'sliced, stopped, failed' });
    for (const [owner, reason] of [['cli-test-s1', 'slice'], ['cli-test-s2', 'stop'], ['cli-test-s3', 'store-error'], ['cli-test-s4', null]] as const) {
      const [claim] = await db.query<{ fence: number }>(
        `select fence from agent_kit_claim_run($1, $2, interval '5 seconds')`, [handedOn.runId, owner]);
      await db.query(`select agent_kit_begin_segment($1, $2, $3, '')`, [handedOn.runId, owner, claim!.fence]);
      // (The last as code from before migration 0046 parks: no reason.)
      if (reason) await db.query(`select agent_kit_park_run($1, $2, $3, 'queued', null, $4)`, [handedOn.runId, owner, claim!.fence, reason]);
      else await db.query(`select agent_kit_park_run($1, $2, $3, 'queued')`, [handedOn.runId, owner, claim!.fence]);
    }
    const text = await formatShowCommand(db, handedOn.runId, {}, new Date());
    const ends = text.split('\n').filter((line) => / cli-test-s\d /.test(line)).map((l) => l.trim().split(/\s{2,}/).at(-1));
    expect(ends).toEqual([
      "queued (a slice: its invocation's time ran out)", 'queued (its process was stopping)', 'queued (handed on after a store error)', 'queued',
    ]);
    const json = JSON.parse(await formatShowCommand(db, handedOn.runId, { json: true }, new Date()));
    expect(json.segments.map((segment: { parkReason?: string }) => segment.parkReason)).toEqual(['slice', 'stop', 'store-error', undefined]);
    const [claim] = await db.query<{ fence: number }>(`select fence from agent_kit_claim_run($1, 'cli-test-s5', interval '5 seconds')`, [handedOn.runId]);
    await expect(db.query(`select agent_kit_park_run($1, 'cli-test-s5', $2, 'queued', null, 'nap')`, [handedOn.runId, claim!.fence]))
      .rejects.toThrow(/park reason must be slice, stop, store-error or started-late, got nap/);
  });

  it('says in words what a waiting run waits for: the question, or the tool call to approve and its input', async () => {
    const waits = async (text: string) => {
      const { runId } = await startTurn(db, { ownerId: 'dora', text });
      expect(await runSegment(makeRuntime(db), { runId, owner: newOwner('waits') })).toMatchObject({ status: 'waiting_input' });
      const [{ waiting_for: waitingFor }] = await db.query<{ waiting_for: { id: string } }>(
        'select waiting_for from agent_kit_runs where id = $1', [runId]) as [{ waiting_for: { id: string } }];
      return { line: (await formatShowCommand(db, runId, {}, new Date())).split('\n').find((l) => l.startsWith('  waiting')), id: waitingFor.id };
    };
    const question = await waits('which colour? #ask');
    expect(question.line).toBe(`  waiting   an answer to question ${question.id}: ${JSON.stringify(scriptedAskQuestion)}`);
    const approval = await waits('pay it #approve');
    expect(approval.line).toBe(`  waiting   approval ${approval.id} of transfer_funds {"to":"demo","amount":42}`);
  });

  it('adds up the tokens its model steps used, as the model reported them (ADR-0065)', async () => {
    const effects = effectsFile();
    try {
      const { runId } = await startTurn(db, { ownerId: 'dora', text: 'count my tokens #effect' });
      expect(await runSegment(makeRuntime(db), { runId, owner: newOwner('tokens') })).toMatchObject({ status: 'completed' });
      const steps = await db.query<{ data: { usage?: { inputTokens: number; outputTokens: number } } }>(
        `select data from agent_kit_steps where run_id = $1 and kind = 'model' order by step_no`, [runId]);
      // The scripted model counts words as tokens: the prompt's text, and the tool call's input
      // (`{"note":"count my tokens #effect"}`, four words) or the reply's 12 words.
      expect(steps.map((s) => s.data.usage)).toEqual([{ inputTokens: 4, outputTokens: 4 }, { inputTokens: 4, outputTokens: 12 }]);
      const [first, second] = steps.map((s) => s.data.usage!);
      const text = await formatShowCommand(db, runId, {}, new Date());
      const total = (key: 'inputTokens' | 'outputTokens') => (first![key] + second![key]).toLocaleString('en-US');
      expect(text).toContain(`  tokens    ${total('inputTokens')} in, ${total('outputTokens')} out, 2 model steps\n`);
      // Each model step's row says what it used.
      expect(text).toMatch(/\n\s+0\s+model\s+1\s+\s*\[calls record_effect\] {2}\(4 in, 4 out\)\n/);
      expect(text).toMatch(/\n\s+2\s+model\s+1\s+.*\S {2}\(4 in, 12 out\)\n/);
      const json = JSON.parse(await formatShowCommand(db, runId, { json: true }, new Date()));
      expect(json.usage).toEqual({
        inputTokens: first!.inputTokens + second!.inputTokens, outputTokens: first!.outputTokens + second!.outputTokens,
        modelSteps: 2, reported: 2,
      });
      // The step-finished events carry each step's usage to viewers.
      const finished = await db.query<{ data: { usage?: unknown } }>(
        `select data from agent_kit_thread_events where run_id = $1 and type = 'step-finished' order by seq`, [runId]);
      expect(finished.map((e) => e.data.usage)).toEqual([first, second]);
      // The run list adds them up too, in its TOKENS IN/OUT column and in --json.
      const listed = JSON.parse(await formatRunsCommand(db, { json: true }, new Date())) as { id: string; usage: unknown }[];
      expect(listed.find((r) => r.id === runId)!.usage).toEqual({ inputTokens: 8, outputTokens: 16 });
      const table = (await formatRunsCommand(db, {}, new Date())).split('\n').find((line) => line.startsWith(runId))!;
      expect(table.split(/\s{2,}/)[9]).toBe('8/16');
      // A step whose provider reported nothing (or journalled before usage was kept) is said so.
      await db.query(`update agent_kit_steps set data = data - 'usage' where run_id = $1 and step_no = 0`, [runId]);
      expect(await formatShowCommand(db, runId, {}, new Date())).toContain('  tokens    4 in, 12 out, 1 of 2 model steps reported\n');
    } finally {
      effects.restore();
    }
  });

  it('prints no tokens line for a run whose steps reported none', async () => {
    expect(await formatShowCommand(db, turn.runId, {}, new Date())).not.toContain('tokens');
    expect(JSON.parse(await formatShowCommand(db, turn.runId, { json: true }, new Date())).usage).toBeNull();
  });

  it('fails clearly for an unknown run', async () => {
    await expect(formatShowCommand(db, crypto.randomUUID(), {}, new Date())).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('says which run a regenerated run replaced, and the replaced one which run replaced it (ADR-0091)', async () => {
    const first = await startTurn(db, { ownerId: 'dora', text: 'ask me twice', clientMessageId: 'twice' });
    await fakeRunSegment({ deltas: ['Once.'] })({ db, model: 'test-model', tools: {}, config: configFromEnv({}) }, { runId: first.runId, owner: 'cli-test-c' });
    const again = await regenerateTurn(db, { threadId: first.threadId, ownerId: 'dora', message: 'twice', text: 'ask me twice, edited' });
    const shown = await formatShowCommand(db, again.runId, {}, new Date());
    expect(shown).toContain(`  replaces  run ${first.runId} (its reply asked again, the message edited)`);
    expect(JSON.parse(await formatShowCommand(db, again.runId, { json: true }, new Date())).regenerates).toEqual({ runId: first.runId, edited: true });
    expect(await formatShowCommand(db, first.runId, {}, new Date())).toContain(`  replaced  by run ${again.runId} (out of the conversation: a reply asked again, or an earlier answer put back)`);
    expect(JSON.parse(await formatShowCommand(db, first.runId, { json: true }, new Date())).regenerates).toBeNull();
    // Each answers its own message: the edit left the first one with its run.
    expect(JSON.parse(await formatShowCommand(db, again.runId, { json: true }, new Date())).question)
      .toMatchObject({ runId: again.runId, role: 'user', text: 'ask me twice, edited' });
    expect(JSON.parse(await formatShowCommand(db, first.runId, { json: true }, new Date())).question)
      .toMatchObject({ runId: first.runId, text: 'ask me twice', clientMessageId: null });
    expect(await formatShowCommand(db, first.runId, {}, new Date())).not.toContain('now with run');
  });
});

describe('agent-kit events', () => {
  it('prints one JSON line per event after the cursor', async () => {
    const lines: string[] = [];
    const count = await printEvents(db, turn.threadId, { after: 2 }, async (line) => void lines.push(line));
    const log = await readEvents(db, { threadId: turn.threadId, afterSeq: 2, limit: 1000 });
    expect(count).toBe(log.length);
    expect(lines.every((l) => l.endsWith('\n'))).toBe(true);
    expect(lines.map((l) => JSON.parse(l))).toEqual(log.map((e) => ({
      seq: e.seq, runId: e.runId, fence: e.fence, type: e.type, data: e.data, createdAt: e.createdAt.toISOString(),
    })));
  });

  it('prints from the start of the latest turns with --turns', async () => {
    const rt = { db, model: 'test-model', tools: {}, config: configFromEnv({}) };
    const first = await startTurn(db, { ownerId: 'tina', text: 'one' });
    await fakeRunSegment()(rt, { runId: first.runId, owner: 'cli-test-c' });
    const second = await startTurn(db, { threadId: first.threadId, ownerId: 'tina', text: 'two' });
    await fakeRunSegment()(rt, { runId: second.runId, owner: 'cli-test-c' });
    const log = await readEvents(db, { threadId: first.threadId, afterSeq: 0, limit: 1000 });
    const secondStart = log.find((e) => e.type === 'message' && e.runId === second.runId)!.seq;
    const lines: string[] = [];
    const count = await printEvents(db, first.threadId, { turns: 1 }, async (line) => void lines.push(line));
    expect(lines.map((l) => (JSON.parse(l) as { seq: number }).seq)).toEqual(log.filter((e) => e.seq >= secondStart).map((e) => e.seq));
    expect(count).toBe(lines.length);
    expect(secondStart).toBeGreaterThan(1);
    // More turns than the thread has: the whole log.
    expect(await printEvents(db, first.threadId, { turns: 5 }, async () => {})).toBe(log.length);
  });

  it('fails clearly for an unknown thread', async () => {
    await expect(printEvents(db, crypto.randomUUID(), {}, async () => {})).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('refuses --after past the thread\'s last event, which printed nothing (or, following, waited for the log to reach it)', async () => {
    const turn = await startTurn(db, { ownerId: 'erin', text: 'a short log' });
    const last = (await readEvents(db, { threadId: turn.threadId, afterSeq: 0, limit: 1000 })).at(-1)!.seq;
    expect(await printEvents(db, turn.threadId, { after: last }, async () => {})).toBe(0); // the end itself is fine
    for (const follow of [false, true]) {
      await expect(printEvents(db, turn.threadId, { after: last + 1, follow }, async () => {}))
        .rejects.toThrow(`--after ${last + 1} is past the thread's last event (seq ${last})`);
    }
  });
});

const packageDir = fileURLToPath(new URL('../../../', import.meta.url));

describe.runIf(onPostgres)('agent-kit events --follow (the real CLI)', () => {
  it('prints live events as they are appended and exits 0 on SIGINT', async () => {
    const name = `agent_kit_t_${crypto.randomBytes(6).toString('hex')}`;
    await adminQuery(`create database ${name} template ${templateName}`);
    const url = urlForDatabase(name);
    const own = openPgDb({ connectionString: url, max: 2 });
    try {
      const started = await startTurn(own, { ownerId: 'erin', text: 'follow me' });
      const child = spawn(process.execPath, [
        '--import', 'tsx', '--input-type=module', '-e',
        `import { main } from './src/cli/main.ts'; process.exitCode = await main(['node', 'agent-kit', ...process.argv.slice(1)]);`,
        'events', started.threadId, '--follow', '--after', '1',
      ], { cwd: packageDir, env: { ...process.env, DATABASE_URL: url }, stdio: ['ignore', 'pipe', 'pipe'] });
      const lines: string[] = [];
      let buffered = '';
      child.stdout.on('data', (chunk: Buffer) => {
        const parts = (buffered + chunk.toString()).split('\n');
        buffered = parts.pop()!;
        lines.push(...parts);
      });
      const waitForLines = async (n: number) => {
        for (let waitedMs = 0; lines.length < n; waitedMs += 20) {
          if (child.exitCode !== null || waitedMs > 30_000) throw new Error(`cli gave ${lines.length} lines, exit ${child.exitCode}`);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      };
      await waitForLines(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ seq: 2, type: 'run-queued' });
      await own.query(`select agent_kit__append_event($1, $2, 0, 'note', '{"n":1}')`, [started.threadId, started.runId]);
      await own.query(`select agent_kit__append_event($1, $2, 0, 'note', '{"n":2}')`, [started.threadId, started.runId]);
      await waitForLines(3);
      expect(lines.slice(1).map((l) => JSON.parse(l))).toMatchObject([{ seq: 3, data: { n: 1 } }, { seq: 4, data: { n: 2 } }]);
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGINT');
      expect(await exited).toBe(0);
    } finally {
      await own.close();
      await adminQuery(`drop database if exists ${name} with (force)`).catch(() => {});
    }
  });
});

describe('agent-kit resolve-effect', () => {
  it('records the verdict on an effect in doubt and says what it is now, as text or as the HTTP route answers', async () => {
    const { runId } = await startTurn(db, { ownerId: 'dora', text: 'pay twice?' });
    const [claim] = await db.query<{ owner: string; fence: number }>(
      `select owner, fence from agent_kit_claim_run($1, 'cli-test-e', interval '30 seconds')`, [runId]);
    for (const [key, status] of [['pay-1', 'started'], ['pay-1', 'in_doubt'], ['pay-2', 'started'], ['pay-2', 'in_doubt']]) {
      await db.query(`select agent_kit_record_effect($1, $2, $3, $4, $5, 'charge_card', '{}'::jsonb, '{"reason":"cut off"}'::jsonb)`,
        [runId, claim!.owner, claim!.fence, key, status]);
    }
    expect(await formatResolveEffectCommand(db, runId, 'pay-1', true, { by: 'ops' })).toBe('effect pay-1 (charge_card) is now completed\n');
    const json = JSON.parse(await formatResolveEffectCommand(db, runId, 'pay-2', false, { by: 'ops', note: 'no charge at the bank', json: true }));
    expect(json).toEqual({ runId, key: 'pay-2', tool: 'charge_card', status: 'failed', result: expect.anything() });
    // A second verdict is refused, and the ledger keeps the first.
    await expect(formatResolveEffectCommand(db, runId, 'pay-2', true, { by: 'ops' })).rejects.toMatchObject({ code: 'CONFLICT' });
    const effects = await db.query<{ key: string; status: string }>('select key, status from agent_kit_effects where run_id = $1 order by key', [runId]);
    expect(effects).toEqual([{ key: 'pay-1', status: 'completed' }, { key: 'pay-2', status: 'failed' }]);
  });
});
