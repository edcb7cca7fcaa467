// A prompt past the model's context window (ADR-0067). A thread grows by a turn each time it is
// used, so one day its history no longer fits the model: the provider rejects the request, every
// new turn of the thread with it. Such a request is asked again with fewer of the earlier turns,
// the oldest dropped first, until it fits or none is left; the current turn itself (its user
// message and its steps so far) is never cut.
import type { ModelMessage } from 'ai';

/**
 * The provider rejected the request because the prompt is past the model's context window:
 * OpenAI's code `context_length_exceeded` (chat completions and the Responses API), or the words
 * of Anthropic ("prompt is too long"), Google ("input token count … exceeds the maximum"),
 * Mistral, xAI, Bedrock and OpenAI-compatible servers (vLLM, llama.cpp, LiteLLM); or a 413.
 */
export function pastContextWindow(error: unknown): boolean {
  const e = error as { statusCode?: unknown; type?: unknown; message?: unknown; data?: { error?: { code?: unknown } } } | null;
  const status = e?.statusCode;
  if (typeof status !== 'number' || status < 400 || status >= 500 || [408, 409, 429].includes(status)) return false;
  if (status === 413 || e?.data?.error?.code === 'context_length_exceeded' || e?.type === 'context_length_exceeded') return true;
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
 * "prompt is too long: 208310 tokens > 200000 maximum".
 */
export function tokensOverLimit(error: unknown): { used: number; limit: number } | undefined {
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message !== 'string') return undefined;
  const numbers = [...message.matchAll(/\d[\d,]*/g)].map((m) => Number(m[0].replaceAll(',', ''))).filter((n) => n >= 64);
  const used = Math.max(...numbers);
  const limit = Math.max(...numbers.filter((n) => n < used));
  return Number.isFinite(limit) && limit > 0 ? { used, limit } : undefined;
}

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
 * The history for the next request after `error`, a refusal for the prompt's length of a request
 * whose whole prompt took `promptChars` characters: the oldest earlier turns dropped until their
 * characters make up the share of the prompt the refusal says is over the limit, and a twentieth
 * of it more; half of them when it says no numbers. At least one goes. Undefined when none is
 * left to drop: then the current turn alone is too long, and the turn fails (ADR-0066).
 */
export function cutToFit(history: readonly ModelMessage[], promptChars: number, error: unknown): HistoryCut | undefined {
  const of = earlierTurns(history);
  if (of === 0) return undefined;
  const over = tokensOverLimit(error);
  let kept: number;
  if (over) {
    const toDrop = promptChars * ((over.used - over.limit) / over.used + 0.05);
    const starts = history.flatMap((m, i) => (m.role === 'user' ? [i] : []));
    let dropped = 0;
    kept = of;
    while (kept > 0 && dropped < toDrop) {
      const first = starts[of - kept]!;
      dropped += JSON.stringify(history.slice(first, starts[of - kept + 1])).length;
      kept--;
    }
    kept = Math.min(kept, of - 1);
  } else {
    kept = Math.floor(of / 2);
  }
  return { history: keepEarlierTurns(history, kept), kept, of };
}
