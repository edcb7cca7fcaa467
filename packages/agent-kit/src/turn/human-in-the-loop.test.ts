// Voluntary hand-offs on both stores: questions and approvals park the run (lease released,
// crash budget reset) and an answer resumes it exactly once; cancel is a stored intent that the
// segment carries out; an operator takeover parks the run and release resumes it. A chat reply
// approves a tool call only when it is a bare yes ("ok, hold on — do NOT send it" denies).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stepsModel } from '../../test/harness/steps-model.js';
import { effectsFile, finalMessage, makeRuntime } from '../../test/harness/turn-kit.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { ConflictError } from '../errors.js';
import { scriptedAskQuestion, scriptedReplyText } from '../model/index.js';
import { beginSegment, claimRun, mirrorPartial, parkForRetry } from '../lease/lease.js';
import { startTurn } from '../queue/start-turn.js';
import { reapExpiredRuns } from '../reaper/reap-expired-runs.js';
import { advanceFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { textShownAtCancel } from './reply-content.js';
import { runSegment } from './run-segment.js';
import { isApproval } from '../approval.js';

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

const tokens = 8;
const rt = () => makeRuntime(db, { tokens });

async function runRow(runId: string) {
  const [row] = await db.query<{ status: string; attempts: number; owner: string | null; waiting_for: Record<string, unknown> | null; fence: number }>(
    'select status, attempts, owner, waiting_for, fence from agent_kit_runs where id = $1',
    [runId],
  );
  return row!;
}

const submit = (runId: string, questionId: string, data: Record<string, unknown>) =>
  db.query<{ status: string }>('select agent_kit_submit_input($1, $2, $3::jsonb) as status', [runId, questionId, JSON.stringify(data)]);

describe('questions', () => {
  it('parks on #ask, resumes on the answer, and replies as if uninterrupted', async () => {
    const turn = await startTurn(db, { ownerId: 'u', text: 'help me #ask' });
    expect(await runSegment(rt(), { runId: turn.runId, owner: 'w1' })).toMatchObject({ kind: 'parked', status: 'waiting_input' });
    const parked = await runRow(turn.runId);
    expect(parked).toMatchObject({ status: 'waiting_input', attempts: 0, owner: null });
    expect(parked.waiting_for).toMatchObject({ kind: 'question', question: scriptedAskQuestion });
    const [requested] = await db.query<{ data: { id: string } }>(
      `select data from agent_kit_thread_events where run_id = $1 and type = 'input-requested'`,
      [turn.runId],
    );
    expect(requested!.data.id).toBe(parked.waiting_for!.id);

    expect(await submit(turn.runId, String(parked.waiting_for!.id), { answer: 'blue' })).toEqual([{ status: 'queued' }]);
    await expect(submit(turn.runId, String(parked.waiting_for!.id), { answer: 'red' })).rejects.toBeInstanceOf(ConflictError);
    expect(await runSegment(rt(), { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(await finalMessage(db, turn.runId)).toEqual([{ text: scriptedReplyText(['help me #ask'], tokens), partial: false }]);
    const [answer] = await db.query<{ data: { output: { answer: string } } }>(
      `select data from agent_kit_steps where run_id = $1 and kind = 'tool'`,
      [turn.runId],
    );
    expect(answer!.data.output.answer).toBe('blue');
    const [input] = await db.query<{ consumed_fence: number }>('select consumed_fence from agent_kit_inputs where run_id = $1', [turn.runId]);
    expect(Number(input!.consumed_fence)).toBe(2);
  });

  it('takes a chat message sent while the run waits as the answer', async () => {
    const turn = await startTurn(db, { ownerId: 'u', text: 'question time #ask' });
    await runSegment(rt(), { runId: turn.runId, owner: 'w1' });
    const reply = await startTurn(db, { threadId: turn.threadId, ownerId: 'u', text: 'green' });
    expect(reply).toMatchObject({ kind: 'input', runId: turn.runId });
    expect((await runRow(turn.runId)).status).toBe('queued');
    expect(await runSegment(rt(), { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed' });
    const runs = await db.query('select id from agent_kit_runs where thread_id = $1', [turn.threadId]);
    expect(runs).toHaveLength(1);
  });

  it('accepts an answer that arrives before the run has parked, and consumes it once', async () => {
    const turn = await startTurn(db, { ownerId: 'u', text: 'early #ask' });
    // Deliver the answer just before the transaction that asks and parks (a client that knows the
    // question's id, the model's tool call id): the park must find it and requeue the run.
    const racing: Db = {
      ...db,
      transaction: async (fn) => {
        const [model] = await db.query<{ id: string }>(
          `select data->'toolCalls'->0->>'toolCallId' as id from agent_kit_steps
           where run_id = $1 and kind = 'model' order by step_no desc limit 1`,
          [turn.runId],
        );
        expect(await submit(turn.runId, model!.id, { answer: 'early' })).toEqual([{ status: 'running' }]);
        return db.transaction(fn);
      },
    };
    const first = await runSegment({ ...rt(), db: racing }, { runId: turn.runId, owner: 'w1' });
    expect(first).toMatchObject({ kind: 'parked', status: 'queued' });
    expect(await runSegment(rt(), { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect((await finalMessage(db, turn.runId))[0]!.text).toBe(scriptedReplyText(['early #ask'], tokens));
    const consumed = await db.query('select 1 from agent_kit_inputs where run_id = $1 and consumed_fence = 2', [turn.runId]);
    expect(consumed).toHaveLength(1);
  });
});

describe("what the reply's message keeps of its questions (ADR-0087)", () => {
  const content = async (runId: string) => (await db.query<{ content: Record<string, unknown> }>(
    `select content from agent_kit_messages where run_id = $1 and role = 'assistant'`, [runId]))[0]!.content;
  const transfer = { amount: 5, to: 'Ann' };

  it('each question and approval, where the text stood, its answer, and the chat message that answered', async () => {
    const model = stepsModel([
      { text: 'Let me ask. ', calls: [{ id: 'q1', name: 'ask_user', input: { question: 'Which colour?' } }] },
      { text: 'Blue it is. ', calls: [{ id: 't1', name: 'transfer_funds', input: transfer }] },
      { text: 'Done.' },
    ]);
    const run = () => makeRuntime(db, { model });
    const turn = await startTurn(db, { ownerId: 'u', text: 'colour, then pay' });
    expect(await runSegment(run(), { runId: turn.runId, owner: 'w1' })).toMatchObject({ status: 'waiting_input' });
    const typed = await startTurn(db, { threadId: turn.threadId, ownerId: 'u', text: 'blue' }); // typed, not the input route
    expect(typed).toMatchObject({ kind: 'input', runId: turn.runId });
    expect(await runSegment(run(), { runId: turn.runId, owner: 'w2' })).toMatchObject({ status: 'waiting_input' });
    await submit(turn.runId, 't1', { approved: true }); // the input route
    expect(await runSegment(run(), { runId: turn.runId, owner: 'w3' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(await content(turn.runId)).toEqual({
      text: 'Let me ask. Blue it is. Done.',
      asked: [
        { id: 'q1', kind: 'question', toolName: 'ask_user', question: 'Which colour?', answer: 'blue', at: 12, answeredBy: typed.messageId },
        { id: 't1', kind: 'approval', toolName: 'transfer_funds', input: transfer, approved: true, at: 24 },
      ],
    });
  });

  it('a question left unanswered (the run cancelled while it waited), a denial, and a turn that asked nothing', async () => {
    const model = stepsModel([
      { text: 'Pay? ', calls: [{ id: 't1', name: 'transfer_funds', input: transfer }] },
      { calls: [{ id: 'q1', name: 'ask_user', input: { question: 'Why not?' } }] },
    ]);
    const turn = await startTurn(db, { ownerId: 'u', text: 'pay Ann' });
    await runSegment(makeRuntime(db, { model }), { runId: turn.runId, owner: 'w1' });
    await startTurn(db, { threadId: turn.threadId, ownerId: 'u', text: 'no' }); // a typed denial
    expect(await runSegment(makeRuntime(db, { model }), { runId: turn.runId, owner: 'w2' })).toMatchObject({ status: 'waiting_input' });
    await db.query('select agent_kit_request_cancel($1)', [turn.runId]);
    expect(await runSegment(makeRuntime(db, { model }), { runId: turn.runId, owner: 'w3' })).toMatchObject({ status: 'aborted' });
    const { asked } = await content(turn.runId) as { asked: Array<Record<string, unknown>> };
    expect(asked.map(({ id, approved, answer, at }) => ({ id, approved, answer, at }))).toEqual([
      { id: 't1', approved: false, answer: undefined, at: 5 },
      { id: 'q1', approved: undefined, answer: undefined, at: 5 },
    ]);
    expect(asked[0]!.answeredBy).toEqual(expect.any(String));

    const plain = await startTurn(db, { ownerId: 'u', text: 'just talk' });
    await runSegment(rt(), { runId: plain.runId, owner: 'w1' });
    expect(Object.keys(await content(plain.runId))).toEqual(['text']);
  });
});

describe('approvals', () => {
  it('runs the approved tool once and replies', async () => {
    const before = effects.lines().length;
    const turn = await startTurn(db, { ownerId: 'u', text: 'pay them #approve' });
    expect(await runSegment(rt(), { runId: turn.runId, owner: 'w1' })).toMatchObject({ kind: 'parked', status: 'waiting_input' });
    const waiting = (await runRow(turn.runId)).waiting_for!;
    expect(waiting).toMatchObject({ kind: 'approval', toolName: 'transfer_funds' });
    expect(effects.lines().length).toBe(before); // nothing ran before approval
    await submit(turn.runId, String(waiting.id), { approved: true });
    expect(await runSegment(rt(), { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(effects.lines().slice(before)).toEqual([`${turn.runId}:0:0`]);
  });

  it('does not run a denied tool and tells the model it was denied', async () => {
    const before = effects.lines().length;
    const turn = await startTurn(db, { ownerId: 'u', text: 'pay again #approve' });
    await runSegment(rt(), { runId: turn.runId, owner: 'w1' });
    await submit(turn.runId, String((await runRow(turn.runId)).waiting_for!.id), { approved: false });
    expect(await runSegment(rt(), { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed' });
    expect(effects.lines().length).toBe(before);
    const [step] = await db.query<{ data: { outcome: string } }>(`select data from agent_kit_steps where run_id = $1 and kind = 'tool'`, [turn.runId]);
    expect(step!.data.outcome).toBe('denied');
  });

  it('keeps an approval for the next segment when this one is asked to stop before running it', async () => {
    const before = effects.lines().length;
    const turn = await startTurn(db, { ownerId: 'u', text: 'pay later #approve' });
    await runSegment(rt(), { runId: turn.runId, owner: 'w1' });
    await submit(turn.runId, String((await runRow(turn.runId)).waiting_for!.id), { approved: true });
    const stopping = AbortSignal.abort('shutdown'); // a worker told to stop: no effect starts
    expect(await runSegment(rt(), { runId: turn.runId, owner: 'w2', stopSignal: stopping })).toMatchObject({ kind: 'parked', status: 'queued' });
    expect(effects.lines().length).toBe(before);
    expect(await runSegment(rt(), { runId: turn.runId, owner: 'w3' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(effects.lines().slice(before)).toEqual([`${turn.runId}:0:0`]);
  });
});

describe('cancel and takeover', () => {
  it('closes a queued run as aborted when cancelled', async () => {
    const turn = await startTurn(db, { ownerId: 'u', text: 'never mind' });
    await db.query('select agent_kit_request_cancel($1)', [turn.runId]);
    expect(await runSegment(rt(), { runId: turn.runId, owner: 'w1' })).toMatchObject({ kind: 'closed', status: 'aborted' });
    expect(await finalMessage(db, turn.runId)).toEqual([{ text: '', partial: true }]);
  });

  it('stops a streaming run on cancel and keeps what it had streamed as a partial message', async () => {
    const slow = makeRuntime(db, { tokens: 200, delayMs: 5 });
    const turn = await startTurn(db, { ownerId: 'u', text: 'a long answer please' });
    const segment = runSegment(slow, { runId: turn.runId, owner: 'w1' });
    await waitFor(async () => (await db.query<{ p: string }>('select partial as p from agent_kit_runs where id = $1', [turn.runId]))[0]!.p.length > 20);
    await db.query('select agent_kit_request_cancel($1)', [turn.runId]);
    expect(await segment).toMatchObject({ kind: 'closed', status: 'aborted' });
    const [message] = await finalMessage(db, turn.runId);
    expect(message!.partial).toBe(true);
    expect(message!.text.length).toBeGreaterThan(20);
    expect(scriptedReplyText(['a long answer please'], 200).startsWith(message!.text)).toBe(true);
  });

  it('keeps the text its viewer had seen when the cancel names the last event shown (ADR-0090)', async () => {
    const slow = makeRuntime(db, { tokens: 200, delayMs: 5 });
    const turn = await startTurn(db, { ownerId: 'u', text: 'stop me where I was' });
    const segment = runSegment(slow, { runId: turn.runId, owner: 'w1' });
    const deltas = () => db.query<{ seq: number; text: string }>(
      `select seq::int, data->>'text' as text from agent_kit_thread_events where run_id = $1 and type = 'text-delta' order by seq`, [turn.runId]);
    await waitFor(async () => (await deltas()).length >= 3);
    const [first, second] = await deltas();
    // The page showed the reply up to the second text-delta when the user pressed Stop.
    expect(await db.query('select agent_kit_request_cancel($1, $2) as s', [turn.runId, second!.seq])).toEqual([{ s: 'running' }]);
    await db.query('select agent_kit_request_cancel($1, $2)', [turn.runId, second!.seq + 100]); // a second stop moves nothing
    expect(await segment).toMatchObject({ kind: 'closed', status: 'aborted' });
    const [message] = await finalMessage(db, turn.runId);
    expect(message!.text).toBe(first!.text + second!.text);
    const streamed = (await deltas()).map((d) => d.text).join('');
    expect(streamed.length).toBeGreaterThan(message!.text.length); // the run had streamed more by then
    const [event] = await db.query<{ data: Record<string, unknown> }>(
      `select data from agent_kit_thread_events where run_id = $1 and type = 'cancel-requested'`, [turn.runId]);
    expect(event!.data).toEqual({ runId: turn.runId, shownSeq: second!.seq });
    await expect(db.query('select agent_kit_request_cancel($1, -1)', [turn.runId])).rejects.toThrow(/0 or more/);
  });

  it('keeps the text its viewer saw when the cancel finds the run at its last attempt, in the engine and in the reaper', async () => {
    // A run at its last attempt (a provider that refused it, or segments that died), the viewer
    // having seen "Hello " when they pressed Stop. Its next claim, or the reaper, gives it up:
    // both salvaged the whole partial, cancel or not, before this was fixed.
    const atLastAttempt = async (text: string) => {
      const turn = await startTurn(db, { ownerId: 'u', text });
      const claim = await claimRun(db, { runId: turn.runId, owner: 'w1', leaseTtlMs: 30_000 });
      if (!claim.claimed) throw new Error(`not claimed: ${claim.reason}`);
      await beginSegment(db, claim.lease, '');
      const shown = await mirrorPartial(db, claim.lease, 'Hello ');
      await mirrorPartial(db, claim.lease, 'world, and more');
      await db.query('update agent_kit_runs set attempts = 3 where id = $1', [turn.runId]); // maxRunAttempts
      return { turn, lease: claim.lease, shownSeq: shown.ok ? shown.seq! : -1 };
    };
    const parked = await atLastAttempt('parked for a retry at its last attempt');
    // An effect its segment had started: the next one finds it in doubt (no tool here to ask).
    await db.query(`select * from agent_kit_record_effect($1, $2, $3, 'charge-1', 'started', 'charge_card', '{}'::jsonb)`,
      [parked.turn.runId, parked.lease.owner, parked.lease.fence]);
    await parkForRetry(db, parked.lease, 30_000, { retry: 1 });
    await db.query('select agent_kit_request_cancel($1, $2)', [parked.turn.runId, parked.shownSeq]);
    expect(await runSegment(rt(), { runId: parked.turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed', status: 'aborted' });
    const [cancelled] = await db.query<{ content: Record<string, unknown> }>(
      `select content from agent_kit_messages where run_id = $1 and role = 'assistant'`, [parked.turn.runId]);
    // Named in the message, as a salvage names them (a cancel closed it saying nothing of them).
    expect(cancelled!.content).toEqual({ text: 'Hello ', cancelled: true, inDoubt: [{ key: 'charge-1', tool: 'charge_card' }] });

    const died = await atLastAttempt('died at its last attempt');
    await db.query('select agent_kit_request_cancel($1, $2)', [died.turn.runId, died.shownSeq]);
    await advanceFakeNow(db, 31_000); // its lease runs out
    expect(await reapExpiredRuns(rt())).toMatchObject({ salvaged: 1 });
    const [salvaged] = await db.query<{ content: Record<string, unknown> }>(
      `select content from agent_kit_messages where run_id = $1 and role = 'assistant'`, [died.turn.runId]);
    expect(salvaged!.content).toMatchObject({ text: 'Hello ', cancelled: true, salvaged: true });
  });

  it('reads the text at that event as a viewer had it: across segments and steps asked again', async () => {
    const turn = await startTurn(db, { ownerId: 'u', text: 'many segments' });
    const [thread] = await db.query<{ seq: number }>('select last_seq::int as seq from agent_kit_threads where id = $1', [turn.threadId]);
    let seq = thread!.seq + 1_000; // (written by hand, after the thread's own events)
    const event = (type: string, text: string) => db.query(
      `insert into agent_kit_thread_events (thread_id, seq, run_id, fence, type, data) values ($1, $2, $3, 1, $4, jsonb_build_object('text', $5::text))`,
      [turn.threadId, ++seq, turn.runId, type, text]);
    await event('segment-started', '');
    await event('text-delta', 'Hel');
    await event('text-delta', 'lo wor');
    await event('segment-started', 'Hello'); // a takeover: the text the journal had
    await event('text-delta', ', you');
    await event('model-retry', 'Hello, y'); // the step asked again goes on from this text
    await event('text-delta', 'es.');
    const shownAt = async (shown: number | null) => {
      await db.query('update agent_kit_runs set cancel_shown_seq = $2 where id = $1', [turn.runId, shown]);
      return textShownAtCancel(db, turn.runId, turn.threadId);
    };
    const first = thread!.seq + 1_000;
    expect(await shownAt(null)).toBeNull();
    expect(await shownAt(0)).toBe('');
    expect(await shownAt(first + 3)).toBe('Hello wor');
    expect(await shownAt(first + 4)).toBe('Hello');
    expect(await shownAt(first + 5)).toBe('Hello, you');
    expect(await shownAt(first + 6)).toBe('Hello, y');
    expect(await shownAt(first + 7)).toBe('Hello, yes.');
    expect(await shownAt(first + 100)).toBe('Hello, yes.');
  });

  it('parks a streaming run for an operator and continues it after release', async () => {
    const slow = makeRuntime(db, { tokens: 60, delayMs: 3 });
    const turn = await startTurn(db, { ownerId: 'u', text: 'operator demo' });
    const segment = runSegment(slow, { runId: turn.runId, owner: 'w1' });
    await waitFor(async () => (await db.query<{ p: string }>('select partial as p from agent_kit_runs where id = $1', [turn.runId]))[0]!.p.length > 5);
    expect(await db.query(`select agent_kit_takeover_run($1, 'op') as s`, [turn.runId])).toEqual([{ s: 'running' }]);
    expect(await segment).toMatchObject({ kind: 'parked', status: 'waiting_takeover' });
    expect(await runSegment(slow, { runId: turn.runId, owner: 'w2' })).toEqual({ kind: 'not-claimed', reason: 'waiting' });
    expect(await db.query('select agent_kit_release_run($1) as s', [turn.runId])).toEqual([{ s: 'queued' }]);
    expect(await runSegment(slow, { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect((await finalMessage(db, turn.runId))[0]!.text).toBe(scriptedReplyText(['operator demo'], 60));
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000) {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

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
    const turn = await startTurn(db, { ownerId: 'u', text: 'pay my rent #approve' });
    expect(await runSegment(rt(), { runId: turn.runId, owner: `w1-${reply}` })).toMatchObject({ kind: 'parked', status: 'waiting_input' });
    const before = effects.lines().length;
    const answered = await startTurn(db, { threadId: turn.threadId, ownerId: 'u', text: reply });
    expect(answered.kind).toBe('input');
    expect(await runSegment(rt(), { runId: turn.runId, owner: `w2-${reply}` })).toMatchObject({ kind: 'closed', status: 'completed' });
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
