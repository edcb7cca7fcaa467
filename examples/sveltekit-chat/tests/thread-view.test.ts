// Unit tests of the chat's event fold and the operator timeline: events apply once and in seq
// order (so two streams and a replay agree), a resumed segment replaces the dead one's text,
// what the model thought stays apart from its reply, and each way a run can end is labelled and
// drawn as such; the sidebar joins older pages of threads only to the first page they followed.
import { describe, expect, it } from 'vitest';
import { buildRunTimeline, segmentKilledEventType } from '../src/lib/run-timeline';
import {
  announceEvent, applyEvent, emptyThreadView, inDoubtNotices, openRun, historyCutNotice, retryNotice, runBadge, type RunItem, type WireEvent,
} from '../src/lib/thread-view';
import { sidebarThreads, type ThreadLink } from '../src/lib/sidebar';

const runId = '11111111-1111-4111-8111-111111111111';
const t0 = Date.parse('2030-01-01T00:00:00Z');

type EventSpec = [type: string, fence: number, data: Record<string, unknown>];

function makeLog(specs: EventSpec[]): WireEvent[] {
  return specs.map(([type, fence, data], index) => ({
    seq: index + 1, runId, fence, type, data, createdAt: new Date(t0 + index * 1000).toISOString(),
  }));
}

const crashedThenResumedSpecs: EventSpec[] = [
  ['message', 0, { role: 'user', text: 'hi', messageId: 'm1', runId }],
  ['run-queued', 0, { runId, turnNo: 1 }],
  ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
  ['text-delta', 1, { text: 'one two ' }],
  ['segment-started', 2, { text: 'one ', attempt: 2, fence: 2, owner: 'b' }],
  ['text-delta', 2, { text: 'two three ' }],
  ['run-closed', 2, { status: 'completed', text: 'one two three ', partial: false }],
];
const crashedThenResumed = makeLog(crashedThenResumedSpecs);

// Two model steps that think first (ADR-0070): a tool call, then the reply.
const thoughtThenRepliedSpecs: EventSpec[] = [
  ['message', 0, { role: 'user', text: 'hi #think', messageId: 'm1', runId }],
  ['run-queued', 0, { runId, turnNo: 1 }],
  ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
  ['reasoning-delta', 1, { text: 'Thinking it ' }],
  ['reasoning-delta', 1, { text: 'over.' }],
  ['step-finished', 1, { stepNo: 0, text: '', toolCalls: [{ toolName: 'record_effect' }] }],
  ['tool-result', 1, { toolCallId: 'c1', toolName: 'record_effect', outcome: 'completed', output: {} }],
  ['reasoning-delta', 1, { text: 'Then this.' }],
  ['text-delta', 1, { text: 'Done.' }],
  ['step-finished', 1, { stepNo: 1, text: 'Done.', toolCalls: [] }],
  ['run-closed', 1, { status: 'completed', text: 'Done.', partial: false }],
];

function fold(events: WireEvent[]) {
  const view = emptyThreadView();
  for (const event of events) applyEvent(view, event);
  return view;
}

