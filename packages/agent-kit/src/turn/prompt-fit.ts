// A thread remembers its model's context window (ADR-0069). A refusal of a prompt for its length
// teaches the thread how many characters of prompt the model can take; every later prompt of the
// thread to the same model leaves out, before it is sent, what would not fit, by the same rules a
// refusal would have cut it by (ADR-0067), and says so to the thread's viewers in a `prompt-cut`
// event. A refusal that comes all the same teaches the window again.
import { appendEvent, type Lease } from '../lease/lease.js';
import type { Queryable } from '../store/db.js';
import { charsOverWindow, fitAfter, promptChars, trustedWindow, windowOf, type ContextWindow, type PromptFit } from './context-window.js';
import { buildMessages, type Step } from './journal.js';
import type { Segment } from './segment.js';

/** The event a prompt cut before it is sent writes: what it leaves out, as a model-retry's cut says it. */
export const promptCutEventType = 'prompt-cut';

/**
 * `fit` with what the thread's known window for `model` cannot hold left out, one cut at a time,
 * each a `prompt-cut` event; `fit` as it is when the window is unknown, another model's, or holds
 * the prompt, and as far as it could be cut when nothing more can be (the provider then decides).
 * Null when the lease is lost.
 */
export async function fitKnownWindow(
  s: Segment, at: { fit: PromptFit; journal: Step[]; system: string; model: string; known: ContextWindow | null },
): Promise<PromptFit | null> {
  const { journal, system, model } = at;
  const known = trustedWindow(at.known, model);
  if (!known) return at.fit;
  let fit = at.fit;
  for (;;) {
    const { droppedResults, resultCap } = fit;
    const messages = buildMessages(fit.history, journal, { reasoning: s.settings.sendReasoning, droppedResults, resultCap });
    const shed = charsOverWindow(promptChars(system, messages), model, known);
    const fitted = shed > 0 ? fitAfter(fit, journal, shed) : undefined;
    if (!fitted) return fit;
    const data = { stepNo: journal.length, window: { chars: known.chars }, ...fitted.said };
    s.rt.log?.({ msg: 'prompt cut to the known context window', runId: s.lease.runId, fence: s.lease.fence, ...data });
    if ((await appendEvent(s.rt.db, s.lease, promptCutEventType, data)) === null) return null;
    fit = fitted.fit;
  }
}

/**
 * After a refusal of a prompt of `refusedChars` characters for its length, cut to `next`: keep
 * what it teaches of the model's window for the segment's later steps and the thread's later
 * turns. False = the lease is lost.
 */
export async function learnWindow(
  s: Segment, at: { model: string; system: string; refusedChars: number; error: unknown; next: PromptFit; journal: Step[] },
): Promise<boolean> {
  const { droppedResults, resultCap } = at.next;
  const messages = buildMessages(at.next.history, at.journal, { reasoning: s.settings.sendReasoning, droppedResults, resultCap });
  s.contextWindow = windowOf(at.model, at.refusedChars, at.error, promptChars(at.system, messages));
  return noteContextWindow(s.rt.db, s.lease, s.contextWindow);
}

/**
 * Keep `window` as what the run's thread knows of its model's context window
 * (agent_kit_note_context_window, migration 0031). False = the lease is lost.
 */
export async function noteContextWindow(db: Queryable, lease: Lease, window: ContextWindow): Promise<boolean> {
  const rows = await db.query<{ ok: boolean }>(
    'select agent_kit_note_context_window($1, $2, $3, $4::jsonb) as ok',
    [lease.runId, lease.owner, lease.fence, JSON.stringify(window)],
  );
  return rows[0]?.ok === true;
}
