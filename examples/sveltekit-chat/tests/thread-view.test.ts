// Unit tests of the chat's event fold: events apply once and in seq order (so two streams and a
// replay agree), a resumed segment replaces the dead one's text, what the model thought stays
// apart from its reply, and each way a run can end is labelled as such.
import { describe, expect, it } from 'vitest';
import { buildRunTimeline } from '../src/lib/run-timeline';
import {
  applyEvent, composerPlaceholder, draftDenies, emptyThreadView, openRun, historyCutNotice, retryNotice, runBadge, thoughtSummary, type RunItem,
} from '../src/lib/thread-view';
import { announcements, crashedThenResumed, fold, makeLog, runId, t0, thoughtThenRepliedSpecs, type EventSpec } from './event-logs';

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

  it('says in the composer what a message sent while the run waits will do: an answer, or yes to approve', () => {
    const waitingFor = (pending: Record<string, unknown>) => fold(makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['input-requested', 1, pending],
      ['run-parked', 1, { status: 'waiting_input' }],
    ]));
    expect(composerPlaceholder(emptyThreadView())).toBe('Write a message');
    expect(composerPlaceholder(waitingFor({ id: 'q1', kind: 'question', question: 'Which?' }))).toBe('Write your answer');
    // A message to an approval approves only when it is a plain yes (it was not said, and "yes
    // please go ahead" denied the tool call).
    const approval = waitingFor({ id: 'c1', kind: 'approval', toolName: 'transfer_funds', input: {} });
    expect(composerPlaceholder(approval)).toBe('Reply "yes" to approve the tool call; anything else denies it');
    // And the Send button says it while the person writes: "sure" reads like a yes and denies.
    expect(draftDenies(approval, 'sure, go ahead')).toBe(true);
    expect(draftDenies(approval, 'Sure')).toBe(true);
    expect(draftDenies(approval, ' Yes! ')).toBe(false);
    expect(draftDenies(approval, 'ok')).toBe(false);
    expect(draftDenies(approval, '   ')).toBe(false);
    expect(draftDenies(waitingFor({ id: 'q1', kind: 'question', question: 'Which?' }), 'sure')).toBe(false);
    expect(draftDenies(emptyThreadView(), 'sure')).toBe(false);
    applyEvent(approval, { ...crashedThenResumed[0]!, seq: 4, type: 'input-received', data: { questionId: 'c1', data: { approved: false } } });
    // Recorded as the question it was (the tool's name alone read like the tool line below it).
    expect((approval.items[0] as RunItem).answered).toEqual([{ question: 'Approve transfer_funds?', answer: 'denied' }]);
    applyEvent(approval, { ...crashedThenResumed[0]!, seq: 5, type: 'run-closed', data: { status: 'completed', text: 'ok' } });
    expect(composerPlaceholder(approval)).toBe('Write a message');
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

  it('says how long the model thought, from the log\'s own times, the same live and replayed', () => {
    // One event a second: asked at the segment's start (t0+2 s), thinking until the step ended
    // (t0+5 s); asked again with the tool's result (t0+6 s), thinking until the reply (t0+8 s).
    const log = makeLog(thoughtThenRepliedSpecs);
    const after = (count: number) => fold(log.slice(0, count)).items[1] as RunItem;
    expect([4, 5, 6, 7, 8, 9, 10].map((count) => after(count).thoughtMs)).toEqual([0, 0, 3_000, 3_000, 3_000, 5_000, 5_000]);
    expect(thoughtSummary(after(5))).toBe('Thought'); // no stretch of thinking has ended yet
    expect(thoughtSummary(after(6))).toBe('Thought for 3 s');
    expect(thoughtSummary(after(10))).toBe('Thought for 5 s');
    expect(fold([...log, ...log])).toEqual(fold(log));

    // A segment that dies while thinking thought until the last of it was written, not until
    // the takeover a lease later; a cancel asked for ends it.
    const crashed = fold(makeLog([
      ['run-queued', 0, { runId, turnNo: 1 }],
      ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
      ['reasoning-delta', 1, { text: 'Hmm. ' }],
      ['reasoning-delta', 1, { text: 'Still. ' }],
      ['segment-started', 2, { text: '', attempt: 2, fence: 2, owner: 'b' }],
      ['reasoning-delta', 2, { text: 'Again.' }],
      ['cancel-requested', 0, { runId }],
      ['run-closed', 2, { status: 'aborted', text: '', partial: false }],
    ])).items[0] as RunItem;
    expect(crashed.thoughtMs).toBe(2_000 + 2_000);

    // Thinking without a time (an event from an older server) or empty is not timed.
    const untimed = makeLog(thoughtThenRepliedSpecs).map((event) => ({ ...event, createdAt: 'not a time' }));
    expect((fold(untimed).items[1] as RunItem).thoughtMs).toBe(0);
    const times = (ms: number) => thoughtSummary({ ...after(10), thoughtMs: ms, thinkingSince: null });
    expect([0, 400, 1_600, 59_400, 60_000, 125_000].map(times)).toEqual([
      'Thought for a moment', 'Thought for a moment', 'Thought for 2 s', 'Thought for 59 s', 'Thought for 1 min',
      'Thought for 2 min 5 s',
    ]);
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

