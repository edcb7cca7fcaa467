// The UI message stream of one run, translated from its events: text the run goes on from
// replaces what a client shows only through a new text part and a transient chunk naming the
// part it supersedes (the protocol cannot retract text), for a resumed segment and for a model
// step started again (ADR-0061); where nothing was dropped, no part is superseded. The model's
// thinking of each step, retry and segment is a reasoning part of its own (ADR-0070). A failed
// run's error chunk says why, when its run-closed does. A stream that ends before its run
// finishes with the status it was in and the seq to go on after (ADR-0079).
import { describe, expect, it } from 'vitest';
import type { ThreadEvent } from '../event-log/read-events.js';
import { UIMessageTranslator } from './ai-sdk-stream.js';

const runId = '22222222-2222-4222-8222-222222222222';

function translate(specs: [type: string, fence: number, data: Record<string, unknown>][]) {
  const translator = new UIMessageTranslator(runId);
  const events: ThreadEvent[] = specs.map(([type, fence, data], index) => ({
    threadId: 't', seq: index + 1, runId, fence, type, data, createdAt: new Date(0),
  }));
  return events.flatMap((event) => translator.translate(event));
}

/** The text of each text part, by id, and the ids the stream said were superseded. */
function textParts(chunks: ReturnType<typeof translate>) {
  const parts = new Map<string, string>();
  const superseded: unknown[] = [];
  for (const chunk of chunks) {
    if (chunk.type === 'text-start') parts.set(chunk.id, '');
    if (chunk.type === 'text-delta') parts.set(chunk.id, parts.get(chunk.id)! + chunk.delta);
    if (chunk.type === 'data-agent-kit-segment') superseded.push((chunk.data as { supersededTextId: unknown }).supersededTextId);
  }
  return { parts: [...parts.values()], superseded, kept: [...parts].filter(([id]) => !superseded.includes(id)).map(([, t]) => t) };
}

const refused = { name: 'ModelStreamError', message: 'server_error: oops', statusCode: 500 };
const retry = (n: number, extra: Record<string, unknown>) => ({ stepNo: 0, retry: n, of: 5, delayMs: 1_000, error: refused, ...extra });

