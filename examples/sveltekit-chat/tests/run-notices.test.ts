// What the chat says of a run besides its reply: the status region's sentences (never the reply
// itself, nothing new while it streams) and the effects a run was given up with, in plain words.
import { describe, expect, it } from 'vitest';
import { inDoubtNotices, type RunItem } from '../src/lib/thread-view';
import { announcements, crashedThenResumed, fold, makeLog, runId, type EventSpec } from './event-logs';

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
