// The operator page's run timeline, drawn from a run's events: a lost segment and its successor,
// a segment the demo killed, a wait for a refused model request, a live segment, and the model's
// thinking as part of its segment; and the sidebar, which joins older pages of threads only to the
// first page they followed.
import { describe, expect, it } from 'vitest';
import { buildRunTimeline, segmentKilledEventType, timelineEntries } from '../src/lib/run-timeline';
import { sidebarThreads, threadStatusLabel, type ThreadLink } from '../src/lib/sidebar';
import { crashedThenResumed, crashedThenResumedSpecs, makeLog, runId, t0, thoughtThenRepliedSpecs } from './event-logs';

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

  it('lists every marker as text in time order, with its fence and its time since the run began', () => {
    const log = makeLog([
      ...crashedThenResumedSpecs.slice(0, 4),
      ['takeover-requested', 0, { runId, operator: 'operator' }],
      [segmentKilledEventType, 1, { runId, fence: 1, operator: 'operator' }],
      ['segment-started', 2, { text: 'one ', attempt: 2, fence: 2, owner: 'b' }],
      ['step-finished', 2, { stepNo: 0, text: 'one two', toolCalls: [{ toolName: 'record_effect' }] }],
      ['tool-result', 2, { toolCallId: 'c1', toolName: 'record_effect', outcome: 'completed', output: {} }],
      ['run-closed', 2, { status: 'completed', text: 'one two', partial: false }],
    ]);
    const entries = timelineEntries(buildRunTimeline(log, runId, t0 + 20_000, false));
    expect(entries.map(({ offsetMs, fence, kind, label }) => [offsetMs, fence, kind, label])).toEqual([
      [0, null, 'intent', 'user message'],
      [1000, null, 'intent', 'queued'],
      [4000, null, 'intent', 'takeover requested'],
      [5000, 1, 'kill', 'killed by operator (demo)'],
      [7000, 2, 'step', 'step 0 · 1 tool call(s)'],
      [8000, 2, 'tool', 'record_effect → completed'],
    ]);
    // No event, no entry.
    expect(timelineEntries(buildRunTimeline([], runId, t0, false))).toEqual([]);
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

describe('threadStatusLabel', () => {
  it('says a thread\'s open run in the reply\'s words, and nothing for a completed one', () => {
    expect(threadStatusLabel('completed')).toBeNull();
    expect(threadStatusLabel(null)).toBeNull();
    expect(threadStatusLabel('waiting_takeover')).toBe('held by an operator');
    expect(threadStatusLabel('waiting_input')).toBe('waiting for you');
    expect(threadStatusLabel('running')).toBe('replying');
    expect(threadStatusLabel('aborted')).toBe('stopped');
    expect(threadStatusLabel('queued')).toBe('queued');
    expect(threadStatusLabel('failed')).toBe('failed');
  });
});
