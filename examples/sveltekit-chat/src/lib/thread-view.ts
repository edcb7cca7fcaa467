// What the chat page shows, rebuilt from a thread's event log: a pure fold of events in seq
// order. Applying only the next seq makes it safe to feed from two streams at once (the chat
// POST and the GET replay) and to replay from 0 after a reload: the result is the same.
// A long thread opens at its latest turns (ADR-0049): the fold starts at their first seq, sets
// aside what it reads there about older turns, and joins the older turns in front on request.

import { isApproval } from 'agent-kit/client';

/** One event as the server sends it in an SSE `data:` line. */
export interface WireEvent {
  seq: number;
  runId: string | null;
  fence: number;
  type: string;
  data: Record<string, unknown>;
  createdAt: string;
}

export interface InputRequest {
  id: string;
  kind: 'question' | 'approval';
  question: string;
  toolName: string;
  input: unknown;
}

export interface ToolNote {
  toolCallId: string;
  toolName: string;
  outcome: string;
  output: unknown;
}

/**
 * An effect a run was given up with: it may or may not have happened (run-salvaged's inDoubt),
 * until an operator checks the outside system and records whether it did (effect-resolved).
 */
export interface InDoubtEffect {
  key: string;
  tool: string;
  /** The operator's verdict: null while nobody knows. */
  happened: boolean | null;
}

export interface UserItem {
  kind: 'user';
  key: string;
  /** The stored message's id (what a regenerate names), or null for an event without one. */
  messageId: string | null;
  text: string;
  runId: string | null;
}

export interface RunItem {
  kind: 'run';
  key: string;
  runId: string;
  /** queued, running, waiting_input, waiting_takeover, completed, failed, aborted. */
  status: string;
  text: string;
  /**
   * What its model thought, as it streamed it (ADR-0070), a blank line between two steps'
   * thinking: never part of `text`, kept across segments and retries (the thinking happened).
   */
  reasoning: string;
  /**
   * A step of the run finished, or the model was asked anew (a segment, a retry), since its last
   * reasoning: the next reasoning starts a new paragraph.
   */
  stepSinceReasoning: boolean;
  /**
   * How long its model thought, in the event log's own times (so a replay shows what the live
   * page did): each stretch of thinking runs from the run's event before it (when the model was
   * asked) to its first event after; 0 until one ended.
   */
  thoughtMs: number;
  /** The time of the run's latest event, and when its current thinking began (null: it is not thinking). */
  lastEventAt: number;
  thinkingSince: number | null;
  /** The time of its latest reasoning: where thinking cut short by a crash ended. */
  lastThoughtAt: number;
  /** The latest segment's attempt and fence: above 1 means the run was resumed after a crash. */
  attempt: number;
  fence: number;
  /** Some segment of this run took over from one that died (attempt above 1); sticky. */
  resumedAfterCrash: boolean;
  pending: InputRequest | null;
  answered: { question: string; answer: string }[];
  tools: ToolNote[];
  cancelRequested: boolean;
  takeoverRequested: boolean;
  /** Effects the run was given up with, not knowing whether they happened; empty otherwise. */
  inDoubt: InDoubtEffect[];
  /**
   * Set when the run closed: final, whether the text was salvaged from a dead run, and why it
   * failed when its segment said so (the provider's refusal, the step limit: ADR-0066), and the
   * operator who wrote the reply in its place (ADR-0114).
   */
  closed: { status: string; partial: boolean; cancelled: boolean; reason: string | null; operator?: string } | null;
  /**
   * The thread was past the model's context window: the run's model was given only the newest
   * `kept` of its `of` earlier turns (ADR-0067); sticky.
   */
  historyCut: { kept: number; of: number } | null;
  /** Then, no earlier turn left, the model was not given `dropped` of its `of` answered tool results; sticky. */
  resultsLeftOut: { dropped: number; of: number } | null;
  /** Then, nothing left to drop, the newest tool results were cut to this many characters; sticky. */
  resultsCutTo: number | null;
  /** Its last model step stopped at the model's output limit: the reply may end mid-sentence. */
  cutAtLimit: boolean;
  /** The run whose reply this one replaced (a regeneration, ADR-0091), and whether it edited the message. */
  regenerates: { runId: string; edited: boolean } | null;
  /** The run this one's reply was put back in place of, when it was last restored (ADR-0096). */
  restoredOver: string | null;
  /** The model's provider refused its request for now and the run waits to ask again (ADR-0057). */
  retrying: {
    retry: number; of: number; delayMs: number; statusCode: number | null;
    /** The model went silent (ModelStalledError), rather than refusing. */
    stalled: boolean;
    /** The reply's step starts again: the text it had streamed was dropped (ADR-0061). */
    redo: boolean;
  } | null;
}

