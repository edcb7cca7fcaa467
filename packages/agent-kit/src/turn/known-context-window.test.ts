// A thread remembers its model's context window (ADR-0069): after one refusal of a prompt for
// its length, the thread's later turns on the same model are cut before they are sent, with a
// `prompt-cut` event, and are not refused again; another model, or the setting off, sends the
// whole history. The memory is read by every way a segment starts (a fresh claim, a batch claim, a
// resumed segment) and written only under the lease.
import { APICallError } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answering } from '../../test/harness/mock-streams.js';
import { startOpenAiStub } from '../../test/harness/openai-stub.js';
import { threadOfTurns } from '../../test/harness/long-thread.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { claimRun } from '../lease/lease.js';
import { resolveModel, type LanguageModelV3 } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { noteContextWindow } from './prompt-fit.js';
import { runSegment } from './run-segment.js';
import { newOwner } from './runtime.js';
import { beginSegmentWithHistory, claimDueSegments, claimSegment } from './segment-claim.js';
import type { TurnSettings } from './settings.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

const threadOf = (turns: number) => threadOfTurns(db, turns, 'dana');

/** The next turn of `threadId` on `model`: its outcome and its events by type. */
async function nextTurn(threadId: string, model: LanguageModelV3, text: string, settings: Partial<TurnSettings> = {}) {
  const { runId } = await startTurn(db, { threadId, ownerId: 'dana', text });
  const outcome = await runSegment(makeRuntime(db, { model, settings }), { runId, owner: newOwner('known') });
  const events = await db.query<{ type: string; data: Record<string, any> }>(
    'select type, data from agent_kit_thread_events where run_id = $1 order by seq', [runId]);
  const of = (type: string) => events.filter((e) => e.type === type).map((e) => e.data);
  return { outcome, retries: of('model-retry'), cuts: of('prompt-cut') };
}

const windowOfThread = async (threadId: string) =>
  (await db.query<{ context_window: unknown }>('select context_window from agent_kit_threads where id = $1', [threadId]))[0]!.context_window;

const userMessages = (messages: { role: string }[]) => messages.filter((m) => m.role === 'user').length;

