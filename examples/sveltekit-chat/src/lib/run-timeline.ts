// A run's segments as a picture: from the thread's events of one run, one bar per segment
// (fence) from its segment-started to its last event, how it ended, and markers for tool
// results, questions, the demo's kills and operator intents. Pure, so the operator page redraws
// it on each event.
import { contextCutOf, type WireEvent } from './thread-view';

/**
 * The event the demo's "kill segment" writes on the killed segment's fence, in the transaction
 * that expires its lease: the reference app's own event type, not agent-kit's. See ADR-0038.
 */
export const segmentKilledEventType = 'demo-segment-killed';

/** Lost: its lease ran out (a process died); killed: an operator expired it (the demo). */
export type SegmentEnd = 'closed' | 'parked' | 'failed' | 'lost' | 'killed' | 'live';

export interface TimelineMarker {
  atMs: number;
  kind: 'tool' | 'question' | 'step' | 'intent' | 'kill' | 'retry';
  label: string;
}

export interface SegmentBar {
  fence: number;
  attempt: number;
  owner: string;
  startMs: number;
  endMs: number;
  endedAs: SegmentEnd;
  /** The park or close status, or why it was lost. */
  detail: string;
  /** The operator whose demo kill expired this segment's lease, if one did. */
  killedBy: string | null;
  markers: TimelineMarker[];
}

export interface RunTimeline {
  startMs: number;
  endMs: number;
  bars: SegmentBar[];
  /** Events that no segment wrote (fence 0): queued, answers, cancel, takeover, release. */
  intents: TimelineMarker[];
}

/** What a segment streams, its reply's text and its model's thinking (ADR-0070): never an intent. */
const streamedTypes = new Set(['text-delta', 'reasoning-delta']);

function describeIntent(event: WireEvent): string {
  switch (event.type) {
    case 'run-queued': return 'queued';
    case 'message': return 'user message';
    case 'input-received': return 'answer received';
    case 'cancel-requested': return 'cancel requested';
    case 'takeover-requested': return 'takeover requested';
    case 'run-released': return 'released';
    case 'run-parked': return `parked: ${String(event.data.status ?? '')}`;
    case 'run-closed': return `closed: ${String(event.data.status ?? '')}${event.data.partial ? ' (salvaged)' : ''}`;
    default: return event.type;
  }
}

function killerOf(event: WireEvent): string {
  return String(event.data.operator ?? 'an operator');
}

function segmentMarker(event: WireEvent, atMs: number): TimelineMarker | null {
  const { data } = event;
  if (event.type === 'tool-result') {
    return { atMs, kind: 'tool', label: `${String(data.toolName ?? 'tool')} → ${String(data.outcome ?? '')}` };
  }
  if (event.type === 'input-requested') {
    return { atMs, kind: 'question', label: data.kind === 'approval' ? `approval: ${String(data.toolName ?? '')}` : 'question' };
  }
  if (event.type === segmentKilledEventType) {
    return { atMs, kind: 'kill', label: `killed by ${killerOf(event)} (demo)` };
  }
  const cut = event.type === 'model-retry' || event.type === 'prompt-cut' ? contextCutOf(data) : null;
  if (cut) {
    const asked = cut.kind === 'earlier-turns' ? `with the newest ${cut.kept} of ${cut.of} earlier turns`
      : cut.kind === 'results-left-out' ? `without ${cut.dropped} of ${cut.of} answered tool results`
        : `with tool results cut to ${cut.cutTo} characters`;
    // A prompt-cut was cut before it was sent, to the window the thread learned (ADR-0069).
    const how = event.type === 'prompt-cut' ? 'sent' : 'asked again';
    return { atMs, kind: 'retry', label: `past the model's context window: ${how} ${asked}` };
  }
  if (event.type === 'model-retry') {
    const error = (data.error ?? {}) as { statusCode?: unknown; message?: unknown };
    const status = typeof error.statusCode === 'number' ? ` (${error.statusCode})` : '';
    const waitS = (Number(data.delayMs ?? 0) / 1000).toFixed(1);
    // Its streamed text dropped (ADR-0061), or the run parked until then (ADR-0062).
    const redo = data.redo === true ? ', the step from its start' : data.dueAt !== undefined ? ', parked until then' : '';
    return {
      atMs, kind: 'retry',
      label: `model refused${status}: retry ${String(data.retry)} of ${String(data.of)} in ${waitS} s${redo} — ${String(error.message ?? '')}`,
    };
  }
  if (event.type === 'step-finished') {
    const calls = Array.isArray(data.toolCalls) ? data.toolCalls.length : 0;
    return { atMs, kind: 'step', label: `step ${String(data.stepNo ?? '')}${calls ? ` · ${calls} tool call(s)` : ''}` };
  }
  return null;
}

