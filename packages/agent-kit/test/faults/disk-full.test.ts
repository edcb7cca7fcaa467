// A full disk, on real Postgres, simulated by triggers that fail every write of a turn with
// SQLSTATE 53100 (disk_full) while a flag is set. The disk fills at a different point of the turn
// each round (mid-stream, at a step, at a tool, at the close): the segment stops, nothing is
// half-written (the partial output agrees with the event log, every invariant holds while the
// disk is still full), and once space is back the run ends exactly once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScriptedModel, scriptedReplyText } from '../../src/model/index.js';
import { startTurn } from '../../src/queue/start-turn.js';
import type { Db } from '../../src/store/db.js';
import { runSegment } from '../../src/turn/index.js';
import { onPostgres, openTestDb } from '../harness/test-db.js';
import { effectsFile, freezingModel, gate, makeRuntime } from '../harness/turn-kit.js';
import { expectEndedOnce, expectInvariants, faultRounds, finishRun, installDiskFull, setDiskFull, tally } from './pg-faults.js';

const tokens = 12;

describe.runIf(onPostgres)('a full disk mid-turn (real Postgres)', () => {
  let db: Db;
  let effects: ReturnType<typeof effectsFile>;
  beforeAll(async () => {
    db = await openTestDb();
    await installDiskFull(db);
    effects = effectsFile();
  });
  afterAll(async () => {
    effects.restore();
    await db?.close();
  });

  it(`stops the turn without a half-written write and ends it once when space is back (${Math.max(faultRounds, 6)} cut points)`, async () => {
    const outcomes: string[] = [];
    const cuts = Math.max(faultRounds, 6);
    for (let round = 0; round < cuts; round++) {
      // A tool-calling turn has two model steps: cut across both of them and the tool between.
      const text = `disk round ${round} #effect`;
      const frozen = gate();
      const paused = gate();
      const cutAfterParts = (round * 7) % (tokens + 10);
      const model = freezingModel(createScriptedModel({ tokens, delayMs: 1 }), cutAfterParts, frozen.wait(), paused.open);
      // (No hand-back while the disk is full: statement-timeout.test.ts shows a run handed back.)
      const rt = makeRuntime(db, { model, settings: { mirrorIntervalMs: 5, storeErrorHandBackMs: 0 } });
      const turn = await startTurn(db, { ownerId: 'u', text });
      const segment = runSegment(rt, { runId: turn.runId, owner: `disk-${round}` });
      const first = await Promise.race([segment.then(() => 'ended' as const), paused.wait().then(() => 'paused' as const)]);
      if (first === 'paused') await setDiskFull(db, true);
      frozen.open();
      const outcome = await segment;
      outcomes.push(outcome.kind === 'stopped' ? `stopped (${outcome.reason.slice(0, 45)})` : outcome.kind);
      // While the disk is still full: every write either happened whole or not at all.
      await expectInvariants(db, tokens, effects.lines);
      await setDiskFull(db, false);
      expect((await finishRun(makeRuntime(db, { tokens }), turn.runId)).status).toBe('completed');
      await expectEndedOnce(db, turn.runId, scriptedReplyText([text], tokens), tokens, effects.lines);
      expect(effects.lines().filter((line) => line.startsWith(turn.runId)).length).toBeLessThanOrEqual(1);
    }
    console.log(`disk full: ${cuts} turns, the disk filling at a different point of each; the segment ` +
      `${tally(outcomes)}; no half-written state while full; every run then completed exactly once`);
    expect(outcomes.filter((o) => o.includes('stopped')).length).toBeGreaterThan(cuts / 2);
  }, 60_000 + faultRounds * 10_000);
});
