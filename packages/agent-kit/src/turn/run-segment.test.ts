// The turn engine on both stores: a scripted turn cut anywhere — mid-stream or mid-tool, by a
// frozen segment whose lease expires and is taken over — ends with the same final message as an
// unbroken turn, runs each side effect once, and the frozen segment writes nothing after the cut;
// a turn whose model thinks first, too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { effectsFile, finalMessage, freezingModel, gate, makeRuntime } from '../../test/harness/turn-kit.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { createScriptedModel, demoTools, scriptedReplyText, type AgentTool } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import { advanceFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { runSegment } from './run-segment.js';
import type { SegmentOutcome } from './types.js';

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

const tokens = 10;

async function unbroken(text: string) {
  const rt = makeRuntime(db, { tokens });
  const turn = await startTurn(db, { ownerId: 'u', text });
  const outcome = await runSegment(rt, { runId: turn.runId, owner: 'whole' });
  expect(outcome.kind).toBe('closed');
  return (await finalMessage(db, turn.runId))[0]!.text;
}

/** Events written under `fence` after the next segment began: must be none. */
async function eventsAfterTakeover(threadId: string, runId: string, fence: number) {
  const rows = await db.query<{ n: number }>(
    `select count(*)::int as n from agent_kit_thread_events e
     where e.thread_id = $1 and e.run_id = $2 and e.fence = $3 and e.seq > (
       select min(seq) from agent_kit_thread_events where run_id = $2 and type = 'segment-started' and fence > $3)`,
    [threadId, runId, fence],
  );
  return rows[0]!.n;
}

/**
 * Freeze segment A after `pauseAfter` model stream parts (or inside a tool), expire its lease,
 * let B take over and finish, then thaw A. Returns both outcomes and the final text.
 */
async function cutAndResume(text: string, cut: { parts?: number; inTool?: 'before' | 'after' }, prefill = true) {
  const frozen = gate();
  const paused = gate();
  const settings = { continueMidStep: prefill };
  const scripted = createScriptedModel({ tokens });
  const model = cut.parts === undefined ? scripted : freezingModel(scripted, cut.parts, frozen.wait(), paused.open);
  const tools: Record<string, AgentTool<any, any>> = { ...demoTools };
  if (cut.inTool) {
    const inner = demoTools.record_effect!;
    tools.record_effect = {
      ...inner,
      async execute(input, ctx) {
        if (cut.inTool === 'before') {
          paused.open();
          await frozen.wait();
        }
        const result = await inner.execute!(input, ctx);
        if (cut.inTool === 'after') {
          paused.open();
          await frozen.wait();
        }
        return result;
      },
    };
  }
  const turn = await startTurn(db, { ownerId: 'u', text });
  const segmentA = runSegment(makeRuntime(db, { model, tools, settings }), { runId: turn.runId, owner: 'A' });
  const first = await Promise.race([segmentA.then((o) => ({ done: o })), paused.wait().then(() => ({ done: null }))]);
  let outcomeA: SegmentOutcome;
  let outcomeB: SegmentOutcome | undefined;
  if (first.done) {
    outcomeA = first.done; // finished before reaching the cut point
  } else {
    await new Promise((r) => setTimeout(r, 10)); // let A's mirror flush what it streamed
    await advanceFakeNow(db, 61_000);
    outcomeB = await runSegment(makeRuntime(db, { tokens, settings }), { runId: turn.runId, owner: 'B' });
    frozen.open();
    outcomeA = await segmentA;
  }
  const messages = await finalMessage(db, turn.runId);
  return { turn, outcomeA, outcomeB, messages };
}