describe('the thread view', () => {
  it('replaces a dead segment’s text with the resumed segment’s and shows the attempt', () => {
    const view = fold(crashedThenResumed.slice(0, 6));
    const run = view.items[1] as RunItem;
    expect(run.text).toBe('one two three ');
    expect(run.resumedAfterCrash).toBe(true);
    expect(run.attempt).toBe(2);
  });

  it('says the model is busy while the run waits to retry, until the run goes on', () => {
    const refused = { name: 'AI_APICallError', message: 'Rate limit reached', statusCode: 429 };
    const log = makeLog([
      ['message', 0, { role: 'user', text: 'hi', messageId: 'm1', runId }],
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
      ['model-retry', 1, { stepNo: 0, retry: 1, of: 5, delayMs: 1_000, error: refused }],
      ['model-retry', 1, { stepNo: 0, retry: 2, of: 5, delayMs: 2_400, error: { name: 'Error', message: 'overloaded' } }],
      ['text-delta', 1, { text: 'one ' }],
      ['run-closed', 1, { status: 'completed', text: 'one ', partial: false }],
    ]);
    // After each event from the segment's start on.
    const notices = log.slice(2).map((_, index) => retryNotice(fold(log.slice(0, index + 3)).items[1] as RunItem));
    expect(notices).toEqual([
      null,
      "The model's provider is busy (429): trying again in 1 s (1 of 5).",
      "The model's provider is busy: trying again in 2 s (2 of 5).",
      null,
      null,
    ]);
  });

  it('keeps what a run\'s model was not given of a thread past its context window, with no wait to show', () => {
    const refused = { name: 'AI_APICallError', message: 'prompt is too long: 1300 tokens > 1000 maximum', statusCode: 400 };
    const log = makeLog([
      ['run-queued', 0, { runId, turnNo: 13 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
      ['model-retry', 1, { stepNo: 0, delayMs: 0, error: refused, earlierTurns: { kept: 3, of: 12 }, text: '' }],
      ['text-delta', 1, { text: 'Fits.' }],
      ['run-closed', 1, { status: 'completed', text: 'Fits.', partial: false }],
    ]);
    const runs = [3, 5].map((n) => fold(log.slice(0, n)).items[0] as RunItem);
    expect(runs.map((run) => [historyCutNotice(run), retryNotice(run)])).toEqual(Array(2).fill([
      'This conversation is longer than the model can take: it was given only the newest 3 of the 12 earlier turns.', null,
    ]));
    const none = (of: number) => historyCutNotice({ ...runs[1]!, historyCut: { kept: 0, of } });
    expect([none(1), none(4)]).toEqual([
      'This conversation is longer than the model can take: it was not given the earlier turn.',
      'This conversation is longer than the model can take: it was given none of the 4 earlier turns.',
    ]);
    expect(buildRunTimeline(log, runId, t0 + 9000, false).bars[0]!.markers.map((m) => m.label)).toEqual([
      "past the model's context window: asked again with the newest 3 of 12 earlier turns",
    ]);
    // Then, with no earlier turn left, the turn's own answered tool results.
    const more = makeLog([
      ['run-queued', 0, { runId, turnNo: 13 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
      ['model-retry', 1, { stepNo: 0, delayMs: 0, error: refused, earlierTurns: { kept: 0, of: 12 }, text: '' }],
      ['model-retry', 1, { stepNo: 0, delayMs: 0, error: refused, toolResults: { dropped: 2, of: 3 }, text: '' }],
    ]);
    const both = fold(more).items[0] as RunItem;
    expect(historyCutNotice(both)).toBe('This conversation is longer than the model can take: it was given none of the 12 earlier ' +
      'turns, and was not given 2 of the 3 tool results it had already read.');
    expect(historyCutNotice({ ...both, historyCut: null, resultsLeftOut: { dropped: 1, of: 1 } }))
      .toBe('This conversation is longer than the model can take: it was not given the tool result it had already read.');
    expect(buildRunTimeline(more, runId, t0 + 9000, false).bars[0]!.markers.map((m) => m.label)[1])
      .toBe("past the model's context window: asked again without 2 of 3 answered tool results");
    // Then, nothing left to leave out, the newest results cut short.
    const cut = makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
      ['model-retry', 1, { stepNo: 2, delayMs: 0, error: refused, toolResults: { cutTo: 2_800 }, text: '' }],
    ]);
    expect(historyCutNotice(fold(cut).items[0] as RunItem)).toBe('This conversation is longer than the model can take: it was ' +
      'given only the first 2800 characters of a long tool result.');
    expect(buildRunTimeline(cut, runId, t0 + 9000, false).bars[0]!.markers.map((m) => m.label))
      .toEqual(["past the model's context window: asked again with tool results cut to 2800 characters"]);
  });

  it('reads a prompt cut before it was sent, to the window the thread learned, as a cut without a retry', () => {
    const log = makeLog([
      ['run-queued', 0, { runId, turnNo: 14 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
      ['text-delta', 1, { text: 'So far ' }],
      ['prompt-cut', 1, { stepNo: 0, window: { chars: 1_900 }, earlierTurns: { kept: 4, of: 13 } }],
      ['text-delta', 1, { text: 'so good.' }],
    ]);
    const run = fold(log).items[0] as RunItem;
    expect([historyCutNotice(run), retryNotice(run), run.text]).toEqual([
      'This conversation is longer than the model can take: it was given only the newest 4 of the 13 earlier turns.', null,
      'So far so good.',
    ]);
    expect(buildRunTimeline(log, runId, t0 + 9000, false).bars[0]!.markers.map((m) => m.label))
      .toEqual(["past the model's context window: sent with the newest 4 of 13 earlier turns"]);
  });

  it('knows a reply the model\'s output limit cut, from its last step', () => {
    const log = makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
      ['text-delta', 1, { text: 'Once upon' }],
      ['step-finished', 1, { stepNo: 0, text: 'Once upon', toolCalls: [], finishReason: 'length' }],
      ['run-closed', 1, { status: 'completed', text: 'Once upon', partial: false }],
    ]);
    expect([3, 4, 5].map((n) => (fold(log.slice(0, n)).items[0] as RunItem).cutAtLimit)).toEqual([false, true, true]);
    const whole = makeLog([...log.slice(0, 3).map((e): EventSpec => [e.type, e.fence, e.data]),
      ['step-finished', 1, { stepNo: 0, text: 'Once upon', toolCalls: [] }]]);
    expect((fold(whole).items[0] as RunItem).cutAtLimit).toBe(false);
  });

  it('says the model stopped answering when its stream went silent', () => {
    const log = makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
      ['model-retry', 1, { stepNo: 0, retry: 1, of: 5, delayMs: 800, redo: false, text: '',
        error: { name: 'ModelStalledError', message: 'the model stream sent nothing for 60000 ms' } }],
    ]);
    expect(retryNotice(fold(log).items[0] as RunItem)).toBe('The model stopped answering: trying again in 1 s (1 of 5).');
  });

  it('keeps saying the provider is busy while the run is parked for a wait too long for its segment', () => {
    const refused = { name: 'AI_APICallError', message: 'Rate limit reached', statusCode: 429 };
    const dueAt = new Date(t0 + 33_000).toISOString();
    const log = makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
      ['model-retry', 1, { stepNo: 0, retry: 1, of: 5, delayMs: 30_000, error: refused, redo: false, text: '', dueAt }],
      ['run-parked', 1, { runId, fence: 1, status: 'queued', requested: 'queued', waitingFor: null, dueAt }],
      ['segment-started', 2, { text: '', attempt: 2, fence: 2, owner: 'b' }],
    ]);
    const states = [3, 4, 5].map((n) => fold(log.slice(0, n)).items[0] as RunItem).map((run) => [run.status, retryNotice(run)]);
    const busy = "The model's provider is busy (429): trying again in 30 s (1 of 5).";
    expect(states).toEqual([['running', busy], ['queued', busy], ['running', null]]);
    const timeline = buildRunTimeline(log, runId, t0 + 9000, false);
    expect(timeline.bars[0]!.markers.map((m) => m.label)).toEqual([
      'model refused (429): retry 1 of 5 in 30.0 s, parked until then — Rate limit reached',
    ]);
  });

  it('drops the text of a step the model starts again, where its model-retry says, and keeps it where it goes on', () => {
    const refused = { name: 'ModelStreamError', message: 'server_error: oops', statusCode: 500 };
    const log = makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
      ['text-delta', 1, { text: 'Noting. ' }],
      ['step-finished', 1, { stepNo: 0, text: 'Noting. ', toolCalls: [] }],
      ['text-delta', 1, { text: 'Ha' }],
      ['model-retry', 1, { stepNo: 2, retry: 1, of: 5, delayMs: 1_000, error: refused, redo: true, text: 'Noting. ' }],
      ['text-delta', 1, { text: 'Noted' }],
      ['model-retry', 1, { stepNo: 2, retry: 2, of: 5, delayMs: 1_000, error: refused, redo: false, text: 'Noting. Noted' }],
      ['text-delta', 1, { text: '.' }],
    ]);
    const texts = log.slice(4).map((_, index) => (fold(log.slice(0, index + 5)).items[0] as RunItem).text);
    expect(texts).toEqual(['Noting. Ha', 'Noting. ', 'Noting. Noted', 'Noting. Noted', 'Noting. Noted.']);
    expect(retryNotice(fold(log.slice(0, 6)).items[0] as RunItem))
      .toBe("The model's provider had an error (500): trying again in 1 s (1 of 5), rewriting the unfinished part of the reply.");
    // A model-retry written before ADR-0061 has no text: the run's text stays as it is.
    const older = fold([...log.slice(0, 5), { ...log[5]!, data: { stepNo: 2, retry: 1, of: 5, delayMs: 1_000, error: refused } }]);
    expect((older.items[0] as RunItem).text).toBe('Noting. Ha');
  });

  it('applies each seq once, so a duplicate or early event from a second stream changes nothing', () => {
    const view = emptyThreadView();
    for (const event of crashedThenResumed.slice(0, 4)) applyEvent(view, event);
    expect(applyEvent(view, crashedThenResumed[3]!)).toBe(false);
    expect(applyEvent(view, crashedThenResumed[5]!)).toBe(false);
    expect((view.items[1] as RunItem).text).toBe('one two ');
    expect(view.cursor).toBe(4);
  });

  it('ends with one user message and one closed run whatever the streams delivered twice', () => {
    const view = emptyThreadView();
    for (const event of [...crashedThenResumed, ...crashedThenResumed]) applyEvent(view, event);
    expect(view.items.map((item) => item.kind)).toEqual(['user', 'run']);
    expect(openRun(view)).toBeUndefined();
    expect(runBadge(view.items[1] as RunItem)).toBeNull();
  });

  it('labels a salvaged run, a cancelled run and a waiting question', () => {
    const salvaged = fold(makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['segment-started', 1, { text: '', attempt: 1 }],
      ['run-closed', 0, { status: 'aborted', text: 'half', partial: true }],
    ]));
    expect(runBadge(salvaged.items[0] as RunItem)).toBe('cut short by an interruption');

    const cancelled = fold(makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['cancel-requested', 0, { runId }],
      ['run-closed', 1, { status: 'aborted', text: '', partial: false }],
    ]));
    expect(runBadge(cancelled.items[0] as RunItem)).toBe('cancelled');
    expect((cancelled.items[0] as RunItem).closed?.reason).toBeNull();

    // Failed by its own segment (ADR-0066): the badge, and the reason its run-closed gave.
    const refused = fold(makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['run-closed', 1, { status: 'failed', text: '', partial: true,
        error: { name: 'AI_APICallError', message: 'Incorrect API key provided', statusCode: 401 } }],
    ]));
    expect(runBadge(refused.items[0] as RunItem)).toBe('failed');
    expect((refused.items[0] as RunItem).closed?.reason)
      .toBe("The model's provider refused the request (401): Incorrect API key provided");
    const tooLong = fold(makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['run-closed', 1, { status: 'failed', text: 'so far', partial: true, error: 'stopped after 16 model steps' }],
    ]));
    expect((tooLong.items[0] as RunItem).closed?.reason).toBe('The turn stopped after 16 model steps.');

    const asking = fold(makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['input-requested', 1, { id: 'q1', kind: 'question', question: 'Which?' }],
      ['run-parked', 1, { status: 'waiting_input' }],
    ]));
    const run = asking.items[0] as RunItem;
    expect(run.pending).toMatchObject({ id: 'q1', kind: 'question', question: 'Which?' });
    expect(runBadge(run)).toBe('waiting for your answer');
    applyEvent(asking, { ...crashedThenResumed[0]!, seq: 4, type: 'input-received', data: { questionId: 'q1', data: { answer: 'blue' } } });
    expect(run.pending).toBeNull();
    expect(run.answered).toEqual([{ question: 'Which?', answer: 'blue' }]);
  });

  it('keeps what the model thought apart from the reply, a blank line between two steps\' thinking', () => {
    const log = makeLog(thoughtThenRepliedSpecs);
    const runs = log.slice(3).map((_, index) => fold(log.slice(0, index + 4)).items[1] as RunItem);
    const first = 'Thinking it over.';
    expect(runs.map((run) => run.reasoning)).toEqual([
      'Thinking it ', first, first, first, `${first}\n\nThen this.`, `${first}\n\nThen this.`,
      `${first}\n\nThen this.`, `${first}\n\nThen this.`,
    ]);
    expect(runs.map((run) => run.text)).toEqual(['', '', '', '', '', 'Done.', 'Done.', 'Done.']);
    // A step that did not think leaves no blank line in front of the next one's thinking.
    const unthinking = fold(makeLog(thoughtThenRepliedSpecs.filter((_, index) => index !== 3 && index !== 4)));
    expect((unthinking.items[1] as RunItem).reasoning).toBe('Then this.');
    // Applied once, whatever the streams delivered twice: a replay from 0 gives the same view.
    const view = fold(log.slice(0, 5));
    expect(applyEvent(view, log[4]!)).toBe(false);
    expect((view.items[1] as RunItem).reasoning).toBe(first);
    expect(fold([...log, ...log])).toEqual(fold(log));
    // Thinking is streamed like the reply: no news for a screen reader.
    expect(announcements(log).filter((_, index) => log[index]!.type === 'reasoning-delta')).toEqual([null, null, null]);
  });

  it('keeps what the model thought across a retry of the step and a resumed segment', () => {
    const refused = { name: 'ModelStreamError', message: 'server_error: oops', statusCode: 500 };
    const log = makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
      ['reasoning-delta', 1, { text: 'Hmm. ' }],
      ['text-delta', 1, { text: 'one ' }],
      ['model-retry', 1, { stepNo: 0, retry: 1, of: 5, delayMs: 1_000, error: refused, redo: true, text: '' }],
      ['reasoning-delta', 1, { text: 'Again. ' }],
      ['segment-started', 2, { text: '', attempt: 2, fence: 2, owner: 'b' }],
      ['reasoning-delta', 2, { text: 'Once more.' }],
      ['text-delta', 2, { text: 'two ' }],
      ['run-closed', 2, { status: 'completed', text: 'two ', partial: false }],
    ]);
    const runs = log.slice(3).map((_, index) => fold(log.slice(0, index + 4)).items[0] as RunItem);
    expect(runs.map((run) => [run.reasoning, run.text])).toEqual([
      ['Hmm. ', 'one '], ['Hmm. ', ''], ['Hmm. \n\nAgain. ', ''], ['Hmm. \n\nAgain. ', ''],
      ['Hmm. \n\nAgain. \n\nOnce more.', ''], ['Hmm. \n\nAgain. \n\nOnce more.', 'two '], ['Hmm. \n\nAgain. \n\nOnce more.', 'two '],
    ]); // asked anew (a retry, a new segment), the model thinks anew: a paragraph of its own
    // The model thinking again is the end of the wait for the retry.
    expect(runs.slice(1, 3).map((run) => retryNotice(run) !== null)).toEqual([true, false]);
  });

  it('keeps the question of a run cancelled while it waited, unanswered', () => {
    const view = fold(makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['input-requested', 1, { id: 'q1', kind: 'question', question: 'Which colour?' }],
      ['run-parked', 1, { status: 'waiting_input' }],
      ['cancel-requested', 0, { runId }],
      ['run-closed', 0, { status: 'aborted', text: '', partial: false }],
    ]));
    const run = view.items[0] as RunItem;
    expect(runBadge(run)).toBe('cancelled');
    expect(run.pending).toBeNull();
    // Before, the question vanished with the close and the bubble was empty.
    expect(run.answered).toEqual([{ question: 'Which colour?', answer: 'not answered' }]);
  });
});