export type Item = UserItem | RunItem;

export interface ThreadView {
  /** The last applied seq: the replay cursor. */
  cursor: number;
  items: Item[];
  /** The first seq the view holds: 1 for the whole thread, later when it opened at its latest turns. */
  fromSeq: number;
  /**
   * Events read since `fromSeq` about turns that began before it (turns interleave; an
   * operator's verdict on an effect comes late), in seq order: applied once their turn is joined.
   */
  aside: WireEvent[];
  /**
   * A user message about a run not in the view, waiting for the next event: a new turn's message
   * is followed by its run-queued at once; otherwise it answered an older turn's question.
   */
  held: WireEvent | null;
  /**
   * The runs a regenerated reply replaced (ADR-0091), gone from the view: turns read later from
   * earlier in the log (a page joined in front) leave them out too. A restored run leaves it.
   */
  superseded: string[];
  /** The items of those runs, in the view's order, kept for a restore that brings one back (ADR-0096). */
  hidden: Item[];
  /**
   * A restore brought back a run whose turn the view does not hold (it opened after it): the
   * view can no longer show the conversation, and is opened again.
   */
  stale: boolean;
}

/** A view of the thread from `fromSeq` on (its start by default). */
export function emptyThreadView(fromSeq = 1): ThreadView {
  return { cursor: fromSeq - 1, items: [], fromSeq, aside: [], held: null, superseded: [], hidden: [], stale: false };
}

/** How many turns the chat opens a thread at, and how many more each "show earlier" reads. */
export const turnsPerPage = 50;

/**
 * Where a page of a thread's turns starts (the `window` of GET /api/threads/:id?turns=): the seq
 * its replay starts at, its first turn, and whether any turns are before it.
 */
export interface TurnsOpening {
  fromSeq: number;
  firstTurn: number | null;
  earlier: boolean;
}

function str(value: unknown, fallback = ''): string {
  return typeof value === 'string' ? value : fallback;
}

function num(value: unknown, fallback = 0): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

/** The run an event is about: its column, or the runId in its data (events no segment wrote). */
function eventRunId(event: WireEvent): string | null {
  return event.runId ?? (str(event.data.runId) || null);
}

function findRun(view: ThreadView, runId: string | null): RunItem | undefined {
  if (!runId) return undefined;
  for (let index = view.items.length - 1; index >= 0; index--) {
    const item = view.items[index]!;
    if (item.kind === 'run' && item.runId === runId) return item;
  }
  return undefined;
}

function ensureRun(view: ThreadView, runId: string): RunItem {
  const found = findRun(view, runId);
  if (found) return found;
  const run: RunItem = {
    kind: 'run', key: `run-${runId}`, runId, status: 'queued', text: '', reasoning: '', stepSinceReasoning: false,
    thoughtMs: 0, lastEventAt: Number.NaN, thinkingSince: null, lastThoughtAt: Number.NaN,
    attempt: 0, fence: 0, resumedAfterCrash: false, pending: null, answered: [], tools: [], cancelRequested: false,
    takeoverRequested: false, inDoubt: [], closed: null, retrying: null, historyCut: null,
    resultsLeftOut: null, resultsCutTo: null, cutAtLimit: false, regenerates: null, restoredOver: null,
  };
  view.items.push(run);
  return run;
}

