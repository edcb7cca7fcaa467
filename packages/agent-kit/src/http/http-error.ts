// Errors at the HTTP edge: the one table from error code to status, and the JSON error body
// `{ error: { code, message } }`. Unknown failures become a 500 that reveals no internals.
import { AgentKitError, coerceError } from '../errors.js';

/** An error the HTTP adapter raises itself (auth, input limits, routing), with its own code. */
export class HttpError extends AgentKitError {
  override readonly code: HttpErrorCode;
  constructor(code: HttpErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

export type HttpErrorCode =
  | 'INVALID_ARGUMENT' | 'UNAUTHENTICATED' | 'FORBIDDEN' | 'NOT_FOUND' | 'METHOD_NOT_ALLOWED'
  | 'CONFLICT' | 'PAYLOAD_TOO_LARGE' | 'UNSUPPORTED_MEDIA_TYPE' | 'NOT_CONFIGURED';

/** Error code → HTTP status. Codes not listed are internal errors (500). */
export const statusByErrorCode: Readonly<Record<string, number>> = {
  INVALID_ARGUMENT: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  LEASE_LOST: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  NOT_CONFIGURED: 503,
  STORE_UNAVAILABLE: 503,
  STORE_LOCKED: 503,
};

/** A JSON response with no-store caching: API answers are per caller. */
export function jsonResponse(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers },
  });
}

/** The code, status and client-safe message for anything thrown. */
export function describeError(
  raw: unknown,
): { code: string; status: number; message: string; internal: boolean } {
  const error = coerceError(raw);
  const code = error instanceof AgentKitError ? error.code : undefined;
  const status = code ? statusByErrorCode[code] : undefined;
  if (!code || !status) {
    return { code: 'INTERNAL', status: 500, message: 'internal error', internal: true };
  }
  // Store errors carry driver text (hosts, ports); the client learns only that it is down.
  const storeDown = status === 503 && code !== 'NOT_CONFIGURED';
  const message = storeDown ? 'the store is unavailable; retry later' : error.message;
  return { code, status, message, internal: false };
}

/** Map anything thrown to its JSON error response; internal errors go to `log`, not the client. */
export function errorResponse(raw: unknown, log?: (entry: Record<string, unknown>) => void): Response {
  const { code, status, message, internal } = describeError(raw);
  if (internal || (status >= 500 && code !== 'NOT_CONFIGURED')) {
    const error = coerceError(raw);
    log?.({ msg: 'http request failed', code, error: error.message, stack: error.stack });
  }
  const headers: Record<string, string> = status === 401 ? { 'www-authenticate': 'Bearer' } : {};
  if (status === 503) headers['retry-after'] = '1';
  return jsonResponse({ error: { code, message } }, status, headers);
}
