// A thread opened at its latest turns (ADR-0049): the fold starts at a turn's first seq, sets
// aside what it reads about older turns, and once the older turns are read and joined in front,
// the view is the one a replay of the whole log builds. Tested over every turn's start as the
// place the view opens, on a log whose turns interleave.
import { describe, expect, it } from 'vitest';
import { applyEvent, emptyThreadView, joinEarlier, type ThreadView, type WireEvent } from '../src/lib/thread-view';

const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((x) => `${x.repeat(8)}-1111-4111-8111-111111111111`) as [string, string, string, string];

type Spec = [type: string, runId: string | null, data?: Record<string, unknown>];

const user = (runId: string, text: string): Spec => ['message', runId, { role: 'user', text, messageId: `m-${text}`, runId }];
const queued = (runId: string, turnNo: number): Spec => ['run-queued', runId, { runId, turnNo }];
const started = (runId: string, fence: number, text = ''): Spec => ['segment-started', runId, { text, attempt: 1, fence }];
const delta = (runId: string, text: string): Spec => ['text-delta', runId, { text }];
const closed = (runId: string, text: string, status = 'completed'): Spec => ['run-closed', runId, { status, text, partial: false }];

// Turn a asks a question; b is sent while a runs and queues behind it; a's answer comes after
// b's start; c is sent and closes; a's effect is resolved by an operator after everything.
const specs: Spec[] = [
  user(a, 'first'), queued(a, 1), started(a, 1), delta(a, 'thinking '),
  user(b, 'second'), queued(b, 2),
  ['input-requested', a, { id: 'q1', kind: 'question', question: 'Which colour?' }],
  ['run-parked', a, { status: 'waiting_input' }],
  user(a, 'blue'), ['input-received', a, { questionId: 'q1', data: { answer: 'blue' } }],
  started(a, 2, 'thinking '), ['tool-result', a, { toolCallId: 't1', toolName: 'paint', outcome: 'ok', output: 1 }],
  ['run-salvaged', a, { inDoubt: [{ key: 'k1', tool: 'paint' }] }], closed(a, 'thinking blue', 'aborted'),
  started(b, 1), delta(b, 'second answer'), closed(b, 'second answer'),
  user(c, 'third'), queued(c, 3), started(c, 1), closed(c, 'third answer'),
  ['effect-resolved', null, { runId: a, key: 'k1', tool: 'paint', happened: true }],
  user(d, 'fourth'), queued(d, 4), started(d, 1), delta(d, 'streaming'),
];
const log: WireEvent[] = specs.map(([type, runId, data = {}], index) => ({
  seq: index + 1, runId: type === 'effect-resolved' ? null : runId, fence: 0, type, data, createdAt: '2030-01-01T00:00:00Z',
}));
/** The seq each turn starts at: its user message, followed by its run-queued. */
const turnStarts = log.filter((e, i) => e.type === 'run-queued' && log[i - 1]?.type === 'message').map((e) => e.seq - 1);

function replay(fromSeq: number, throughSeq = log.length): ThreadView {
  const view = emptyThreadView(fromSeq);
  for (const event of log.slice(fromSeq - 1, throughSeq)) expect(applyEvent(view, event)).toBe(true);
  return view;
}

const whole = replay(1);
const texts = (view: ThreadView) => view.items.map((item) => (item.kind === 'user' ? `> ${item.text}` : `${item.runId[0]}: ${item.text}`));

