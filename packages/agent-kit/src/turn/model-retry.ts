// When to ask a model again after its provider refused a request for now (ADR-0057): a rate
// limit (429), an overload (529, 503), a timeout or a lost connection, which the AI SDK marks
// `isRetryable`. The segment waits here and asks again, within its deadline, instead of spending
// one of the run's attempts per refusal: three refusals in a second used to end the turn.
import { backoffMs } from '../queue/pace.js';
import { storableText } from '../store/storable.js';

/** The longest wait for one retry: a provider's Retry-After up to this, our own backoff less. */
export const maxRetryAfterMs = 60_000;
const firstBackoffMs = 1_000;
const maxBackoffMs = 30_000;

/**
 * A stream's error part as an Error. Providers send what their API put in the stream: Anthropic
 * `{ type: 'overloaded_error', message: 'Overloaded' }` (its 529, mid-stream), OpenAI's chat
 * completions `{ type: 'server_error', message, code }`, its Responses API
 * `{ type: 'error', code: 'server_error', message }` with the provider's own `statusCode` and
 * `isRetryable`; an Error is kept as it is. Made into a ModelStreamError named by its type (its
 * code when the type says only "error"), retryable when the provider says so or when the type is
 * one that may work later, with the status the same error has as a response (ADR-0059).
 */
export function streamError(raw: unknown): Error {
  if (raw instanceof Error) return raw;
  const body = raw !== null && typeof raw === 'object'
    ? raw as { type?: unknown; message?: unknown; code?: unknown; statusCode?: unknown; isRetryable?: unknown }
    : {};
  const code = typeof body.code === 'string' ? body.code : undefined;
  const type = typeof body.type === 'string' && body.type !== 'error' ? body.type : code;
  const message = typeof body.message === 'string' ? body.message : JSON.stringify(raw) ?? String(raw);
  const known = statusOfStreamError.get(type ?? '') ?? statusOfStreamError.get(code ?? '');
  // A prompt past the context window, in a stream (OpenAI's Responses API): the 400 it is as a response.
  const tooLong = [type, code].includes('context_length_exceeded') ? 400 : undefined;
  const statusCode = typeof body.statusCode === 'number' ? body.statusCode : known ?? tooLong;
  const retryable = typeof body.isRetryable === 'boolean' ? body.isRetryable : known !== undefined;
  return new ModelStreamError(type ? `${type}: ${message}` : message, type, statusCode, retryable);
}

/** Stream error types a provider sends for what, as a response, is a retryable status. */
const statusOfStreamError = new Map([
  ['overloaded_error', 529], ['rate_limit_error', 429], ['api_error', 500], ['timeout_error', 504], // Anthropic
  ['server_error', 500], ['rate_limit_exceeded', 429], // OpenAI (a type, or a code)
]);

/** An error part of a model's stream (see streamError). */
export class ModelStreamError extends Error {
  override readonly name = 'ModelStreamError';
  constructor(
    message: string, readonly type: string | undefined, readonly statusCode: number | undefined, readonly isRetryable: boolean,
  ) {
    super(message);
  }
}

/**
 * A model stream that sent nothing for the stall timeout (a hung connection, a stuck provider):
 * retryable, as a timeout is, so the segment asks again instead of failing (ADR-0063).
 */
export class ModelStalledError extends Error {
  override readonly name = 'ModelStalledError';
  readonly isRetryable = true;
  constructor(stallTimeoutMs: number) {
    super(`the model stream sent nothing for ${stallTimeoutMs} ms`);
  }
}

/**
 * A model stream that ended without the provider's finish (no finish reason): the response was
 * closed early, by the provider or by a proxy between. The AI SDK ends such a step as if it had
 * finished ('other'); its text is only what arrived, so it is retryable, as a cut connection is.
 */
export class ModelStreamCutError extends Error {
  override readonly name = 'ModelStreamCutError';
  readonly isRetryable = true;
  constructor() {
    super('the model stream ended before the provider finished the step (no finish reason)');
  }
}

/**
 * A segment's deadline came in a model step before it left anything to go on from: no step
 * journalled in the segment, no text a prefill continues. Asking again in a segment of the same
 * budget would end the same way, so the segment fails and spends its attempt (ADR-0071).
 */
