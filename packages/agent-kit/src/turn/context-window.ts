// A prompt past the model's context window (ADR-0067). A thread grows by a turn each time it is
// used, and a tool may return more than a model can read: one day the prompt no longer fits, and
// the provider rejects it. Such a request is asked again with less in it: the oldest earlier
// turns first, then the turn's tool results the model has answered already, then its newest
// results cut short; the turn's user message and its model steps are never cut.
import type { ModelMessage } from 'ai';
import type { Step, ToolStep } from './journal.js';
import { rejectedRequest } from './model-retry.js';

/**
 * The provider rejected the request because the prompt is past the model's context window:
 * OpenAI's code `context_length_exceeded` (chat completions and the Responses API), or the words
 * of Anthropic ("prompt is too long"), Google ("input token count … exceeds the maximum"),
 * Mistral, xAI, Bedrock and OpenAI-compatible servers (vLLM, llama.cpp, LiteLLM); or a 413. Only
 * a request rejected for good (a 4xx not 408, 409 or 429, not retryable).
 */
export function pastContextWindow(error: unknown): boolean {
  if (!rejectedRequest(error)) return false;
  const e = error as { statusCode?: unknown; type?: unknown; message?: unknown; data?: { error?: { code?: unknown } } };
  if (e.statusCode === 413 || e.data?.error?.code === 'context_length_exceeded' || e.type === 'context_length_exceeded') return true;
  return typeof e?.message === 'string' && tooLongWords.some((words) => words.test(e.message as string));
}

const tooLongWords = [
  /context[ _-]?(length|window|size)/i, /prompt is too long/i, /input is too long/i, /(prompt|input) too long/i,
  /maximum (prompt|input) length/i, /too many (input |prompt )?tokens/i,
  /token count .* exceeds the maximum/i, /exceeds the (maximum|max) (number of )?(input )?tokens/i,
];

/**
 * The prompt's size and the model's limit in tokens, when the refusal gives both: the largest
 * number in it is the prompt (or prompt and completion) and the largest below that the limit, as
 * in "maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens" and
 * "prompt is too long: 208310 tokens > 200000 maximum". Digits that are part of a name are not
 * numbers: a model's ("claude-3-5-sonnet-20241022", "gpt-4-0613") or a request's id, which a
 * proxy may add to the words, would otherwise pass for the prompt's size.
 */
export function tokensOverLimit(error: unknown): { used: number; limit: number } | undefined {
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message !== 'string') return undefined;
  const numbers = [...message.matchAll(standingAlone)].map((m) => Number(m[0].replaceAll(',', ''))).filter((n) => n >= 64);
  const used = Math.max(...numbers);
  const limit = Math.max(...numbers.filter((n) => n < used));
  return Number.isFinite(limit) && limit > 0 ? { used, limit } : undefined;
}

/** A number on its own: not next to a letter, a digit, `_`, `-` or `.` (a date or a version is not a count either). */
const standingAlone = /(?<![\w.-])\d{1,3}(?:,\d{3})+(?![\w-]|\.\d)|(?<![\w.-])\d+(?![\w-]|\.\d)/g;

/** How many earlier turns `history` holds: its user messages but the last (the current turn's). */
export function earlierTurns(history: readonly ModelMessage[]): number {
  return Math.max(0, history.filter((m) => m.role === 'user').length - 1);
}

/** `history` with only its newest `keep` earlier turns, cut at a user message. */
export function keepEarlierTurns(history: readonly ModelMessage[], keep: number): ModelMessage[] {
  const starts = history.flatMap((m, i) => (m.role === 'user' ? [i] : []));
  if (keep >= starts.length - 1) return [...history];
  return history.slice(starts[starts.length - 1 - keep]!);
}

/** A smaller history to ask again with, and how many earlier turns it keeps of how many. */
export interface HistoryCut {
  history: ModelMessage[];
  kept: number;
  of: number;
}

/**
 * How many characters a prompt of `promptChars` characters must shed after `error`, a refusal
 * for its length: the share of it the refusal says is over the limit, and a twentieth of it more.
 * Undefined when the refusal gives no counts: then each cut takes half of what it may.
 */
export function charsToShed(promptChars: number, error: unknown): number | undefined {
  const over = tokensOverLimit(error);
  return over ? promptChars * ((over.used - over.limit) / over.used + 0.05) : undefined;
}

/**
 * How many of the oldest pieces (their sizes in characters, oldest first) to leave out to shed
 * `shed` characters (see charsToShed), half of them when undefined. At least one; none when
 * there are none.
 */
