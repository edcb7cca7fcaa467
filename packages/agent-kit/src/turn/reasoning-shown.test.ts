// What the model thinks is shown as it thinks it (ADR-0070), on both stores: a turn's reasoning
// (the scripted model's, an OpenAI-compatible server's reasoning_content) reaches the thread's
// log as reasoning-delta events, each step's ahead of its text and tool calls, and never the
// reply, the run's partial or the message; turned off, only the journal keeps it; a cancel asked
// while the model thinks ends the run before its first word. And the mirror writes a batch's
// reasoning ahead of the text that followed it, in one statement.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiStub, stubReasoning } from '../../test/harness/openai-stub.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { readEvents, type ThreadEvent } from '../event-log/read-events.js';
import type { Lease } from '../lease/lease.js';
import { resolveModel, scriptedReasoningText, scriptedReplyText } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db, Queryable } from '../store/db.js';
import { loadJournal } from './journal.js';
import { runSegment } from './run-segment.js';
import { StreamMirror } from './stream-mirror.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

const tokens = 12;

async function runEvents(threadId: string, runId: string): Promise<ThreadEvent[]> {
  return (await readEvents(db, { threadId, limit: 1_000 })).filter((e) => e.runId === runId);
}

const textsOf = (events: ThreadEvent[], type: string) => events.filter((e) => e.type === type).map((e) => String(e.data.text)).join('');

