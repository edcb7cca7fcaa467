// A chat message answering a tool approval approves only when it is a bare yes: the whole text
// (trimmed, any case, a trailing "." or "!") is y, yes, ok, approve or approved. A reply that
// merely starts with one of them ("ok, hold on — do NOT send it") denies. Runs #approve turns of
// the scripted model on both stores and counts the transfers in the demo effects file.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { effectsFile, makeRuntime } from '../../test/harness/turn-kit.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { runSegment } from './run-segment.js';
import { isApproval } from './tool-calls.js';

let db: Db;
let effects: ReturnType<typeof effectsFile>;
beforeAll(async () => {
  db = await openTestDb();
  effects = effectsFile();
});
afterAll(async () => {
  effects.restore();
  await db.close();
});

const denials = ['ok, hold on — do NOT send it', "Y'know what, cancel that", 'yes? what is this transfer for?', 'no', 'yes please wait'];
const approvals = ['yes', ' Y ', 'OK', 'ok.', 'Approve!', 'approved'];

describe('reading an approval from text', () => {
  it('approves a bare yes in any case, with a trailing . or !', () => {
    for (const text of approvals) expect(isApproval(text), text).toBe(true);
  });

  it('denies a reply that only starts with a yes word', () => {
    for (const text of denials) expect(isApproval(text), text).toBe(false);
  });
});

describe('approval by chat message', () => {
  async function answerApproval(reply: string) {
    const rt = makeRuntime(db);
    const turn = await startTurn(db, { ownerId: 'u', text: 'pay my rent #approve' });
    expect(await runSegment(rt, { runId: turn.runId, owner: `w1-${reply}` })).toMatchObject({ kind: 'parked', status: 'waiting_input' });
    const before = effects.lines().length;
    const answered = await startTurn(db, { threadId: turn.threadId, ownerId: 'u', text: reply });
    expect(answered.kind).toBe('input');
    expect(await runSegment(rt, { runId: turn.runId, owner: `w2-${reply}` })).toMatchObject({ kind: 'closed', status: 'completed' });
    const [step] = await db.query<{ outcome: string }>(
      `select data->>'outcome' as outcome from agent_kit_steps where run_id = $1 and kind = 'tool'`, [turn.runId]);
    return { outcome: step!.outcome, transfers: effects.lines().length - before };
  }

  for (const reply of denials.slice(0, 3)) {
    it(`denies the transfer for "${reply}"`, async () => {
      expect(await answerApproval(reply)).toEqual({ outcome: 'denied', transfers: 0 });
    });
  }

  it('runs the transfer once for "Yes."', async () => {
    expect(await answerApproval('Yes.')).toEqual({ outcome: 'completed', transfers: 1 });
  });
});