/**
 * Apply one event if it is the next in seq order. Returns false for an event already applied
 * (a duplicate from the other stream) or one past a gap (the caller's follower fills the gap).
 */
export function applyEvent(view: ThreadView, event: WireEvent): boolean {
  if (event.seq !== view.cursor + 1) return false;
  view.cursor = event.seq;
  if (view.held) {
    const held = view.held;
    view.held = null;
    if (event.type === 'run-queued' && eventRunId(event) === eventRunId(held)) applyMessage(view, held, eventRunId(held));
    else view.aside.push(held);
  }
  if (!setAside(view, event, true)) applyInOrder(view, event);
  return true;
}

/**
 * In a view that starts mid-thread, set an event about a turn before its start aside (true), or
 * hold a user message until the next event says whose it is. A run the view does not know is
 * older unless this is its run-queued.
 */
function setAside(view: ThreadView, event: WireEvent, mayHold: boolean): boolean {
  const runId = eventRunId(event);
  if (view.fromSeq <= 1 || !runId || event.type === 'run-queued' || event.type === 'turn-regenerated'
    || event.type === 'turn-restored' || findRun(view, runId)) return false;
  if (mayHold && event.type === 'message' && str(event.data.role) === 'user') view.held = event;
  else view.aside.push(event);
  return true;
}

/**
 * Join `earlier`, a view of the thread's events from an earlier seq up to `view.fromSeq - 1`, in
 * front of `view`. The events `view` set aside carry on `earlier`'s turns where they left off, in
 * seq order; those about turns older still stay aside for the next join.
 */
export function joinEarlier(view: ThreadView, earlier: ThreadView): void {
  if (earlier.cursor !== view.fromSeq - 1) {
    throw new Error(`earlier turns end at seq ${earlier.cursor}, not right before ${view.fromSeq}`);
  }
  if (earlier.held) earlier.aside.push(earlier.held);
  earlier.held = null;
  for (const event of view.aside) if (!setAside(earlier, event, false)) applyInOrder(earlier, event);
  const gone = (item: Item) => item.runId !== null && view.superseded.includes(item.runId);
  // (A message a regeneration took along is in the view already, made from its event.)
  const shown = new Set(view.items.map((item) => (item.kind === 'user' ? item.messageId : null)));
  const moved = (item: Item) => item.kind === 'user' && item.messageId !== null && shown.has(item.messageId);
  view.hidden.unshift(...earlier.hidden, ...earlier.items.filter((item) => gone(item) && !moved(item)));
  view.items.unshift(...earlier.items.filter((item) => !gone(item)));
  view.superseded = [...earlier.superseded, ...view.superseded];
  view.aside = earlier.aside;
  view.fromSeq = earlier.fromSeq;
}

function applyInOrder(view: ThreadView, event: WireEvent) {
  const { data } = event;
  const runId = eventRunId(event);
  switch (event.type) {
    case 'message':
      applyMessage(view, event, runId);
      break;
    case 'run-queued':
      if (runId) ensureRun(view, runId);
      break;
    case 'turn-regenerated':
      if (runId) applyRegenerated(view, event, runId);
      break;
    case 'turn-restored':
      if (runId) applyRestored(view, event, runId);
      break;
    case 'segment-started': {
      if (!runId) break;
      const run = ensureRun(view, runId);
      // A resumed segment continues from its own text; what the dead segment streamed past it is
      // replaced, never appended twice.
      run.text = str(data.text);
      run.attempt = num(data.attempt, 1);
      run.fence = num(data.fence, event.fence);
      // Attempts count claims since the last voluntary hand-off (a park, a slice), so attempt 2
      // means the previous segment died; fence 2 with attempt 1 is a resume after a question.
      run.resumedAfterCrash ||= run.attempt > 1;
      run.retrying = null;
      run.stepSinceReasoning = true; // a model asked anew thinks anew
      run.status = 'running';
      run.takeoverRequested = false;
      break;
    }
    case 'text-delta': {
      const run = findRun(view, runId);
      if (run && !run.closed) run.text += str(data.text);
      if (run) run.retrying = null;
      break;
    }
    default:
      applyRunEvent(view, event, runId);
  }
  const run = findRun(view, runId);
  if (run) timeThinking(run, event);
}