/** Fold `events` and collect what the status region would say after each. */
function announcements(events: WireEvent[]): (string | null)[] {
  const view = emptyThreadView();
  return events.map((event) => (applyEvent(view, event) ? announceEvent(view, event) : null));
}

describe('the chat\'s announcements', () => {
  it('says when a reply starts and ends, never its text, and nothing new while it streams', () => {
    expect(announcements(crashedThenResumed)).toEqual([
      null, null, 'Assistant is replying…', null, 'Assistant is replying…', null, 'Assistant replied.',
    ]);
  });

  it('says what the assistant asks, and how a run ended otherwise', () => {
    const asked = announcements(makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1 }],
      ['input-requested', 1, { id: 'q1', kind: 'question', question: 'Which colour?' }],
      ['input-requested', 1, { id: 'q2', kind: 'approval', toolName: 'transfer_funds' }],
      ['cancel-requested', 0, { runId }],
      ['run-closed', 0, { status: 'aborted', text: '', partial: false }],
    ]));
    // A cancel asked for is not news yet (the run still waits); its close is.
    const approval = 'Assistant asks you to approve transfer_funds.';
    expect(asked.slice(2)).toEqual(['Assistant asks: Which colour?', approval, approval, 'Reply cancelled.']);
    const failed = announcements(makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['run-closed', 0, { status: 'failed', text: '', partial: false }],
    ]));
    expect(failed).toEqual([null, 'The assistant could not reply.']);
  });

  it('says a message waits behind the reply before it, and nothing for one that starts at once', () => {
    const secondRunId = '22222222-2222-4222-8222-222222222222';
    const log = makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1 }],
      ['message', 0, { role: 'user', text: 'and then?', messageId: 'm2', runId: secondRunId }],
      ['run-queued', 0, { runId: secondRunId, turnNo: 2 }],
      ['step-finished', 1, { text: 'done' }],
      ['run-closed', 1, { status: 'completed', text: 'done', partial: false }],
      ['segment-started', 1, { runId: secondRunId, text: '', attempt: 1, fence: 1 }],
    ]).map((event) => ({ ...event, runId: (event.data.runId as string | undefined) ?? runId }));
    // The first turn's step ending is no news: it said "replying" over the queued sentence.
    expect(announcements(log)).toEqual([
      null, 'Assistant is replying…', null,
      'Your message is queued; it will be answered after the current reply.',
      null, 'Assistant replied.', 'Assistant is replying…',
    ]);
  });
});