describe('a turn whose model thinks', () => {
  it("shows each step's reasoning ahead of what the step does, and keeps it out of the reply", async () => {
    const text = 'plan it #think #effect';
    const turn = await startTurn(db, { ownerId: 'u', text });
    const outcome = await runSegment(makeRuntime(db, { tokens }), { runId: turn.runId, owner: 'A' });
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    const events = await runEvents(turn.threadId, turn.runId);
    const steps = events.filter((e) => e.type === 'step-finished');
    expect(steps).toHaveLength(2);
    const [first, second] = [events.filter((e) => e.seq < steps[0]!.seq), events.filter((e) => e.seq > steps[0]!.seq)];
    expect(textsOf(first, 'reasoning-delta')).toBe(scriptedReasoningText([text], 0, tokens));
    expect(textsOf(second, 'reasoning-delta')).toBe(scriptedReasoningText([text], 1, tokens));
    const lastThought = Math.max(...second.filter((e) => e.type === 'reasoning-delta').map((e) => e.seq));
    const firstWord = Math.min(...second.filter((e) => e.type === 'text-delta').map((e) => e.seq));
    expect(lastThought).toBeLessThan(firstWord);

    const reply = scriptedReplyText([text], tokens);
    expect(textsOf(events, 'text-delta')).toBe(reply);
    expect(events.at(-1)).toMatchObject({ type: 'run-closed', data: { text: reply } });
    const [row] = await db.query<{ partial: string; message: string }>(
      `select r.partial, m.content->>'text' as message from agent_kit_runs r join agent_kit_messages m on m.id = r.message_id
       where r.id = $1`, [turn.runId]);
    expect(row).toEqual({ partial: reply, message: reply });
    // The journal keeps it to send back (ADR-0064), as before.
    const journal = await loadJournal(db, turn.runId);
    expect(journal.flatMap((s) => (s.kind === 'model' ? [s.reasoning?.map((r) => r.text)] : []))).toEqual([
      [scriptedReasoningText([text], 0, tokens)], [scriptedReasoningText([text], 1, tokens)],
    ]);
  });

  it("shows an OpenAI-compatible server's reasoning_content, and the reply without it", async () => {
    const stub = await startOpenAiStub();
    try {
      const model = resolveModel('openai-compatible:stub-model', { OPENAI_BASE_URL: stub.baseURL, OPENAI_API_KEY: 'k' });
      const turn = await startTurn(db, { ownerId: 'u', text: 'think it through' });
      expect(await runSegment(makeRuntime(db, { model }), { runId: turn.runId, owner: 'A' })).toMatchObject({ status: 'completed' });
      const events = await runEvents(turn.threadId, turn.runId);
      expect(textsOf(events, 'reasoning-delta')).toBe(stubReasoning);
      expect(events.at(-1)).toMatchObject({ type: 'run-closed', data: { text: 'Hello from stub' } });
    } finally {
      await stub.close();
    }
  });

  it('shows none of it with showReasoning off; the journal still keeps it', async () => {
    const text = 'quietly #think';
    const turn = await startTurn(db, { ownerId: 'u', text });
    await runSegment(makeRuntime(db, { tokens, settings: { showReasoning: false } }), { runId: turn.runId, owner: 'A' });
    const events = await runEvents(turn.threadId, turn.runId);
    expect(events.filter((e) => e.type === 'reasoning-delta')).toEqual([]);
    expect(textsOf(events, 'text-delta')).toBe(scriptedReplyText([text], tokens));
    const [step] = await loadJournal(db, turn.runId);
    expect(step).toMatchObject({ kind: 'model', reasoning: [{ text: scriptedReasoningText([text], 0, tokens) }] });
  });

  it('ends the run before its first word when it is cancelled while the model thinks', async () => {
    const text = 'think long #think';
    const long = 400; // 200 words of thinking, 10 ms each: two seconds
    const turn = await startTurn(db, { ownerId: 'u', text });
    const segment = runSegment(makeRuntime(db, { tokens: long, delayMs: 10 }), { runId: turn.runId, owner: 'A' });
    for (let i = 0; i < 500; i++) {
      if ((await runEvents(turn.threadId, turn.runId)).some((e) => e.type === 'reasoning-delta')) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    await db.query('select agent_kit_request_cancel($1)', [turn.runId]);
    expect(await segment).toMatchObject({ kind: 'closed', status: 'aborted' });
    const events = await runEvents(turn.threadId, turn.runId);
    expect(events.filter((e) => e.type === 'text-delta')).toEqual([]);
    const thought = textsOf(events, 'reasoning-delta');
    expect(thought.length).toBeGreaterThan(0);
    expect(thought.length).toBeLessThan(scriptedReasoningText([text], 0, long).length); // it stopped thinking
    expect(events.at(-1)).toMatchObject({ type: 'run-closed', data: { status: 'aborted', text: '' } });
  });
});

describe('the stream mirror', () => {
  const lease: Lease = {
    runId: 'r', threadId: 't', owner: 'o', fence: 1, attempts: 1, expiresAt: new Date(8.64e15), deadlineAt: new Date(8.64e15),
  };

  /** A store that answers every mirror write (or rejects them all), recording each. */
  function recording(accept = true) {
    const writes: [fn: string, ...texts: unknown[]][] = [];
    const store: Queryable = {
      async query<T>(sql: string, params: readonly unknown[] = []) {
        const fn = /agent_kit_mirror_\w+/.exec(sql)?.[0];
        if (fn) writes.push([fn, ...params.slice(3)]);
        return (fn && accept ? [{ seq: writes.length, interrupt: null }] : []) as T[];
      },
    };
    return { store, writes };
  }

  it("writes a batch's reasoning ahead of the text after it, and reasoning after text in the next write", async () => {
    const { store, writes } = recording();
    const mirror = new StreamMirror(store, lease, 60_000, () => {});
    mirror.push('a ');
    mirror.pushReasoning('think ');
    mirror.pushReasoning('hard ');
    mirror.push('b ');
    mirror.pushReasoning('again');
    mirror.push('c');
    expect(await mirror.flush()).toBeUndefined();
    expect(writes).toEqual([
      ['agent_kit_mirror_partial', 'a '],
      ['agent_kit_mirror_reasoning', 'think hard ', 'b '],
      ['agent_kit_mirror_reasoning', 'again', 'c'],
    ]);
    expect(mirror.writtenText).toBe('a b c');
  });

  it('hands a step its last text to commit, after writing the reasoning the step record cannot hold', async () => {
    const { store, writes } = recording();
    const mirror = new StreamMirror(store, lease, 60_000, () => {});
    mirror.push('only text');
    expect(await mirror.takeForCommit()).toEqual({ delta: 'only text' });
    expect(writes).toEqual([]);
    mirror.written('only text');

    mirror.push(' more');
    mirror.pushReasoning('then a thought before a tool call');
    expect(await mirror.takeForCommit()).toEqual({ delta: '' });
    expect(writes).toEqual([['agent_kit_mirror_partial', ' more'], ['agent_kit_mirror_reasoning', 'then a thought before a tool call', '']]);
    expect(mirror.writtenText).toBe('only text more');
    mirror.dispose();
  });

  it('stops at a rejected write of reasoning, and drops what it held', async () => {
    const { store, writes } = recording(false);
    const stops: string[] = [];
    const mirror = new StreamMirror(store, lease, 60_000, (reason) => stops.push(reason));
    mirror.pushReasoning('thinking');
    mirror.push('never written');
    expect(await mirror.takeForCommit()).toEqual({ stopped: 'lost' });
    expect(stops).toEqual(['lost']);
    expect(writes).toEqual([['agent_kit_mirror_reasoning', 'thinking', 'never written']]);
    mirror.pushReasoning('ignored');
    expect(await mirror.flush()).toBe('lost');
    expect(writes).toHaveLength(1);
  });
});