/** A segment that ended without a word of its own: killed if the demo's kill marked it, else lost. */
function loseSegment(bar: SegmentBar, reason: string): void {
  bar.endedAs = bar.killedBy === null ? 'lost' : 'killed';
  bar.detail = bar.killedBy === null ? reason : `by ${bar.killedBy} (demo)`;
}

function endSegment(bar: SegmentBar, event: WireEvent): void {
  if (event.type === 'run-closed') {
    bar.endedAs = 'closed';
    bar.detail = String(event.data.status ?? '');
  } else if (event.type === 'run-parked') {
    bar.endedAs = 'parked';
    bar.detail = String(event.data.status ?? '');
  } else if (event.type === 'segment-failed') {
    bar.endedAs = 'failed';
    const error = event.data.error as { message?: unknown } | undefined;
    bar.detail = typeof error?.message === 'string' ? error.message : 'failed';
  }
}

/**
 * Build the timeline of `runId` from its thread's events (in seq order). `nowMs` extends a live
 * segment; `isRunning` says whether the run still holds a lease (else an open bar was lost), as
 * of a poll that saw the run at `polledFence`: a segment with a higher fence began after that
 * poll (the events arrive live, the poll once a second), so it is live whatever the poll said.
 */
export function buildRunTimeline(
  events: readonly WireEvent[], runId: string, nowMs: number, isRunning: boolean, polledFence?: number,
): RunTimeline {
  const bars: SegmentBar[] = [];
  const intents: TimelineMarker[] = [];
  let startMs = Number.POSITIVE_INFINITY;
  let lastMs = 0;
  for (const event of events) {
    if (event.runId !== runId) continue;
    const atMs = Date.parse(event.createdAt);
    startMs = Math.min(startMs, atMs);
    lastMs = Math.max(lastMs, atMs);
    const open = bars.at(-1);
    if (event.type === 'segment-started') {
      if (open && open.endedAs === 'live') loseSegment(open, 'superseded by a takeover');
      bars.push({
        fence: event.fence, attempt: Number(event.data.attempt ?? 0), owner: String(event.data.owner ?? ''),
        startMs: atMs, endMs: atMs, endedAs: 'live', detail: '', killedBy: null, markers: [],
      });
      continue;
    }
    if (open && event.fence !== 0 && event.fence === open.fence) {
      open.endMs = atMs;
      const marker = segmentMarker(event, atMs);
      if (marker) open.markers.push(marker);
      if (event.type === segmentKilledEventType) open.killedBy = killerOf(event);
      if (open.endedAs === 'live') endSegment(open, event);
      continue;
    }
    if (!streamedTypes.has(event.type)) intents.push({ atMs, kind: 'intent', label: describeIntent(event) });
    // A close without a segment is the reaper salvaging a run whose last segment died.
    if (event.type === 'run-closed' && open && open.endedAs === 'live') {
      loseSegment(open, 'died; salvaged by the reaper');
    }
  }
  const last = bars.at(-1);
  if (last && last.endedAs === 'live') {
    if (isRunning || (polledFence !== undefined && last.fence > polledFence)) last.endMs = Math.max(last.endMs, nowMs);
    else loseSegment(last, 'lease expired');
  }
  if (!Number.isFinite(startMs)) startMs = nowMs;
  const endMs = Math.max(lastMs, last?.endMs ?? 0, startMs + 1_000);
  return { startMs, endMs, bars, intents };
}

/** A marker of the picture as a line of text: when, on which fence (none for an intent), what. */
export interface TimelineEntry extends TimelineMarker {
  /** Since the run's first event. */
  offsetMs: number;
  fence: number | null;
}

/**
 * Every marker of the timeline, the segments' and the intents', in time order: the picture's
 * markers say what they are only to a pointer hovering them, so the page lists them as text too
 * (a keyboard, a screen reader, a search of the page).
 */
export function timelineEntries(timeline: RunTimeline): TimelineEntry[] {
  const entries: TimelineEntry[] = [
    ...timeline.intents.map((marker) => ({ ...marker, fence: null })),
    ...timeline.bars.flatMap((bar) => bar.markers.map((marker) => ({ ...marker, fence: bar.fence }))),
  ].map((entry) => ({ ...entry, offsetMs: entry.atMs - timeline.startMs }));
  // Stable: at the same instant an intent comes before a segment's marker, a fence before a later one.
  return entries.sort((a, b) => a.atMs - b.atMs || (a.fence ?? 0) - (b.fence ?? 0));
}