describe('effects a run was given up with', () => {
  const salvagedSpecs = (inDoubt: unknown): EventSpec[] => [
    ['run-queued', 0, { runId, turnNo: 1 }],
    ['segment-started', 1, { text: '', attempt: 1, fence: 1 }],
    ['run-salvaged', 2, { runId, fence: 2, attempts: 1, text: 'half', reason: 'died', inDoubt }],
    ['run-closed', 2, { status: 'aborted', text: 'half', partial: true }],
  ];

  it('names each tool once, in plain words, and says it when the reply is cut short', () => {
    const inDoubt = [
      { key: `${runId}:0:0`, tool: 'send_email' }, { key: `${runId}:0:1`, tool: 'transfer_funds' },
      { key: `${runId}:1:0`, tool: 'send_email' },
    ];
    const view = fold(makeLog(salvagedSpecs(inDoubt)));
    expect(inDoubtNotices(view.items[0] as RunItem).map((n) => n.text)).toEqual([
      'The outcome of 2 calls of send_email is unknown: check them before trying again.',
      'The outcome of transfer_funds is unknown: check it before trying again.',
    ]);
    expect(announcements(makeLog(salvagedSpecs(inDoubt.slice(1, 2)))).slice(2)).toEqual([
      null,
      'The reply was cut short by an interruption. The outcome of transfer_funds is unknown: check it before trying again.',
    ]);
  });

  it("says what an operator found once they checked, on the line of that tool's effect", () => {
    const inDoubt = [
      { key: `${runId}:0:0`, tool: 'send_email' }, { key: `${runId}:0:1`, tool: 'transfer_funds' },
      { key: `${runId}:1:0`, tool: 'send_email' },
    ];
    const resolved = (key: string, tool: string, happened: unknown): EventSpec =>
      ['effect-resolved', 0, { runId, key, tool, happened, by: 'ops' }];
    const specs = [
      ...salvagedSpecs(inDoubt),
      resolved(`${runId}:0:1`, 'transfer_funds', false),
      resolved(`${runId}:0:0`, 'send_email', true),
      resolved(`${runId}:1:0`, 'send_email', 'maybe'), // malformed: changes nothing
    ];
    const notices = inDoubtNotices(fold(makeLog(specs)).items[0] as RunItem);
    expect(notices).toEqual([
      { text: 'Checked since: send_email went through.', checked: true },
      { text: 'Checked since: transfer_funds did not go through; you can ask again.', checked: true },
      { text: 'The outcome of send_email is unknown: check it before trying again.', checked: false },
    ]);
    // Heard live, the verdict is said on its own, not the close again.
    expect(announcements(makeLog(specs)).slice(4)).toEqual([
      'Checked since: transfer_funds did not go through; you can ask again.',
      'Checked since: send_email went through.',
      null,
    ]);
  });

  it('names an effect the run went on past (not in run-salvaged) when it is resolved', () => {
    const specs: EventSpec[] = [
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['segment-started', 2, { text: '', attempt: 2, fence: 2 }],
      ['run-closed', 2, { status: 'completed', text: 'I could not tell whether it was paid.', partial: false }],
      ['effect-resolved', 0, { runId, key: `${runId}:0:0`, tool: 'charge_card', happened: true, by: 'ops' }],
    ];
    expect(inDoubtNotices(fold(makeLog(specs)).items[0] as RunItem)).toEqual([
      { text: 'Checked since: charge_card went through.', checked: true },
    ]);
  });

  it('says nothing more when nothing was in doubt or the event is malformed', () => {
    for (const inDoubt of [[], undefined, 'x', [{ key: 'k' }], [null]]) {
      expect(inDoubtNotices(fold(makeLog(salvagedSpecs(inDoubt))).items[0] as RunItem)).toEqual([]);
    }
  });
});