export class StepPastBudgetError extends Error {
  override readonly name = 'StepPastBudgetError';
  /** `streamed`: the step had sent text, which a model that cannot continue a prefill starts again. */
  constructor(budgetMs: number, streamed = false) {
    super(`a model step did not finish within the segment's budget of ${Math.round(budgetMs / 100) / 10} s, ` +
      (streamed
        ? 'and its text cannot be continued by this model (no prefill: the step starts again); '
        : 'and gave nothing to go on from (the model thought, or waited, that long before its first word); ') +
      'a longer budget (AGENT_KIT_INVOCATION_BUDGET) lets it finish');
  }
}

/**
 * The provider says it may work later (APICallError or GatewayError with isRetryable), unless it
 * is OpenAI's `insufficient_quota`: a 429 that no wait lifts (ADR-0066).
 */
export function isRetryableModelError(error: unknown): boolean {
  return (error as { isRetryable?: unknown } | null)?.isRetryable === true && !outOfQuota(error);
}

/** OpenAI's "You exceeded your current quota" (a 429, as a response or in the stream). */
function outOfQuota(error: unknown): boolean {
  const e = error as { type?: unknown; data?: { error?: { code?: unknown; type?: unknown } } } | null;
  return [e?.type, e?.data?.error?.code, e?.data?.error?.type].includes('insufficient_quota');
}

/**
 * The provider rejected, before sending anything, a request that carried what not every provider
 * takes: a prefill (Anthropic refuses one with extended thinking on: a final assistant message must
 * start with a thinking block) or earlier steps' reasoning (an OpenAI reasoning item no longer
 * stored). The step is asked again without them (ADR-0064), not given up (ADR-0066).
 */
export function refusedWhatItCarried(
  result: { error: unknown; produced: string }, carried: { prefix: string; reasoning: boolean },
): boolean {
  const carriedAny = carried.prefix.trim() !== '' || carried.reasoning;
  return carriedAny && result.produced === 'nothing' && rejectedRequest(result.error);
}

/**
 * The provider will refuse the request again however often it is sent: it rejected the request
 * itself, or the account is out of quota. The turn fails at once instead of spending its
 * attempts (ADR-0066). An error without a status (a bug, a cut connection) is not one.
 */
export function refusedForGood(error: unknown): boolean {
  return rejectedRequest(error) || outOfQuota(error);
}

/**
 * A 4xx that is not a rate limit, a timeout or a conflict, and that the provider does not mark
 * retryable: a bad request, a prompt past the context window, a bad key, an unknown model,
 * content refused.
 */
export function rejectedRequest(error: unknown): boolean {
  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  return typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500 && ![408, 409, 429].includes(statusCode)
    && !isRetryableModelError(error);
}

/**
 * How long to wait before retry number `retry` (1 for the first): what the provider asked for in
 * `retry-after-ms` or `retry-after` (seconds or an HTTP date), up to a minute; otherwise
 * exponential backoff from 1 s, doubling to at most 30 s, with jitter (half to all of it) so runs
 * refused together do not come back together.
 */
export function retryDelayMs(error: unknown, retry: number, random: () => number = Math.random): number {
  return retryAfterMs(error) ?? backoffMs(retry, firstBackoffMs, maxBackoffMs, random);
}

function retryAfterMs(error: unknown): number | undefined {
  const headers = responseHeaders(error);
  if (!headers) return undefined;
  const header = (name: string) => Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1];
  let ms: number | undefined;
  const inMs = header('retry-after-ms');
  if (inMs !== undefined && inMs.trim() !== '' && Number.isFinite(Number(inMs))) ms = Number(inMs);
  const after = header('retry-after');
  if (ms === undefined && after !== undefined && after.trim() !== '') {
    ms = Number.isFinite(Number(after)) ? Number(after) * 1_000 : Date.parse(after) - Date.now();
  }
  if (ms === undefined || Number.isNaN(ms)) return undefined;
  return Math.round(Math.min(maxRetryAfterMs, Math.max(0, ms)));
}

/** The response headers of an APICallError, or of the one it wraps. */
function responseHeaders(error: unknown): Record<string, string> | undefined {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 3; e = (e as { cause?: unknown }).cause, depth++) {
    const headers = (e as { responseHeaders?: unknown }).responseHeaders;
    if (headers && typeof headers === 'object') return headers as Record<string, string>;
  }
  return undefined;
}

/** What a model-retry event and the log say about the refusal. */
export function describeRefusal(error: Error): { name: string; message: string; statusCode?: number } {
  const statusCode = (error as { statusCode?: unknown }).statusCode;
  return { name: storableText(error.name), message: storableText(error.message), ...(typeof statusCode === 'number' ? { statusCode } : {}) };
}