export function oldestToDrop(sizes: readonly number[], shed: number | undefined): number {
  if (shed === undefined) return Math.ceil(sizes.length / 2);
  let n = 0;
  for (let dropped = 0; n < sizes.length && dropped < shed; n++) dropped += sizes[n]!;
  return Math.max(n, Math.min(1, sizes.length));
}

/**
 * The history for the next request when its prompt must shed `shed` characters (see
 * charsToShed): without its oldest earlier turns. Undefined when it has none left to drop.
 */
export function cutToFit(history: readonly ModelMessage[], shed: number | undefined): HistoryCut | undefined {
  const of = earlierTurns(history);
  if (of === 0) return undefined;
  const starts = history.flatMap((m, i) => (m.role === 'user' ? [i] : []));
  const sizes = starts.slice(0, of).map((start, i) => JSON.stringify(history.slice(start, starts[i + 1])).length);
  const kept = of - oldestToDrop(sizes, shed);
  return { history: keepEarlierTurns(history, kept), kept, of };
}

/**
 * The tool results of this turn that a prompt may leave out once no earlier turn is left: those
 * the model has answered already (before its last step), oldest first. The newest, which the
 * next step is asked about, are always sent.
 */
export function droppableResults(journal: readonly Step[]): ToolStep[] {
  const lastModel = journal.findLastIndex((step) => step.kind === 'model');
  return journal.slice(0, Math.max(0, lastModel)).filter((step): step is ToolStep => step.kind === 'tool');
}

/**
 * When a prompt with no earlier turn left must shed `shed` characters: how many of the turn's
 * droppable results (oldest first) to leave out, more than the `dropped` already left out.
 * Undefined when every one is already.
 */
export function dropResultsToFit(journal: readonly Step[], dropped: number, shed: number | undefined): number | undefined {
  const sizes = droppableResults(journal).slice(dropped).map((step) => JSON.stringify(step.output ?? null).length);
  if (sizes.length === 0) return undefined;
  return dropped + oldestToDrop(sizes, shed);
}

/** What a prompt says in place of a tool result it leaves out. */
export function droppedResultNote(step: ToolStep): string {
  const chars = JSON.stringify(step.output ?? null).length;
  return `[This result of ${step.toolName} (${chars} characters) was left out: the conversation is past the model's context window.]`;
}

/** The text of a tool result as the prompt gives it: a string as it is, anything else as JSON. */
const resultText = (step: ToolStep) => (typeof step.output === 'string' ? step.output : JSON.stringify(step.output ?? null));

/** The shortest a result is cut to: below it, the model could not use what is left. */
export const minResultChars = 500;

/**
 * When a prompt with nothing left to drop must shed `shed` characters: the most characters of
 * each of the turn's newest results (those the step is asked about) to send, cut from `cap`
 * (none yet when undefined) so that they shed that much (half of what they hold when undefined).
 * Undefined when the cut would go under minResultChars, or would cut nothing: the turn is too
 * long for the model.
 */
export function capResultsToFit(journal: readonly Step[], cap: number | undefined, shed: number | undefined): number | undefined {
  const newest = journal.slice(journal.findLastIndex((step) => step.kind === 'model') + 1);
  const sizes = newest.flatMap((step) => (step.kind === 'tool' ? [Math.min(resultText(step).length, cap ?? Infinity)] : []));
  const total = sizes.reduce((a, b) => a + b, 0);
  const keep = total - (shed ?? total / 2);
  // The largest cap c with the results, each cut to c, adding up to no more than `keep`.
  const sorted = [...sizes].sort((a, b) => a - b);
  let next = 0;
  let below = 0;
  for (let i = 0; i < sorted.length; i++) {
    const c = Math.floor((keep - below) / (sorted.length - i));
    if (c <= sorted[i]!) {
      next = c;
      break;
    }
    below += sorted[i]!;
  }
  const largest = sorted.at(-1) ?? 0;
  return next >= minResultChars && next < largest ? next : undefined;
}

/** A result cut to its first `cap` characters, with a note of what was cut. */
export function cutResultText(step: ToolStep, cap: number): string {
  const text = resultText(step);
  return `${text.slice(0, cap)}\n[This result of ${step.toolName} was cut to its first ${cap} of ${text.length} characters: ` +
    "the conversation is past the model's context window.]";
}

/** Whether `step`'s result is longer than `cap` characters. */
export const overCap = (step: ToolStep, cap: number | undefined): boolean => cap !== undefined && resultText(step).length > cap;

/**
 * What a segment's prompts leave out to fit the model's context window: the history they send,
 * how many of the turn's answered results they leave out, the most characters of a result.
 */