describe('the run timeline', () => {
  it('draws a lost segment and the segment that took over and closed the run', () => {
    const timeline = buildRunTimeline(crashedThenResumed, runId, t0 + 10_000, false);
    expect(timeline.bars.map((bar) => [bar.fence, bar.endedAs])).toEqual([[1, 'lost'], [2, 'closed']]);
    expect(timeline.bars[0]!.endMs).toBe(t0 + 3000);
    expect(timeline.bars[1]!.startMs).toBe(t0 + 4000);
  });

  it('tells a segment the demo killed from one whose lease ran out', () => {
    const killedThenResumed = makeLog([
      ...crashedThenResumedSpecs.slice(0, 4),
      [segmentKilledEventType, 1, { runId, fence: 1, operator: 'operator' }],
      ...crashedThenResumedSpecs.slice(4),
    ]);
    const timeline = buildRunTimeline(killedThenResumed, runId, t0 + 10_000, false);
    expect(timeline.bars.map((bar) => [bar.fence, bar.endedAs, bar.detail])).toEqual([
      [1, 'killed', 'by operator (demo)'], [2, 'closed', 'completed'],
    ]);
    expect(timeline.bars[0]!.markers)
      .toContainEqual({ atMs: t0 + 4000, kind: 'kill', label: 'killed by operator (demo)' });
    // The same run without the mark: a lease that ran out.
    expect(buildRunTimeline(crashedThenResumed, runId, t0 + 10_000, false).bars[0])
      .toMatchObject({ endedAs: 'lost', detail: 'superseded by a takeover' });
    // Killed and not yet taken over: killed once the poll says the lease is gone.
    const killedOnly = killedThenResumed.slice(0, 5);
    expect(buildRunTimeline(killedOnly, runId, t0 + 9000, true).bars[0]).toMatchObject({ endedAs: 'live' });
    expect(buildRunTimeline(killedOnly, runId, t0 + 9000, false).bars[0]).toMatchObject({ endedAs: 'killed' });
  });

  it('marks where a segment waited for a refused model request', () => {
    const retried = makeLog([
      ...crashedThenResumedSpecs.slice(0, 3),
      ['model-retry', 1, { stepNo: 0, retry: 1, of: 5, delayMs: 1000, error: { name: 'AI_APICallError', message: 'Rate limit reached', statusCode: 429 } }],
      ['text-delta', 1, { text: 'on' }],
      ['model-retry', 1, { stepNo: 0, retry: 2, of: 5, delayMs: 2000, error: { name: 'ModelStreamError', message: 'server_error: oops', statusCode: 500 }, redo: true, text: '' }],
      ['text-delta', 1, { text: 'one ' }],
      ['run-closed', 1, { status: 'completed', text: 'one ', partial: false }],
    ]);
    const timeline = buildRunTimeline(retried, runId, t0 + 9000, false);
    expect(timeline.bars.map((bar) => [bar.fence, bar.endedAs])).toEqual([[1, 'closed']]);
    expect(timeline.bars[0]!.markers).toEqual([
      { atMs: t0 + 3000, kind: 'retry', label: 'model refused (429): retry 1 of 5 in 1.0 s — Rate limit reached' },
      { atMs: t0 + 5000, kind: 'retry', label: 'model refused (500): retry 2 of 5 in 2.0 s, the step from its start — server_error: oops' },
    ]);
  });

  it('extends a live segment to now, and calls it lost once its lease is gone', () => {
    const events = crashedThenResumed.slice(0, 4);
    const live = buildRunTimeline(events, runId, t0 + 9000, true);
    expect(live.bars[0]).toMatchObject({ endedAs: 'live', endMs: t0 + 9000 });
    const expired = buildRunTimeline(events, runId, t0 + 9000, false);
    expect(expired.bars[0]).toMatchObject({ endedAs: 'lost', detail: 'lease expired', endMs: t0 + 3000 });
  });

  it('draws the model\'s thinking as part of its segment, never as an intent', () => {
    const log = makeLog(thoughtThenRepliedSpecs);
    const timeline = buildRunTimeline(log, runId, t0 + 20_000, false);
    expect(timeline.intents.map((m) => m.label)).toEqual(['user message', 'queued']);
    expect(timeline.bars.map((bar) => [bar.endedAs, bar.markers.map((m) => m.kind)])).toEqual([['closed', ['step', 'tool', 'step']]]);
    // Nor when the timeline holds no segment to draw it in, as with the reply's text.
    const segmentless = buildRunTimeline(log.filter((e) => e.type !== 'segment-started'), runId, t0 + 20_000, false);
    expect(segmentless.intents.map((m) => m.label)).toEqual([
      'user message', 'queued', 'step-finished', 'tool-result', 'step-finished', 'closed: completed',
    ]);
  });

  it('keeps a segment live that began after the poll that saw its predecessor\'s lease expire', () => {
    // The takeover's segment-started arrives over the stream before the next poll: the poll
    // still shows fence 1 with an expired lease, which says nothing about fence 2.
    const taken = crashedThenResumed.slice(0, 5);
    expect(taken.at(-1)).toMatchObject({ type: 'segment-started', fence: 2 });
    const timeline = buildRunTimeline(taken, runId, t0 + 9000, false, 1);
    expect(timeline.bars.map((bar) => [bar.fence, bar.endedAs])).toEqual([[1, 'lost'], [2, 'live']]);
    expect(timeline.bars[1]!.endMs).toBe(t0 + 9000);
    // Without the polled fence it was drawn lost ("lease expired") until the next poll.
    expect(buildRunTimeline(taken, runId, t0 + 9000, false).bars[1]).toMatchObject({ endedAs: 'lost' });
  });
});