/** Keep `thoughtMs` (ADR-0072): a stretch of thinking ends with the run's next event of any kind. */
function timeThinking(run: RunItem, event: WireEvent) {
  const at = Date.parse(event.createdAt);
  if (Number.isNaN(at)) return;
  if (event.type === 'reasoning-delta') {
    if (run.closed || !str(event.data.text)) return;
    if (run.thinkingSince === null) run.thinkingSince = Number.isNaN(run.lastEventAt) ? at : run.lastEventAt;
    run.lastThoughtAt = at;
  } else if (run.thinkingSince !== null) {
    // Another segment taking over means the one that thought died: its thinking ended with the
    // last of it that was written, not when the takeover came.
    const end = event.type === 'segment-started' ? run.lastThoughtAt : at;
    run.thoughtMs += Math.max(0, end - run.thinkingSince);
    run.thinkingSince = null;
  }
  run.lastEventAt = at;
}

/**
 * The heading of a run's thinking once it is over: "Thought for 12 s", "Thought for 1 min 5 s",
 * "Thought for a moment" under half a second, "Thought" when no stretch of it has ended.
 */
export function thoughtSummary(run: RunItem): string {
  if (run.thoughtMs === 0 && run.thinkingSince !== null) return 'Thought';
  const seconds = Math.round(run.thoughtMs / 1000);
  if (seconds === 0) return 'Thought for a moment';
  if (seconds < 60) return `Thought for ${seconds} s`;
  const rest = seconds % 60;
  return `Thought for ${Math.floor(seconds / 60)} min${rest ? ` ${rest} s` : ''}`;
}

/**
 * What a run asked, as its record under the reply says it: a question's words, or for an
 * approval "Approve <tool>?" (the tool's name alone read like its result, "transfer_funds →
 * denied", just above the tool line that says the same).
 */
function askedOf(pending: NonNullable<RunItem['pending']>): string {
  return pending.kind === 'approval' ? `Approve ${pending.toolName}?` : pending.question || pending.toolName;
}

function applyMessage(view: ThreadView, event: WireEvent, runId: string | null) {
  const { data } = event;
  if (str(data.role) === 'assistant') return; // finals arrive as run-closed
  const run = findRun(view, runId);
  if (run && run.pending) {
    // A message sent while the run waited is that run's answer (ADR-0001).
    run.answered.push({ question: askedOf(run.pending), answer: str(data.text) });
    run.pending = null;
    return;
  }
  const messageId = str(data.messageId) || null;
  view.items.push({ kind: 'user', key: `msg-${messageId ?? event.seq}`, messageId, text: str(data.text), runId });
}

/**
 * A reply asked again (ADR-0091): the turns it replaced leave the view, and their first message
 * is the new run's (shown from the event when the view does not reach back to it).
 */
function applyRegenerated(view: ThreadView, event: WireEvent, runId: string) {
  const { data } = event;
  const messageId = str(data.messageId) || null;
  const kept = supersede(view, supersededOf(data), messageId, runId);
  if (!kept) view.items.push({ kind: 'user', key: `msg-${messageId ?? event.seq}`, messageId, text: str(data.text), runId });
  const regenerates = str(data.regenerates);
  if (regenerates) ensureRun(view, runId).regenerates = { runId: regenerates, edited: data.edited === true };
}

function supersededOf(data: Record<string, unknown>): string[] {
  return Array.isArray(data.superseded) ? data.superseded.filter((id): id is string => typeof id === 'string') : [];
}

/**
 * The items of the runs `gone` leave for `hidden`, but the user message `messageId`, which is
 * `runId`'s now: true when it was in the view.
 */
function supersede(view: ThreadView, gone: string[], messageId: string | null, runId: string): boolean {
  view.superseded.push(...gone);
  let kept = false;
  view.items = view.items.filter((item) => {
    if (item.kind === 'user' && messageId !== null && item.messageId === messageId) {
      item.runId = runId;
      kept = true;
      return true;
    }
    if (!(item.runId && gone.includes(item.runId))) return true;
    view.hidden.push(item);
    return false;
  });
  return kept;
}

