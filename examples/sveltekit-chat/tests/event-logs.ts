// Event logs for the unit tests of the chat's fold and the operator timeline: one run's events in
// seq order, one second apart, the fold of such a log into a thread view, and what the chat's
// status region says of it.
import { announceEvent, applyEvent, emptyThreadView, type WireEvent } from '../src/lib/thread-view';

export const runId = '11111111-1111-4111-8111-111111111111';
export const t0 = Date.parse('2030-01-01T00:00:00Z');

export type EventSpec = [type: string, fence: number, data: Record<string, unknown>];

export function makeLog(specs: EventSpec[]): WireEvent[] {
  return specs.map(([type, fence, data], index) => ({
    seq: index + 1, runId, fence, type, data, createdAt: new Date(t0 + index * 1000).toISOString(),
  }));
}

export const crashedThenResumedSpecs: EventSpec[] = [
  ['message', 0, { role: 'user', text: 'hi', messageId: 'm1', runId }],
  ['run-queued', 0, { runId, turnNo: 1 }],
  ['segment-started', 1, { text: '', attempt: 1, fence: 1, owner: 'a' }],
  ['text-delta', 1, { text: 'one two ' }],
  ['segment-started', 2, { text: 'one ', attempt: 2, fence: 2, owner: 'b' }],
  ['text-delta', 2, { text: 'two three ' }],
  ['run-closed', 2, { status: 'completed', text: 'one two three ', partial: false }],
];
export const crashedThenResumed = makeLog(crashedThenResumedSpecs);

// Two model steps that think first (ADR-0070): a tool call, then the reply.
export const thoughtThenRepliedSpecs: EventSpec[] = [
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

export function fold(events: WireEvent[]) {
  const view = emptyThreadView();
  for (const event of events) applyEvent(view, event);
  return view;
}

/** What the chat's status region says after each event of `events`, applied in order. */
export function announcements(events: WireEvent[]): (string | null)[] {
  const view = emptyThreadView();
  return events.map((event) => (applyEvent(view, event) ? announceEvent(view, event) : null));
}