describe('sidebarThreads', () => {
  const link = (id: string): ThreadLink => ({ id, title: id, lastRunStatus: 'completed' });
  const first = ['t9', 't8', 't7'].map(link);

  it('joins the older pages to the first page they were read after', () => {
    const older = { after: 't7', links: ['t6', 't5'].map(link), next: 't5' };
    expect(sidebarThreads(first, 't7', older)).toEqual({ links: [...first, ...older.links], next: 't5' });
    expect(sidebarThreads(first, 't7', { ...older, next: null }).next).toBeNull();
    expect(sidebarThreads(first, 't7', null)).toEqual({ links: first, next: 't7' });
  });

  it('drops them when the first page ends elsewhere, and shows no thread twice', () => {
    // A new thread pushed t7 off the first page: joined, the old pages would skip it.
    const older = { after: 't7', links: ['t6', 't5'].map(link), next: null };
    const moved = ['t10', 't9', 't8'].map(link);
    expect(sidebarThreads(moved, 't8', older)).toEqual({ links: moved, next: 't8' });
    expect(sidebarThreads(first, null, older)).toEqual({ links: first, next: null });
    const overlapping = { after: 't7', links: ['t7', 't6'].map(link), next: null };
    expect(sidebarThreads(first, 't7', overlapping).links.map((t) => t.id)).toEqual(['t9', 't8', 't7', 't6']);
  });
});