describe('a thread opened at its latest turns', () => {
  it('shows only the turns from its start, without the answer to an older turn\'s question', () => {
    const latest = replay(turnStarts[1]!); // from b's message
    expect(texts(latest)).toEqual(['> second', 'b: second answer', '> third', 'c: third answer', '> fourth', 'd: streaming']);
    // a's answer, its second segment, tool, give-up, close and verdict wait aside, in seq order.
    expect(latest.aside.map((e) => e.type)).toEqual([
      'input-requested', 'run-parked', 'message', 'input-received', 'segment-started', 'tool-result', 'run-salvaged',
      'run-closed', 'effect-resolved',
    ]);
    expect(latest.cursor).toBe(log.length);
  });

  it('becomes the whole thread\'s view once the earlier turns are joined, wherever it opened', () => {
    for (const fromSeq of turnStarts) {
      const view = replay(fromSeq);
      joinEarlier(view, replay(1, fromSeq - 1));
      expect(view, `opened at seq ${fromSeq}`).toEqual(whole);
    }
    expect(whole.items.find((item) => item.kind === 'run' && item.runId === a)).toMatchObject({
      answered: [{ question: 'Which colour?', answer: 'blue' }], inDoubt: [{ key: 'k1', tool: 'paint', happened: true }],
      closed: { status: 'aborted' },
    });
  });

  it('joins earlier pages one at a time, each keeping aside what is older still', () => {
    for (const [first, second] of turnStarts.flatMap((x, i) => turnStarts.slice(i + 1).map((y) => [x, y] as const))) {
      if (first === 1) continue; // a page from seq 1 is the whole thread's start
      const view = replay(second);
      joinEarlier(view, replay(first, second - 1));
      joinEarlier(view, replay(1, first - 1));
      expect(view, `pages from ${first} and ${second}`).toEqual(whole);
    }
  });

  it('goes on live after a join: events after it apply as to the whole thread', () => {
    const more: WireEvent = { seq: log.length + 1, runId: d, fence: 1, type: 'run-closed', data: { status: 'completed', text: 'done', partial: false }, createdAt: '' };
    const view = replay(turnStarts[2]!);
    expect(applyEvent(view, more)).toBe(true);
    joinEarlier(view, replay(1, turnStarts[2]! - 1));
    const reference = replay(1);
    applyEvent(reference, more);
    expect(view).toEqual(reference);
  });

  it('refuses earlier turns that do not end right before the view starts', () => {
    const view = replay(turnStarts[2]!);
    expect(() => joinEarlier(view, replay(1, turnStarts[2]! - 2))).toThrow(/not right before/);
  });
});

// A reply regenerated (ADR-0091): turn b asked again as run e, which replaces b and c; e's first
// event is its turn-regenerated, b's message long before it.
describe('a thread with a regenerated reply', () => {
  const e = `${'e'.repeat(8)}-1111-4111-8111-111111111111`;
  const regenerated: Spec[] = [
    user(a, 'first'), queued(a, 1), started(a, 1), closed(a, 'A1'),
    user(b, 'second'), queued(b, 2), started(b, 1), closed(b, 'B1'),
    user(c, 'third'), queued(c, 3), started(c, 1), closed(c, 'C1'),
    ['turn-regenerated', e, { runId: e, regenerates: b, superseded: [b, c], messageId: 'm-second', text: 'second' }],
    queued(e, 4), started(e, 1), delta(e, 'B2'), closed(e, 'B2'),
  ];
  const events: WireEvent[] = regenerated.map(([type, runId, data = {}], index) => ({
    seq: index + 1, runId, fence: 0, type, data, createdAt: '2030-01-01T00:00:00Z',
  }));
  const play = (fromSeq: number, throughSeq = events.length) => {
    const view = emptyThreadView(fromSeq);
    for (const event of events.slice(fromSeq - 1, throughSeq)) expect(applyEvent(view, event)).toBe(true);
    return view;
  };
  const starts = events.filter((x) => x.type === 'message' || x.type === 'turn-regenerated').map((x) => x.seq);

  it('shows the new reply after the message it answers, and neither the old reply nor the turns after it', () => {
    const view = play(1);
    expect(texts(view)).toEqual(['> first', 'a: A1', '> second', 'e: B2']);
    expect(view.items[2]).toMatchObject({ kind: 'user', messageId: 'm-second', runId: e });
    expect(view.superseded).toEqual([b, c]);
    // The new reply knows the one it replaced: the page offers to show it.
    expect(view.items[3]).toMatchObject({ kind: 'run', runId: e, regenerates: { runId: b, edited: false } });
    // While the old turns are still there, before the event: they show, as they did live.
    expect(texts(play(1, 12))).toEqual(['> first', 'a: A1', '> second', 'b: B1', '> third', 'c: C1']);
  });

  it('opened at any turn and joined with the turns before, it is the whole thread\'s view', () => {
    for (const fromSeq of starts.slice(1)) {
      const view = play(fromSeq);
      expect(texts(view).slice(-2), `opened at seq ${fromSeq}`).toEqual(['> second', 'e: B2']);
      joinEarlier(view, play(1, fromSeq - 1));
      expect(view, `opened at seq ${fromSeq}`).toEqual(play(1));
    }
  });
});

