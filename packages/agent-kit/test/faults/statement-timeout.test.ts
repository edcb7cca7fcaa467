// Statement timeouts, on real Postgres: a worker whose pool has a short statement_timeout meets a
// run row held by another transaction (an operator's long transaction, a stuck migration). The
// statement is cancelled, nothing it meant to write is written, the segment stops (and hands the
// run on once the row is free: queued when it had stored text to go on from, ADR-0115), and the run
// resumes later and ends exactly once. How the timeout surfaces (its error class) is pinned too.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import { createScriptedModel, scriptedReplyText } from '../../src/model/index.js';
import { startTurn } from '../../src/queue/start-turn.js';
import type { Db } from '../../src/store/db.js';
import { openPgDb } from '../../src/store/pg-driver.js';
import { runSegment } from '../../src/turn/index.js';
import { onPostgres, openTestDb, urlForDatabase } from '../harness/test-db.js';
import { effectsFile, freezingModel, gate, makeRuntime } from '../harness/turn-kit.js';
import { databaseNameOf, expectEndedOnce, faultRounds, finishRun, tally } from './pg-faults.js';

const tokens = 20;
const statementTimeoutMs = 250;

/** Another session that holds the run's row lock until released. */
async function holdRunRow(url: string, runId: string) {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  await client.query('begin');
  await client.query('select 1 from agent_kit_runs where id = $1 for update', [runId]);
  return async () => {
    await client.query('rollback').catch(() => {});
    await client.end().catch(() => {});
  };
}

describe.runIf(onPostgres)('statement timeouts (real Postgres)', () => {
  let db: Db;
  let url: string;
  let timed: Db;
  let effects: ReturnType<typeof effectsFile>;
  beforeAll(async () => {
    db = await openTestDb();
    url = urlForDatabase(await databaseNameOf(db));
    timed = openPgDb({ connectionString: url, statementTimeoutMs, max: 4 });
    effects = effectsFile();
  });
  afterAll(async () => {
    effects.restore();
    await timed?.close();
    await db?.close();
  });

  it(`stops a segment whose write times out mid-stream, which gives its lease up once the row is free; the run ends once (${faultRounds} rounds)`, async () => {
    const outcomes: string[] = [];
    for (let round = 0; round < faultRounds; round++) {
      const text = `timeout round ${round}`;
      const frozen = gate();
      const paused = gate();
      const model = freezingModel(createScriptedModel({ tokens, delayMs: 1 }), 3 + (round * 5) % tokens, frozen.wait(), paused.open);
      const rt = makeRuntime(timed, { model, settings: { mirrorIntervalMs: 5 } });
      const failed = gate();
      rt.log = (entry) => void (entry.msg === 'segment error' && failed.open());
      const turn = await startTurn(db, { ownerId: 'u', text });
      const segment = runSegment(rt, { runId: turn.runId, owner: `timed-${round}` });
      await paused.wait();
      const release = await holdRunRow(url, turn.runId);
      frozen.open();
      await Promise.race([failed.wait(), segment]);
      await release(); // the row free again, the segment gives its lease up
      const outcome = await segment;
      outcomes.push(outcome.kind === 'stopped' ? `stopped (${outcome.reason.slice(0, 50)})` : `${outcome.kind} ${'status' in outcome ? outcome.status : ''}`);
      // (It held the run until its lease expired, the whole budget: no reaper could hand it on.)
      const [run] = await db.query<{ status: string; given_up: boolean; attempts: number; failed: number }>(
        `select status, coalesce(lease_expires_at <= agent_kit_now(), true) as given_up, attempts,
           (select count(*)::int from agent_kit_thread_events where run_id = r.id and type = 'segment-failed') as failed
         from agent_kit_runs r where id = $1`, [turn.runId]);
      const [mirrored] = await db.query<{ text: string }>('select partial as text from agent_kit_runs where id = $1', [turn.runId]);
      if (outcome.kind === 'parked') {
        // Text the next segment goes on from was stored: queued as a slice is, no attempt spent (ADR-0115).
        expect(mirrored!.text).not.toBe('');
        expect(run).toEqual({ status: 'queued', given_up: true, attempts: 0, failed: 0 });
      } else {
        expect(outcome.kind).toBe('stopped');
        expect(run).toMatchObject({ status: 'running', given_up: true, attempts: 1, failed: 1 });
      }
      const healthy = makeRuntime(db, { tokens });
      expect((await finishRun(healthy, turn.runId)).status).toBe('completed');
      await expectEndedOnce(db, turn.runId, scriptedReplyText([text], tokens), tokens, effects.lines);
    }
    console.log(`statement timeouts: ${faultRounds} turns met a held row lock under a ${statementTimeoutMs} ms ` +
      `statement_timeout; the segment ${tally(outcomes)}; every run then completed exactly once`);
  }, 60_000 + faultRounds * 10_000);

  it('leaves a run claimable when its claim times out: the claim wrote nothing', async () => {
    const text = 'claim under a held lock';
    const turn = await startTurn(db, { ownerId: 'u', text });
    const release = await holdRunRow(url, turn.runId);
    const error = await runSegment(makeRuntime(timed, { tokens }), { runId: turn.runId, owner: 'blocked' }).then(
      () => undefined, (raw: unknown) => raw as Error & { code?: string; cause?: { code?: string } },
    );
    await release();
    expect(error).toBeDefined();
    expect(error!.code === '57014' || error!.cause?.code === '57014').toBe(true);
    const [run] = await db.query<{ status: string; fence: number }>('select status, fence from agent_kit_runs where id = $1', [turn.runId]);
    expect(run).toEqual({ status: 'queued', fence: 0 });
    expect((await finishRun(makeRuntime(db, { tokens }), turn.runId)).status).toBe('completed');
    await expectEndedOnce(db, turn.runId, scriptedReplyText([text], tokens), tokens, effects.lines);
  }, 30_000);

  // SQLSTATE 57014 (query_canceled) maps to StoreUnavailableError: transient, retried.
  it('surfaces a statement timeout as a typed, retryable StoreUnavailableError', async () => {
    const turn = await startTurn(db, { ownerId: 'u', text: 'typed timeout' });
    const release = await holdRunRow(url, turn.runId);
    const error = await runSegment(makeRuntime(timed, { tokens }), { runId: turn.runId, owner: 'typed' }).then(
      () => undefined, (raw: unknown) => raw,
    );
    await release();
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error & { cause?: { code?: string } }).cause?.code).toBe('57014');
  }, 30_000);
});