export interface PromptFit {
  history: ModelMessage[];
  droppedResults: number;
  resultCap?: number;
  /** The earlier turns in the history before its first cut. */
  earlierTurnsOf?: number;
}

/**
 * The next fit for a prompt that must shed `shed` characters (see charsToShed; half of what a
 * cut may take when undefined): fewer earlier turns while there are any, then fewer of the turn's
 * answered results, then its newest results cut shorter; with what its event says of it.
 * Undefined when nothing is left to cut.
 */
export function fitAfter(
  fit: PromptFit, journal: readonly Step[], shed: number | undefined,
): { fit: PromptFit; said: Record<string, unknown> } | undefined {
  const cut = cutToFit(fit.history, shed);
  if (cut) {
    const of = fit.earlierTurnsOf ?? cut.of;
    return { fit: { ...fit, history: cut.history, earlierTurnsOf: of }, said: { earlierTurns: { kept: cut.kept, of } } };
  }
  const dropped = dropResultsToFit(journal, fit.droppedResults, shed);
  if (dropped !== undefined) {
    return { fit: { ...fit, droppedResults: dropped }, said: { toolResults: { dropped, of: droppableResults(journal).length } } };
  }
  const cap = capResultsToFit(journal, fit.resultCap, shed);
  return cap === undefined ? undefined : { fit: { ...fit, resultCap: cap }, said: { toolResults: { cutTo: cap } } };
}

/**
 * What a thread knows of its model's context window (ADR-0069): the model that refused a prompt
 * for its length, the most characters of prompt to send it, as the last such refusal taught, and
 * when. The thread keeps it (`agent_kit_threads.context_window`) for its later prompts.
 */
export interface ContextWindow {
  model: string;
  chars: number;
  /** When it was learned (ISO 8601); a window is trusted for contextWindowTrustMs after. */
  learnedAt?: string;
}

/**
 * How long a learned window is trusted: after it, the thread sends its whole prompt again, so a
 * limit raised under the same model id (a local server started with a larger context, a model
 * alias moved to a newer snapshot) is found, at the cost of one refusal a day when it was not.
 */
export const contextWindowTrustMs = 24 * 60 * 60 * 1000;

/**
 * What `error`, a refusal of a prompt of `promptChars` characters for its length, teaches of the
 * model's window. With both counts in it: the characters its token limit stands for at the
 * prompt's own characters per token, less a twentieth of the prompt, the size a cut aims for
 * (charsToShed). Without them the refusal says only that this prompt did not fit: the most is
 * `nextChars`, the size of the prompt cut to be asked next, until that too is refused.
 */
export function windowOf(model: string, promptChars: number, error: unknown, nextChars: number, nowMs = Date.now()): ContextWindow {
  const shed = charsToShed(promptChars, error);
  return { model, chars: Math.floor(shed === undefined ? nextChars : promptChars - shed), learnedAt: new Date(nowMs).toISOString() };
}

/**
 * The window a prompt for `model` goes by: `known` when it is that model's, in its shape, and
 * learned less than contextWindowTrustMs ago; otherwise none.
 */
export function trustedWindow(known: ContextWindow | null | undefined, model: string, nowMs = Date.now()): ContextWindow | undefined {
  if (!known || known.model !== model || typeof known.chars !== 'number' || !Number.isFinite(known.chars)) return undefined;
  const learnedMs = typeof known.learnedAt === 'string' ? Date.parse(known.learnedAt) : NaN;
  return nowMs - learnedMs < contextWindowTrustMs && learnedMs <= nowMs + contextWindowTrustMs ? known : undefined;
}

/**
 * How many characters a prompt of `promptChars` characters for `model` must shed before it is
 * sent, by what the thread knows of the window (trustedWindow): what it has past the most; 0 when
 * it fits, or no window is trusted for the model.
 */
export function charsOverWindow(promptChars: number, model: string, known: ContextWindow | null | undefined, nowMs = Date.now()): number {
  const window = trustedWindow(known, model, nowMs);
  return window ? Math.max(0, promptChars - window.chars) : 0;
}

/** The name a thread's remembered window goes by: the provider and the model's id. */
export function modelName(model: unknown): string {
  if (typeof model === 'string') return model;
  const { provider, modelId } = (model ?? {}) as { provider?: unknown; modelId?: unknown };
  return `${String(provider ?? 'unknown')}:${String(modelId ?? 'unknown')}`;
}

/** A prompt's size as the cuts count it: the characters of its system prompt and of its messages as JSON. */
export const promptChars = (system: string | undefined, messages: readonly ModelMessage[]): number =>
  (system ?? '').length + JSON.stringify(messages).length;