/**
 * An earlier answer put back (ADR-0096): the runs it replaced leave the view, and its turn comes
 * back from `hidden` at the conversation's end (every turn after its place is gone), with the
 * message it answers. A view that does not hold its turn is stale.
 */
function applyRestored(view: ThreadView, event: WireEvent, runId: string) {
  const { data } = event;
  const messageId = str(data.messageId) || null;
  view.superseded = view.superseded.filter((id) => id !== runId);
  const kept = supersede(view, supersededOf(data), messageId, runId);
  const isMessage = (item: Item) => messageId !== null && item.kind === 'user' && item.messageId === messageId;
  // Its message first, unless the view kept it: a plain regeneration took it along, so it was
  // hidden with another run.
  const message = kept ? [] : view.hidden.filter(isMessage);
  const back = [...message, ...view.hidden.filter((item) => item.runId === runId && !isMessage(item))];
  view.hidden = view.hidden.filter((item) => !back.includes(item));
  const run = back.find((item): item is RunItem => item.kind === 'run');
  if (!run || (!kept && message.length === 0)) {
    view.stale = true;
    return;
  }
  for (const item of back) item.runId = runId;
  view.items.push(...back);
  run.restoredOver = str(data.replaces) || null;
}

function applyRunEvent(view: ThreadView, event: WireEvent, runId: string | null) {
  const run = findRun(view, runId);
  if (!run) return;
  const { data } = event;
  // Any later event of the run means the wait for a retry is over, but the park that follows
  // one too long for its segment (ADR-0062): that wait ends when the next segment starts.
  const waiting = run.retrying;
  run.retrying = null;
  switch (event.type) {
    case 'prompt-cut': // cut before it was sent, to the window the thread learned (ADR-0069)
    case 'model-retry': {
      // Asked again at once with less of the conversation (ADR-0067): no wait to show.
      const cut = contextCutOf(data);
      if (cut) {
        if (cut.kind === 'earlier-turns') run.historyCut = { kept: cut.kept, of: cut.of };
        else if (cut.kind === 'results-left-out') run.resultsLeftOut = { dropped: cut.dropped, of: cut.of };
        else run.resultsCutTo = cut.cutTo;
        break;
      }
      if (event.type === 'prompt-cut') break;
      const refusal = (data.error ?? {}) as Record<string, unknown>;
      const statusCode = typeof refusal.statusCode === 'number' ? refusal.statusCode : null;
      run.retrying = {
        retry: num(data.retry, 1), of: num(data.of, 1), delayMs: num(data.delayMs, 0), statusCode,
        stalled: refusal.name === 'ModelStalledError', redo: data.redo === true,
      };
      // The text the retry goes on from (ADR-0061): a step started again drops what it streamed.
      if (typeof data.text === 'string' && !run.closed) run.text = data.text;
      run.stepSinceReasoning = true;
      break;
    }
    case 'input-requested':
      run.pending = {
        id: str(data.id), kind: data.kind === 'approval' ? 'approval' : 'question', question: str(data.question),
        toolName: str(data.toolName), input: data.input,
      };
      break;
    case 'input-received': {
      if (run.pending && run.pending.id === str(data.questionId)) {
        const answer = (data.data ?? {}) as Record<string, unknown>;
        const shown = typeof answer.approved === 'boolean' ? (answer.approved ? 'approved' : 'denied') : str(answer.answer, str(answer.text));
        run.answered.push({ question: askedOf(run.pending), answer: shown });
        run.pending = null;
      }
      break;
    }
    case 'reasoning-delta':
      run.retrying = null; // asked again, the model answers: thinking first
      if (run.closed || !str(data.text)) break;
      if (run.stepSinceReasoning && run.reasoning) run.reasoning += '\n\n';
      run.reasoning += str(data.text);
      run.stepSinceReasoning = false;
      break;
    case 'step-finished':
      // The reply stops where the model's output limit cut it (ADR-0068): the last step says.
      run.cutAtLimit = data.finishReason === 'length';
      run.stepSinceReasoning = true;
      break;
    case 'tool-result':
      run.tools.push({ toolCallId: str(data.toolCallId), toolName: str(data.toolName), outcome: str(data.outcome), output: data.output });
      break;
    case 'run-parked':
      run.status = str(data.status, run.status);
      if (data.dueAt !== undefined && run.status === 'queued') run.retrying = waiting;
      break;
    case 'run-released':
      run.status = 'queued';
      break;
    case 'cancel-requested':
      run.cancelRequested = true;
      break;
    case 'takeover-requested':
      run.takeoverRequested = true;
      break;
    case 'run-salvaged':
      // Given up: what its tools may have done without telling comes before its run-closed.
      run.inDoubt = readInDoubt(data.inDoubt);
      break;
    case 'effect-resolved': {
      // An operator's verdict, usually long after the close. An effect the run went on past
      // (the model was told "in doubt") was not in run-salvaged: it is named here first.
      if (typeof data.happened !== 'boolean' || !str(data.tool)) break;
      const key = str(data.key);
      const effect = run.inDoubt.find((e) => e.key === key);
      if (effect) effect.happened = data.happened;
      else run.inDoubt.push({ key, tool: str(data.tool), happened: data.happened });
      break;
    }
    case 'run-closed':
      run.status = str(data.status);
      run.text = str(data.text);
      if (run.pending) {
        // Closed while it waited (a cancel): the question stays in the record, unanswered.
        run.answered.push({ question: askedOf(run.pending), answer: 'not answered' });
      }
      run.pending = null;
      run.closed = {
        status: run.status, partial: data.partial === true, cancelled: run.cancelRequested, reason: failureReason(data.error),
        ...(typeof data.operator === 'string' ? { operator: data.operator } : {}),
      };
      break;
  }
}

