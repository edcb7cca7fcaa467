// Why a run failed, from its run-closed event's `error` (ADR-0066): the provider's refusal for
// good ({ name, message, statusCode }) or the engine's own words ("stopped after 16 model steps").
// In words for a terminal or a client; no runtime imports, so the CLI loads it without the engine.

/** "the model's provider refused the request (400): …", the engine's own words, or null for none. */
export function runFailureText(error: unknown): string | null {
  if (typeof error === 'string') return error === '' ? null : error;
  const { statusCode, message } = (error ?? {}) as { statusCode?: unknown; message?: unknown };
  if (typeof message !== 'string' || message === '') return null;
  return `the model's provider refused the request${typeof statusCode === 'number' ? ` (${statusCode})` : ''}: ${message}`;
}