describe('a turn cut anywhere finishes as if unbroken', () => {
  it('gives the unbroken reply for a plain turn, cut at every stream part, continuing mid-step', async () => {
    const expected = await unbroken('tell me a story');
    expect(expected).toBe(scriptedReplyText(['tell me a story'], tokens));
    let takeovers = 0;
    let continued = 0;
    for (let parts = 0; parts <= tokens + 4; parts++) {
      const { turn, outcomeA, outcomeB, messages } = await cutAndResume('tell me a story', { parts });
      expect(messages).toEqual([{ text: expected, partial: false }]);
      if (outcomeB) {
        takeovers++;
        const [started] = await db.query<{ text: string }>(
          `select data->>'text' as text from agent_kit_thread_events where run_id = $1 and type = 'segment-started' and fence = 2`,
          [turn.runId],
        );
        // B starts from A's mirrored text: a prefix of the final reply, never anything else.
        expect(expected.startsWith(started!.text)).toBe(true);
        if (started!.text.length > 0) continued++;
        expect(outcomeB).toMatchObject({ kind: 'closed', status: 'completed' });
        expect(outcomeA).toEqual({ kind: 'lost', fence: 1 });
        expect(await eventsAfterTakeover(turn.threadId, turn.runId, 1)).toBe(0);
      }
    }
    expect(takeovers).toBeGreaterThanOrEqual(tokens);
    expect(continued).toBeGreaterThan(tokens / 2);
  });

  it('gives the unbroken reply when the cut step is redone instead of continued', async () => {
    const expected = await unbroken('another story');
    for (const parts of [1, 3, 6, 9]) {
      const { messages, outcomeB } = await cutAndResume('another story', { parts }, false);
      expect(outcomeB?.kind).toBe('closed');
      expect(messages).toEqual([{ text: expected, partial: false }]);
    }
  });

  it('runs record_effect once per key when cut anywhere in a tool-calling turn', async () => {
    const text = 'please #effect now';
    const expected = await unbroken(text);
    for (let parts = 0; parts <= tokens + 8; parts++) {
      const before = effects.lines().length;
      const { turn, messages, outcomeA } = await cutAndResume(text, { parts });
      expect(messages).toEqual([{ text: expected, partial: false }]);
      const lines = effects.lines().slice(before);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^${turn.runId}:`));
      expect(outcomeA.kind === 'lost' || outcomeA.kind === 'closed').toBe(true);
    }
  });

  it('a turn that thinks before each step, cut at every stream part, gives the unbroken reply and runs its effect once', async () => {
    const text = 'think then #effect #think';
    const expected = await unbroken(text);
    let takeovers = 0;
    const resumed = { thinking: 0, goingOn: 0 };
    for (let parts = 0; parts <= 3 * tokens + 16; parts++) { // past the last part: both steps think
      const before = effects.lines().length;
      const { turn, messages, outcomeB } = await cutAndResume(text, { parts });
      expect(messages).toEqual([{ text: expected, partial: false }]); // what the model thought is never in it
      expect(effects.lines().slice(before)).toHaveLength(1);
      if (!outcomeB) continue;
      takeovers++;
      expect(await eventsAfterTakeover(turn.threadId, turn.runId, 1)).toBe(0);
      // B thought again, under its own fence, when it started A's step anew; going on from the
      // step's streamed text (a prefill), it did not (ADR-0070).
      const [b] = await db.query<{ continued: boolean; thought: boolean }>(
        `select (data->>'continued')::boolean as continued, exists (select 1 from agent_kit_thread_events
           where run_id = $1 and type = 'reasoning-delta' and fence = 2) as thought
         from agent_kit_thread_events where run_id = $1 and type = 'segment-started' and fence = 2`, [turn.runId]);
      expect(b!.thought).toBe(!b!.continued);
      resumed[b!.continued ? 'goingOn' : 'thinking']++;
    }
    expect(takeovers).toBeGreaterThanOrEqual(tokens);
    expect(resumed.thinking).toBeGreaterThan(tokens / 2); // cut while it thought, or between steps
    expect(resumed.goingOn).toBeGreaterThan(tokens / 2); // cut in the reply's text
  });

  it('never repeats an effect cut mid-tool: reconciled when it happened, in doubt when not', async () => {
    const text = 'mid tool #effect';
    const expected = await unbroken(text);
    const after = await cutAndResume(text, { inTool: 'after' });
    expect(after.messages).toEqual([{ text: expected, partial: false }]);
    const [done] = await db.query<{ status: string }>('select status from agent_kit_effects where run_id = $1', [after.turn.runId]);
    expect(done!.status).toBe('completed'); // the reconcile hook found the key in the effects file
    expect(effects.lines().filter((l) => l.startsWith(after.turn.runId))).toHaveLength(1);

    const before = await cutAndResume(text, { inTool: 'before' });
    const [doubt] = await db.query<{ status: string }>('select status from agent_kit_effects where run_id = $1', [before.turn.runId]);
    expect(doubt!.status).toBe('in_doubt');
    // The frozen segment then ran the tool once; the new segment never did: one line, not two.
    expect(effects.lines().filter((l) => l.startsWith(before.turn.runId))).toHaveLength(1);
    expect(before.messages).toHaveLength(1);
    const steps = await db.query<{ data: { outcome?: string } }>(
      `select data from agent_kit_steps where run_id = $1 and kind = 'tool'`, [before.turn.runId],
    );
    expect(steps.map((s) => s.data.outcome)).toEqual(['in_doubt']);
  });
});