/** A failed run's reason in the words of the person chatting, from its run-closed `error`. */
export function failureReason(error: unknown): string | null {
  if (typeof error === 'string' && error !== '') return `The turn ${error}.`; // "stopped after 16 model steps"
  if (error === null || typeof error !== 'object') return null;
  const { statusCode, message } = error as { statusCode?: unknown; message?: unknown };
  const status = typeof statusCode === 'number' ? ` (${statusCode})` : '';
  return `The model's provider refused the request${status}${typeof message === 'string' && message ? `: ${message}` : '.'}`;
}

function readInDoubt(value: unknown): InDoubtEffect[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((entry: unknown) => {
    const effect = (entry ?? {}) as Record<string, unknown>;
    return str(effect.tool) ? [{ key: str(effect.key), tool: str(effect.tool), happened: null }] : [];
  });
}

/** One line under a reply about what its tools may have done: `checked` once an operator said. */
export interface EffectNotice {
  text: string;
  checked: boolean;
}

function effectSentence(tool: string, count: number, happened: boolean | null): string {
  const calls = count === 1 ? tool : `${count} calls of ${tool}`;
  if (happened === null) {
    return count === 1
      ? `The outcome of ${tool} is unknown: check it before trying again.`
      : `The outcome of ${calls} is unknown: check them before trying again.`;
  }
  return happened
    ? `Checked since: ${calls} went through.`
    : `Checked since: ${calls} did not go through; you can ask again.`;
}

/**
 * One sentence per tool and outcome for the person chatting: while nobody knows whether a tool
 * cut short did its thing, they should look before asking again (which would run it again); once
 * an operator has checked, what they found. Empty when nothing was in doubt.
 */
export function inDoubtNotices(run: RunItem): EffectNotice[] {
  const groups = new Map<string, { tool: string; happened: boolean | null; count: number }>();
  for (const effect of run.inDoubt) {
    const id = `${effect.happened}:${effect.tool}`;
    const group = groups.get(id) ?? { tool: effect.tool, happened: effect.happened, count: 0 };
    group.count++;
    groups.set(id, group);
  }
  return [...groups.values()].map(({ tool, happened, count }) => ({
    text: effectSentence(tool, count, happened), checked: happened !== null,
  }));
}