describe('the UI message stream of a run', () => {
  it('supersedes the text of a step started again, and shows the retry as transient data', () => {
    const chunks = translate([
      ['segment-started', 1, { text: '', attempt: 1, fence: 1 }],
      ['text-delta', 1, { text: 'Ha' }],
      ['model-retry', 1, retry(1, { redo: true, text: '' })],
      ['text-delta', 1, { text: 'The answer.' }],
      ['run-closed', 1, { status: 'completed', text: 'The answer.', partial: false, fence: 1 }],
    ]);
    const { parts, superseded, kept } = textParts(chunks);
    expect(parts).toEqual(['Ha', 'The answer.']);
    expect(superseded).toEqual([`${runId}:text:1`]);
    expect(kept).toEqual(['The answer.']);
    const notes = chunks.flatMap((c) => (c.type === 'data-agent-kit-event' ? [(c as { data: { type: string } }).data.type] : []));
    expect(notes).toEqual(['model-retry']);
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
  });

  it('finishes with "length" when the reply stopped at the model\'s output limit (ADR-0068)', () => {
    const finish = (finishReason?: string) => translate([
      ['segment-started', 1, { text: '', attempt: 1, fence: 1 }],
      ['text-delta', 1, { text: 'Cut' }],
      ['step-finished', 1, { stepNo: 0, text: 'Cut', toolCalls: [], ...(finishReason ? { finishReason } : {}) }],
      ['run-closed', 1, { status: 'completed', text: 'Cut', partial: false, fence: 1 }],
    ]).at(-1);
    expect([finish('length'), finish()]).toMatchObject([
      { type: 'finish', finishReason: 'length' }, { type: 'finish', finishReason: 'stop' },
    ]);
  });

  it('goes on in the same part where the retry keeps the text (a prefill), and after an older retry without one', () => {
    const chunks = translate([
      ['segment-started', 1, { text: '', attempt: 1, fence: 1 }],
      ['text-delta', 1, { text: 'Half' }],
      ['model-retry', 1, retry(1, { redo: false, text: 'Half' })],
      ['text-delta', 1, { text: ' and' }],
      ['model-retry', 1, retry(2, {})],
      ['text-delta', 1, { text: ' the rest.' }],
      ['run-closed', 1, { status: 'completed', text: 'Half and the rest.', partial: false, fence: 1 }],
    ]);
    expect(textParts(chunks)).toEqual({ parts: ['Half and the rest.'], superseded: [], kept: ['Half and the rest.'] });
  });

  it('supersedes what a dead segment streamed past the text its successor resumes from', () => {
    const chunks = translate([
      ['segment-started', 1, { text: '', attempt: 1, fence: 1 }],
      ['text-delta', 1, { text: 'one two' }],
      ['segment-started', 2, { text: 'one ', attempt: 2, fence: 2 }],
      ['text-delta', 2, { text: 'two three' }],
      ['run-closed', 2, { status: 'completed', text: 'one two three', partial: false, fence: 2 }],
    ]);
    expect(textParts(chunks).kept).toEqual(['one two three']);
  });

  it('gives the thinking of each step, each retry and each segment a reasoning part of its own', () => {
    const chunks = translate([
      ['segment-started', 1, { text: '', attempt: 1, fence: 1 }],
      ['reasoning-delta', 1, { text: 'first try ' }],
      ['reasoning-delta', 1, { text: 'thinks' }],
      ['model-retry', 1, retry(1, { redo: false, text: '' })],
      ['reasoning-delta', 1, { text: 'second try thinks' }],
      ['segment-started', 2, { text: '', attempt: 2, fence: 2 }], // the first segment died thinking
      ['reasoning-delta', 2, { text: 'next segment thinks' }],
      ['step-finished', 2, { stepNo: 0, text: '', toolCalls: [], finishReason: 'length' }],
      ['reasoning-delta', 2, { text: 'next step thinks' }],
      ['text-delta', 2, { text: 'Answer.' }],
      ['run-closed', 2, { status: 'completed', text: 'Answer.', partial: false, fence: 2 }],
    ]);
    const parts = new Map<string, string>();
    const open = new Set<string>();
    for (const chunk of chunks) {
      if (chunk.type === 'reasoning-start') {
        open.add(chunk.id);
        parts.set(chunk.id, '');
      }
      if (chunk.type === 'reasoning-delta') {
        expect(open.has(chunk.id)).toBe(true);
        parts.set(chunk.id, parts.get(chunk.id)! + chunk.delta);
      }
      if (chunk.type === 'reasoning-end') open.delete(chunk.id);
    }
    expect([...parts.values()]).toEqual(['first try thinks', 'second try thinks', 'next segment thinks', 'next step thinks']);
    expect(open.size).toBe(0); // every part ended
    expect(textParts(chunks).parts).toEqual(['Answer.']);
  });

  it('leaves the text shown when a cancelled run kept less of it (the stopping viewer had seen less, ADR-0090)', () => {
    const chunks = translate([
      ['segment-started', 1, { text: '', attempt: 1, fence: 1 }],
      ['text-delta', 1, { text: 'Hello, ' }],
      ['text-delta', 1, { text: 'world' }],
      ['run-closed', 1, { status: 'aborted', text: 'Hello, ', fence: 1 }],
    ]);
    expect(textParts(chunks)).toEqual({ parts: ['Hello, world'], superseded: [], kept: ['Hello, world'] });
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', messageMetadata: { status: 'aborted' } });
    // Another text than the one shown is still superseded.
    const diverged = translate([
      ['segment-started', 1, { text: '', attempt: 1, fence: 1 }],
      ['text-delta', 1, { text: 'Hello' }],
      ['run-closed', 1, { status: 'aborted', text: 'Bye', fence: 1 }],
    ]);
    expect(textParts(diverged).kept).toEqual(['Bye']);
  });

  it('says why a run failed in its error chunk, when its run-closed says (ADR-0066)', () => {
    const errorOf = (error: unknown) => translate([
      ['segment-started', 1, { text: '', attempt: 1, fence: 1 }],
      ['run-closed', 1, { status: 'failed', text: '', partial: true, fence: 1, ...(error === undefined ? {} : { error }) }],
    ]).find((chunk) => chunk.type === 'error');
    expect(errorOf({ name: 'AI_APICallError', message: 'Incorrect API key provided', statusCode: 401 })).toEqual({
      type: 'error',
      errorText: "the run failed: the model's provider refused the request (401): Incorrect API key provided; its partial answer was kept",
    });
    expect(errorOf('stopped after 16 model steps'))
      .toEqual({ type: 'error', errorText: 'the run failed: stopped after 16 model steps; its partial answer was kept' });
    expect(errorOf(undefined)).toEqual({ type: 'error', errorText: 'the run failed; its partial answer was kept' });
  });

  it('ends a stream cut before its run with a finish that says where to go on (ADR-0079)', () => {
    const event = (seq: number, type: string, data: Record<string, unknown>, of = runId): ThreadEvent =>
      ({ threadId: 't', seq, runId: of, fence: 1, type, data, createdAt: new Date(0) });
    const finishOf = (chunks: ReturnType<UIMessageTranslator['end']>) => chunks.find((c) => c.type === 'finish');
    // Cut by the route's budget mid-reply, after another run's event: status streaming, its seq.
    const cut = new UIMessageTranslator(runId, { threadId: 't', afterSeq: 4 });
    cut.translate(event(5, 'segment-started', { text: '', attempt: 1, fence: 1 }));
    cut.translate(event(6, 'text-delta', { text: 'So far' }));
    cut.translate(event(7, 'message', {}, 'another-run'));
    expect(finishOf(cut.end())).toMatchObject({ messageMetadata: { runId, threadId: 't', status: 'streaming', seq: 7 } });
    // Ended at a park for the next segment: the status it parked in.
    const parked = new UIMessageTranslator(runId, { threadId: 't', afterSeq: 4 });
    parked.translate(event(5, 'segment-started', { text: '', attempt: 1, fence: 1 }));
    parked.translate(event(6, 'run-parked', { status: 'queued' }));
    expect(finishOf(parked.end())).toMatchObject({ messageMetadata: { status: 'queued', seq: 6 } });
    // Nothing of the run before the budget (queued behind another turn): still a finish, at the cursor.
    const idle = new UIMessageTranslator(runId, { threadId: 't', afterSeq: 9 });
    expect(idle.end().map((c) => c.type)).toEqual(['start', 'finish']);
    expect(finishOf(idle.end())).toBeUndefined(); // once
    const quiet = new UIMessageTranslator(runId, { threadId: 't', afterSeq: 9 });
    expect(finishOf(quiet.end())).toMatchObject({ messageMetadata: { runId, threadId: 't', status: 'streaming', seq: 9 } });
    // A closed run's finish is its own, and the stream ends nothing more.
    const closed = new UIMessageTranslator(runId);
    closed.translate(event(3, 'segment-started', { text: '', attempt: 1, fence: 1 }));
    const last = closed.translate(event(4, 'run-closed', { status: 'completed', text: '', partial: false, fence: 1 }));
    expect(finishOf(last)).toMatchObject({ messageMetadata: { status: 'completed', seq: 4 } });
    expect(closed.end()).toEqual([]);
  });

  it('keeps the step and the text open across a park for the next segment: one part, live or replayed', () => {
    // A park queued (a slice, a store error's hand-back) ended the step and the text part, and
    // the note of the park came after their ends: useChat showed the reply in two parts.
    const event = (seq: number, type: string, data: Record<string, unknown>, fence = 1): ThreadEvent =>
      ({ threadId: 't', seq, runId, fence, type, data, createdAt: new Date(0) });
    const live = new UIMessageTranslator(runId, { threadId: 't', afterSeq: 0 });
    live.translate(event(1, 'segment-started', { text: '', attempt: 1, fence: 1 }));
    live.translate(event(2, 'text-delta', { text: 'Hel' }));
    expect(live.translate(event(3, 'run-parked', { status: 'queued' })).map((c) => c.type)).toEqual(['data-agent-kit-event']);
    // The stream's end closes them, after the park's event, for the transport to carry on.
    expect(live.end().map((c) => c.type)).toEqual(['text-end', 'finish-step', 'finish']);

    const replay = translate([
      ['segment-started', 1, { text: '', attempt: 1, fence: 1 }], ['text-delta', 1, { text: 'Hel' }],
      ['run-parked', 1, { status: 'queued' }], ['segment-started', 2, { text: 'Hel', attempt: 1, fence: 2 }],
      ['text-delta', 2, { text: 'lo.' }], ['run-closed', 2, { status: 'completed', text: 'Hello.', partial: false, fence: 2 }],
    ]);
    expect(textParts(replay).parts).toEqual(['Hello.']);
    expect(replay.filter((c) => c.type === 'start-step')).toHaveLength(1);
    // A park for an answer or an operator still ends the step: the question's step is the last.
    const asking = translate([['segment-started', 1, { text: '', attempt: 1, fence: 1 }], ['text-delta', 1, { text: 'Which?' }],
      ['run-parked', 1, { status: 'waiting_input' }]]);
    expect(asking.map((c) => c.type).slice(-3)).toEqual(['text-end', 'finish-step', 'data-agent-kit-event']);
  });
});
