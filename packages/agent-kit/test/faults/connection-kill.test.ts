// Connections killed mid-turn, on real Postgres: while a segment streams a turn (with a side
// effect), every backend of its database is terminated again and again. The segment ends as
// stopped or lost (or finishes, if the kills missed it); the reaper and drain then finish the run,
// and it ends exactly once: one final message, the unbroken reply, the effect run at most once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scriptedReplyText } from '../../src/model/index.js';
import { drainQueue } from '../../src/queue/index.js';
import { startTurn } from '../../src/queue/start-turn.js';
import type { Db } from '../../src/store/db.js';
import { runSegment } from '../../src/turn/index.js';
import type { SegmentOutcome } from '../../src/turn/types.js';
import { onPostgres, openTestDb } from '../harness/test-db.js';
import { effectsFile, makeRuntime } from '../harness/turn-kit.js';
import { databaseNameOf, expectEndedOnce, faultRounds, finishRun, killWhile, tally } from './pg-faults.js';

const tokens = 40;

describe.runIf(onPostgres)('connections killed mid-turn (real Postgres)', () => {
  let db: Db;
  let name: string;
  let effects: ReturnType<typeof effectsFile>;
  beforeAll(async () => {
    db = await openTestDb();
    name = await databaseNameOf(db);
    effects = effectsFile();
  });
  afterAll(async () => {
    effects.restore();
    await db?.close();
  });

  it(`ends every run exactly once although its connections are killed while it streams (${faultRounds} rounds)`, async () => {
    const outcomes: string[] = [];
    const endings: string[] = [];
    let killed = 0;
    for (let round = 0; round < faultRounds; round++) {
      const text = `kill round ${round} #effect`;
      const rt = makeRuntime(db, { tokens, delayMs: 2, settings: { mirrorIntervalMs: 5 } });
      const turn = await startTurn(db, { ownerId: 'u', text });
      const segment: Promise<SegmentOutcome | { kind: 'threw'; error: string }> = runSegment(rt, {
        runId: turn.runId, owner: `victim-${round}`,
      }).catch((error: Error) => ({ kind: 'threw', error: error.name }));
      // Let it claim and start streaming, then kill its connections until it gives up or ends.
      await new Promise((resolve) => setTimeout(resolve, (round * 7) % 90));
      killed += await killWhile(name, segment, 3, 2_000);
      const outcome = await segment;
      outcomes.push(outcome.kind === 'threw' ? `threw ${outcome.error}` : outcome.kind);
      const finished = await finishRun(rt, turn.runId);
      expect(finished.status).not.toBe('running');
      endings.push(await expectEndedOnce(db, turn.runId, scriptedReplyText([text], tokens), tokens, effects.lines));
      const lines = effects.lines().filter((line) => line.startsWith(turn.runId));
      expect(lines.length).toBeLessThanOrEqual(1);
    }
    console.log(`connection kills: ${killed} backends terminated during ${faultRounds} turns; the first segment ` +
      `${tally(outcomes)}; the runs ended ${tally(endings)}, each exactly once`);
    expect(killed).toBeGreaterThan(0);
    // The kills must have hit at least one segment, or this test proves nothing.
    expect(outcomes.some((o) => o !== 'closed')).toBe(true);
  }, 60_000 + faultRounds * 10_000);

  it('ends every run of a drain exactly once although its connections are killed mid-drain', async () => {
    const texts = Array.from({ length: 6 }, (_, i) => `drain kill ${i}${i % 2 ? ' #effect' : ''}`);
    const turns = [];
    for (const text of texts) turns.push({ text, ...(await startTurn(db, { ownerId: 'u', text })) });
    const rt = makeRuntime(db, { tokens, delayMs: 2, settings: { mirrorIntervalMs: 5 } });
    const drain = drainQueue(rt, { budgetMs: 20_000, concurrency: 3, owner: 'killed-drain', runSegment })
      .catch((error: Error) => ({ threw: error.name }));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const killed = await killWhile(name, drain, 4, 400);
    const report = await drain;
    const endings: string[] = [];
    for (const turn of turns) {
      expect((await finishRun(rt, turn.runId)).status).not.toBe('running');
      endings.push(await expectEndedOnce(db, turn.runId, scriptedReplyText([turn.text], tokens), tokens, effects.lines));
      expect(effects.lines().filter((line) => line.startsWith(turn.runId)).length).toBeLessThanOrEqual(1);
    }
    console.log(`connection kills mid-drain: ${killed} backends terminated; drain report ${JSON.stringify(report)}; ` +
      `runs ended ${tally(endings)}, each exactly once`);
    expect(killed).toBeGreaterThan(0);
  }, 120_000);
});