/** The run the composer refers to: the thread's open one (for Cancel), if any. */
export function openRun(view: ThreadView): RunItem | undefined {
  for (let index = view.items.length - 1; index >= 0; index--) {
    const item = view.items[index]!;
    if (item.kind === 'run' && !item.closed) return item;
  }
  return undefined;
}

/**
 * What the composer's placeholder says: while the thread's run waits for input, a message sent
 * is its answer, and to an approval only a plain "yes" approves (agent-kit's rule: "yes please,
 * but wait" is a no). Said before the person writes, not discovered as a denied tool call.
 */
export function composerPlaceholder(view: ThreadView): string {
  const run = openRun(view);
  if (run?.status !== 'waiting_input') return 'Write a message';
  return run.pending?.kind === 'approval'
    ? 'Reply "yes" to approve the tool call; anything else denies it'
    : 'Write your answer';
}

/**
 * Whether sending `draft` now denies a tool call: the thread's run waits for an approval and the
 * draft is not a bare yes by agent-kit's rule (`isApproval`). "Sure, go ahead" reads like a yes
 * and is a no; the page says so on its Send button while the person writes, not after.
 */
export function draftDenies(view: ThreadView, draft: string): boolean {
  const run = openRun(view);
  return run?.status === 'waiting_input' && run.pending?.kind === 'approval' && draft.trim() !== '' && !isApproval(draft);
}

/**
 * A short label for how a run ended or where it stands, in the words of the person chatting
 * (a salvaged run is one cut short; the operator page keeps the technical terms).
 */
export function runBadge(run: RunItem): string | null {
  if (run.closed) {
    if (run.closed.status === 'aborted' && run.closed.cancelled) return 'cancelled';
    if (run.closed.status === 'aborted' && run.closed.partial) return 'cut short by an interruption';
    if (run.closed.status !== 'completed') return run.closed.status;
    return run.closed.operator ? 'answered by an operator' : null;
  }
  if (run.status === 'waiting_input') return run.pending?.kind === 'approval' ? 'waiting for approval' : 'waiting for your answer';
  if (run.status === 'waiting_takeover') return 'held by an operator';
  if (run.takeoverRequested) return 'operator taking over';
  if (run.cancelRequested) return 'cancelling';
  if (run.status === 'queued') return 'queued';
  return null;
}

/** What the person chatting reads while the run waits to ask its model again, or null. */
export function retryNotice(run: RunItem): string | null {
  if (!run.retrying || run.closed) return null;
  const { retry, of, delayMs, statusCode, stalled, redo } = run.retrying;
  const seconds = Math.max(1, Math.round(delayMs / 1000));
  // Busy (a rate limit, an overload, or no status at all), failing (another 5xx), or silent.
  const what = stalled ? 'The model stopped answering'
    : statusCode !== null && statusCode >= 500 && ![503, 529].includes(statusCode) ? "The model's provider had an error"
      : "The model's provider is busy";
  return `${what}${statusCode === null ? '' : ` (${statusCode})`}: trying again in ${seconds} s (${retry} of ${of})` +
    `${redo ? ', rewriting the unfinished part of the reply' : ''}.`;
}

/** What a model-retry event left out of the prompt to fit the model's context window (ADR-0067). */
export type ContextCut =
  | { kind: 'earlier-turns'; kept: number; of: number }
  | { kind: 'results-left-out'; dropped: number; of: number }
  | { kind: 'results-cut'; cutTo: number };