// An earlier answer restored (ADR-0096): b's reply, regenerated as e (which replaced b and c),
// is put back; then the same with an edit (e answered the message edited).
describe('a thread with a restored answer', () => {
  const e = `${'e'.repeat(8)}-1111-4111-8111-111111111111`;
  const specsWith = (edited: boolean): Spec[] => [
    user(a, 'first'), queued(a, 1), started(a, 1), closed(a, 'A1'),
    user(b, 'second'), queued(b, 2), started(b, 1), closed(b, 'B1'),
    user(c, 'third'), queued(c, 3), started(c, 1), closed(c, 'C1'),
    ['turn-regenerated', e, {
      runId: e, regenerates: b, superseded: [b, c], messageId: edited ? 'm-edit' : 'm-second', text: edited ? 'second, edited' : 'second', edited,
    }],
    queued(e, 4), started(e, 1), delta(e, 'B2'), closed(e, 'B2'),
    ['turn-restored', b, { runId: b, replaces: e, superseded: [e], messageId: 'm-second', text: 'second' }],
  ];
  const eventsOf = (specs: Spec[]): WireEvent[] => specs.map(([type, runId, data = {}], index) => ({
    seq: index + 1, runId, fence: 0, type, data, createdAt: '2030-01-01T00:00:00Z',
  }));
  const play = (events: WireEvent[], fromSeq: number, throughSeq = events.length) => {
    const view = emptyThreadView(fromSeq);
    for (const event of events.slice(fromSeq - 1, throughSeq)) expect(applyEvent(view, event)).toBe(true);
    return view;
  };

  for (const edited of [false, true]) {
    const events = eventsOf(specsWith(edited));
    const starts = events.filter((x) => x.type === 'message' || x.type === 'turn-regenerated').map((x) => x.seq);

    it(`brings the answer back after the message it answered, the regeneration gone${edited ? ' (an edit)' : ''}`, () => {
      const before = play(events, 1, events.length - 1);
      expect(texts(before)).toEqual(['> first', 'a: A1', edited ? '> second, edited' : '> second', 'e: B2']);
      const view = play(events, 1);
      expect(texts(view)).toEqual(['> first', 'a: A1', '> second', 'b: B1']);
      expect(view.items[2]).toMatchObject({ kind: 'user', messageId: 'm-second', runId: b });
      expect(view.items[3]).toMatchObject({ kind: 'run', runId: b, restoredOver: e });
      expect(view.superseded).toEqual([c, e]);
      expect(view.stale).toBe(false);
    });

    it(`opened at its turn or before and joined with the turns before, it is the whole thread's view${edited ? ' (an edit)' : ''}`, () => {
      for (const fromSeq of starts.slice(1, 2)) {
        const view = play(events, fromSeq);
        expect(texts(view).slice(-2), `opened at seq ${fromSeq}`).toEqual(['> second', 'b: B1']);
        joinEarlier(view, play(events, 1, fromSeq - 1));
        expect(view, `opened at seq ${fromSeq}`).toEqual(play(events, 1));
      }
    });

    it(`opened after its turn, it is stale: the chat opens the thread again${edited ? ' (an edit)' : ''}`, () => {
      for (const fromSeq of starts.slice(2)) expect(play(events, fromSeq).stale, `opened at seq ${fromSeq}`).toBe(true);
    });
  }
});

