// A Postgres restart mid-turn: while a segment streams, the server is restarted
// (pg_ctlcluster … restart). Every connection drops; the segment stops; the pool reconnects once the
// server is back, and the reaper and drain finish the run exactly once. It disrupts every other
// test using the server, so it runs only with AGENT_KIT_FAULTS_RESTART=1 (CI enables it alone).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScriptedModel, scriptedReplyText } from '../../src/model/index.js';
import { startTurn } from '../../src/queue/start-turn.js';
import type { Db } from '../../src/store/db.js';
import { runSegment } from '../../src/turn/index.js';
import type { SegmentOutcome } from '../../src/turn/types.js';
import { onPostgres, openTestDb } from '../harness/test-db.js';
import { effectsFile, freezingModel, gate, makeRuntime } from '../harness/turn-kit.js';
import { expectEndedOnce, finishRun, restartPostgres } from './pg-faults.js';

const enabled = onPostgres && process.env.AGENT_KIT_FAULTS_RESTART === '1';
const restarts = Number(process.env.AGENT_KIT_FAULT_RESTARTS ?? 1);
const tokens = 16;

describe.runIf(enabled)('a Postgres restart mid-turn (real Postgres, AGENT_KIT_FAULTS_RESTART=1)', () => {
  let db: Db;
  let effects: ReturnType<typeof effectsFile>;
  beforeAll(async () => {
    db = await openTestDb();
    effects = effectsFile();
  });
  afterAll(async () => {
    effects.restore();
    await db?.close();
  });

  it(`ends the run exactly once after the server restarts under it (${restarts} restart(s))`, async () => {
    const report: string[] = [];
    for (let round = 0; round < restarts; round++) {
      const text = `restart round ${round} #effect`;
      const frozen = gate();
      const paused = gate();
      const model = freezingModel(createScriptedModel({ tokens, delayMs: 1 }), 6 + round * 3, frozen.wait(), paused.open);
      const rt = makeRuntime(db, { model, settings: { mirrorIntervalMs: 5 } });
      const turn = await startTurn(db, { ownerId: 'u', text });
      const segment: Promise<SegmentOutcome | { kind: 'threw' }> = runSegment(rt, { runId: turn.runId, owner: `restart-${round}` })
        .catch(() => ({ kind: 'threw' }) as const);
      await paused.wait();
      // Let the segment write again while the server goes down: its statements meet the outage.
      const restarting = restartPostgres();
      await new Promise((resolve) => setTimeout(resolve, 300));
      frozen.open();
      const outcome = await segment;
      const downtimeMs = await restarting;
      // The pool recovers by itself: the same Db serves the rest of the turn.
      const finished = await finishRun(makeRuntime(db, { tokens }), turn.runId);
      expect(finished.status).toBe('completed');
      await expectEndedOnce(db, turn.runId, scriptedReplyText([text], tokens), tokens, effects.lines);
      expect(effects.lines().filter((line) => line.startsWith(turn.runId)).length).toBeLessThanOrEqual(1);
      report.push(`restart ${round + 1}: server back after ${downtimeMs} ms, the segment ${outcome.kind}, ` +
        `the run completed after ${finished.rounds} reap+drain round(s)`);
      expect(outcome.kind).not.toBe('closed'); // the outage must have hit it, or this proves nothing
    }
    console.log(`postgres restarts: ${report.join('; ')}`);
  }, 120_000 * restarts);
});