/** The cut a model-retry or prompt-cut event's data names, or null for a retry of another kind. */
export function contextCutOf(data: Record<string, unknown>): ContextCut | null {
  const turns = (data.earlierTurns ?? null) as { kept?: unknown; of?: unknown } | null;
  const results = (data.toolResults ?? null) as { dropped?: unknown; of?: unknown; cutTo?: unknown } | null;
  if (typeof turns?.kept === 'number' && typeof turns.of === 'number') return { kind: 'earlier-turns', kept: turns.kept, of: turns.of };
  if (typeof results?.dropped === 'number' && typeof results.of === 'number') {
    return { kind: 'results-left-out', dropped: results.dropped, of: results.of };
  }
  return typeof results?.cutTo === 'number' ? { kind: 'results-cut', cutTo: results.cutTo } : null;
}

/** What the reader should know of a run whose thread was past the model's context window (ADR-0067). */
export function historyCutNotice(run: RunItem): string | null {
  if (!run.historyCut && !run.resultsLeftOut && run.resultsCutTo === null) return null;
  const notGiven: string[] = [];
  if (run.historyCut) {
    const { kept, of } = run.historyCut;
    notGiven.push(kept > 0 ? `was given only the newest ${kept} of the ${of} earlier turns`
      : of === 1 ? 'was not given the earlier turn' : `was given none of the ${of} earlier turns`);
  }
  if (run.resultsLeftOut) {
    const { dropped, of } = run.resultsLeftOut;
    notGiven.push(`was not given ${dropped === of ? (of === 1 ? 'the' : `all ${of}`) : `${dropped} of the ${of}`} tool result${of === 1 ? '' : 's'} it had already read`);
  }
  if (run.resultsCutTo !== null) notGiven.push(`was given only the first ${run.resultsCutTo} characters of a long tool result`);
  return `This conversation is longer than the model can take: it ${notGiven.join(', and ')}.`;
}

/** Whether an earlier turn of the thread is still open, so `run` waits for it (ADR-0001). */
function waitsBehindAnother(view: ThreadView, run: RunItem): boolean {
  for (const item of view.items) {
    if (item === run) return false;
    if (item.kind === 'run' && !item.closed) return true;
  }
  return false;
}

/**
 * What the chat's status region says after `event` was applied: one short sentence when the
 * event's run waits behind another, starts replying, asks, is held or ends, and null when that
 * is unchanged news (streamed text or thinking, a step or tool of a running run, the give-up that
 * its close reports) or there is nothing to say (a turn queued with none ahead starts at once).
 * Never the reply itself, which a screen reader would otherwise read out piece by piece as it
 * streams (ADR-0038).
 */
export function announceEvent(view: ThreadView, event: WireEvent): string | null {
  if (event.type === 'text-delta' || event.type === 'reasoning-delta' || event.type === 'run-salvaged') return null;
  // (Said also when the view did not hold the run: it opens the thread again, without a word.)
  if (event.type === 'turn-restored') return 'An earlier answer is back in the conversation.';
  const run = findRun(view, eventRunId(event));
  if (!run) return null;
  if (event.type === 'effect-resolved') {
    const effect = run.inDoubt.find((e) => e.key === str(event.data.key));
    return effect && effect.happened !== null ? effectSentence(effect.tool, 1, effect.happened) : null;
  }
  if (run.closed) {
    if (run.closed.cancelled) return 'Reply cancelled.';
    if (run.closed.partial) {
      return ['The reply was cut short by an interruption.', ...inDoubtNotices(run).map((n) => n.text)].join(' ');
    }
    if (run.closed.status === 'completed') return run.closed.operator ? 'An operator replied.' : 'Assistant replied.';
    return run.closed.status === 'failed' ? 'The assistant could not reply.' : 'The reply was stopped.';
  }
  if (run.pending?.kind === 'approval') return `Assistant asks you to approve ${run.pending.toolName}.`;
  if (run.pending) return `Assistant asks: ${run.pending.question}`;
  if (run.status === 'waiting_takeover') return 'An operator is handling the reply.';
  if (event.type === 'run-queued' && waitsBehindAnother(view, run)) {
    return 'Your message is queued; it will be answered after the current reply.';
  }
  // Said when a segment starts, not again on each event of a running run (a step finished, a
  // tool's result): those said it over a sentence about another turn (queued behind it).
  return run.status === 'running' && event.type === 'segment-started' ? 'Assistant is replying…' : null;
}