describe('a thread that learned its model\'s context window', () => {
  it('sends its later turns cut to fit, without a refusal; the window is the refused prompt\'s at its counts', async () => {
    const threadId = await threadOf(12);
    const stub = await startOpenAiStub({ contextChars: 2_000 });
    try {
      const model = resolveModel('openai-compatible:stub-model', { OPENAI_BASE_URL: stub.baseURL, OPENAI_API_KEY: 'k' });
      const first = await nextTurn(threadId, model, 'and now?');
      expect(first.outcome).toMatchObject({ kind: 'closed', status: 'completed' });
      expect(first.retries).toHaveLength(1); // learned here, by one refusal
      expect(first.cuts).toEqual([]);
      expect(stub.received).toHaveLength(2);
      const window = (await windowOfThread(threadId)) as { model: string; chars: number; learnedAt: string };
      expect(window.model).toBe('openai-compatible.chat:stub-model');
      // The stub's 500-token limit at the refused prompt's characters per token, in the engine's count.
      expect(window.chars).toBeGreaterThan(1_000);
      expect(window.chars).toBeLessThan(3_000);

      for (const text of ['and then?', 'and at last?']) {
        const before = stub.received.length;
        const turn = await nextTurn(threadId, model, text);
        expect(turn.outcome).toMatchObject({ kind: 'closed', status: 'completed' });
        // One request, which fit: no refusal, a prompt-cut event saying what it left out.
        expect(stub.received).toHaveLength(before + 1);
        expect(turn.retries).toEqual([]);
        const sent = stub.received.at(-1)!.body.messages;
        expect(JSON.stringify(sent).length).toBeLessThanOrEqual(2_000);
        expect(turn.cuts).toEqual([{ stepNo: 0, window: { chars: window.chars }, earlierTurns: { kept: userMessages(sent) - 1, of: expect.any(Number) } }]);
        expect(turn.cuts[0]!.earlierTurns.of).toBeGreaterThan(12);
        expect(turn.cuts[0]!.earlierTurns.kept).toBeGreaterThan(0);
      }

      // A day on the window is no longer trusted: the whole prompt is sent, refused, and the
      // window learned again (a limit raised under the same model id would have been found).
      const dayOld = new Date(Date.now() - 25 * 60 * 60 * 1000).toISOString();
      await db.query('update agent_kit_threads set context_window = $2::jsonb where id = $1',
        [threadId, JSON.stringify({ ...window, learnedAt: dayOld })]);
      const before = stub.received.length;
      const stale = await nextTurn(threadId, model, 'and a day later?');
      expect(stale.outcome).toMatchObject({ kind: 'closed', status: 'completed' });
      expect([stub.received.length - before, stale.retries.length, stale.cuts.length]).toEqual([2, 1, 0]);
      const relearned = (await windowOfThread(threadId)) as { learnedAt: string };
      expect(Date.parse(relearned.learnedAt)).toBeGreaterThan(Date.now() - 60_000);
    } finally {
      await stub.close();
    }
  });

  it('another model, or the setting off, gets the whole history; a refusal without counts teaches the size refused', async () => {
    const threadId = await threadOf(6);
    const prompts: string[] = [];
    const refusing = new MockLanguageModelV3({
      modelId: 'small-window',
      doStream: async ({ prompt }) => {
        const text = JSON.stringify(prompt);
        prompts.push(text);
        if ((text.match(/question \d+:/g) ?? []).length > 3) {
          throw new APICallError({ message: 'Input is too long for requested model.', url: 'http://p.test', requestBodyValues: {}, statusCode: 400 });
        }
        return answering(['Fine.']);
      },
    });
    const learned = await nextTurn(threadId, refusing, 'seventh?');
    expect(learned.retries.map((r) => r.earlierTurns)).toEqual([{ kept: 3, of: 6 }]);
    const window = (await windowOfThread(threadId)) as { model: string; chars: number };
    // Without counts, the size of the prompt asked next, which fit: the 3 newest earlier turns.
    expect(window.model).toBe('mock-provider:small-window');
    expect(window.chars).toBeGreaterThan(3 * 400);
    expect(window.chars).toBeLessThan(5 * 400);

    const seen: string[] = [];
    const other = new MockLanguageModelV3({
      modelId: 'large-window',
      doStream: async ({ prompt }) => {
        seen.push(JSON.stringify(prompt));
        return answering(['All of it.']);
      },
    });
    const otherTurn = await nextTurn(threadId, other, 'eighth?');
    expect(otherTurn.cuts).toEqual([]);
    expect(seen.at(-1)).toContain('question 1:');

    const off = await nextTurn(threadId, refusing, 'ninth?', { fitContextWindow: false });
    expect(off.cuts).toEqual([]);
    expect(off.outcome).toMatchObject({ kind: 'closed', status: 'failed' }); // refused, as before ADR-0067
    expect(await windowOfThread(threadId)).toEqual(window); // and nothing learned

    const again = await nextTurn(threadId, refusing, 'tenth?');
    expect(again.outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(again.retries).toEqual([]);
    expect(again.cuts).toHaveLength(1);
    expect((prompts.at(-1)!.match(/question \d+:/g) ?? []).length).toBeLessThanOrEqual(3);
  });
});

describe('the remembered window as a segment starts', () => {
  it('comes with the history from a claim, a batch claim and a resumed segment\'s begin', async () => {
    const threadId = await threadOf(1);
    const window = { model: 'p:m', chars: 12_345 };
    const { runId } = await startTurn(db, { threadId, ownerId: 'dana', text: 'next' });
    const held = await claimRun(db, { runId, owner: 'o1', leaseTtlMs: 60_000 });
    if (!held.claimed) throw new Error('not claimed');
    expect(await noteContextWindow(db, held.lease, window)).toBe(true);
    const begun = await beginSegmentWithHistory(db, held.lease, '', { stepNo: 0 }, held.run.turnNo);
    expect(begun).toMatchObject({ contextWindow: window, history: [{ role: 'user' }, { role: 'assistant' }, { role: 'user', content: 'next' }] });

    const other = await startTurn(db, { ownerId: 'dana', text: 'elsewhere' });
    const claimed = await claimSegment(db, { runId: other.runId, owner: 'o2', leaseTtlMs: 60_000, budgetMs: 60_000 });
    expect(claimed.claimed && claimed.begun?.contextWindow).toBeNull(); // a thread that learned nothing

    await db.query('update agent_kit_threads set context_window = $2::jsonb where id = $1', [other.threadId, JSON.stringify(window)]);
    const third = await startTurn(db, { ownerId: 'dana', text: 'queued' });
    await db.query('update agent_kit_threads set context_window = $2::jsonb where id = $1', [third.threadId, JSON.stringify(window)]);
    const batch = await claimDueSegments(db, { owners: ['o3', 'o4'], leaseTtlMs: 60_000, budgetMs: 60_000, maxRunAttempts: 5 });
    const ours = batch.find((c) => c.run.id === third.runId);
    expect(ours?.begun?.contextWindow).toEqual(window);
  });

  it('is written only under the lease, and only in its shape', async () => {
    const threadId = await threadOf(1);
    const { runId } = await startTurn(db, { threadId, ownerId: 'dana', text: 'next' });
    const held = await claimRun(db, { runId, owner: 'o1', leaseTtlMs: 60_000 });
    if (!held.claimed) throw new Error('not claimed');
    expect(await noteContextWindow(db, { ...held.lease, fence: held.lease.fence + 1 }, { model: 'p:m', chars: 10 })).toBe(false);
    expect(await noteContextWindow(db, { ...held.lease, owner: 'zombie' }, { model: 'p:m', chars: 10 })).toBe(false);
    expect(await windowOfThread(threadId)).toBeNull();
    await expect(db.query(`select agent_kit_note_context_window($1, $2, $3, '{"model": "p:m"}'::jsonb)`,
      [runId, held.lease.owner, held.lease.fence])).rejects.toThrow(/a context window is/);
  });
});
