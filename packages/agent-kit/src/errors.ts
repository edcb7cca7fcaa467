// Error classes that cross layers, and the one table mapping our SQLSTATEs to them.
// Outcomes a caller branches on (a lost lease, a busy run) are return values, not errors.

/** Base class: every agent-kit error has a stable string `code`. */
export class AgentKitError extends Error {
  readonly code: string = 'AGENT_KIT';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A broken invariant: a bug in agent-kit. Ends the turn loudly. */
export class AgentKitBug extends AgentKitError {
  override readonly code = 'BUG';
}

/** Bad input to a library call or SQL function (SQLSTATE AK001). */
export class InvalidArgumentError extends AgentKitError {
  override readonly code = 'INVALID_ARGUMENT';
}

/** A run, thread or message id that does not exist (SQLSTATE AK002). */
export class NotFoundError extends AgentKitError {
  override readonly code = 'NOT_FOUND';
}

/** The schema forbids this call: e.g. close without lease after the last migration (AK003). */
export class LeaseRequiredError extends AgentKitError {
  override readonly code = 'LEASE_REQUIRED';
}

/** The request conflicts with the run's state: answering a run that is not waiting (AK004). */
export class ConflictError extends AgentKitError {
  override readonly code = 'CONFLICT';
}

/** A guarded write was rejected because another segment holds the run. */
export class LeaseLostError extends AgentKitError {
  override readonly code = 'LEASE_LOST';
}

/** The database could not be reached or dropped the connection; retry when it returns. */
export class StoreUnavailableError extends AgentKitError {
  override readonly code = 'STORE_UNAVAILABLE';
}

/** Another process holds the embedded store's folder. */
export class StoreLockedError extends AgentKitError {
  override readonly code = 'STORE_LOCKED';
}

/** The schema is older or newer than this library can use. */
export class SchemaMismatchError extends AgentKitError {
  override readonly code = 'SCHEMA_MISMATCH';
}

/**
 * Thrown by a tool's `execute` when it cannot tell whether its side effect happened: the request
 * reached the outside system but its answer was lost (a timeout, a 502 after the commit). The
 * effect is recorded `in_doubt`, not `failed`, and the model is told it may have happened. Throw
 * any other error only when the effect certainly did not happen. See ADR-0040.
 */
export class EffectInDoubtError extends AgentKitError {
  override readonly code = 'EFFECT_IN_DOUBT';
}

/** SQLSTATEs raised by our plpgsql (see sql/migrations), mapped to classes. */
export const sqlStateErrors: Record<string, new (message: string, o?: { cause?: unknown }) => AgentKitError> = {
  AK001: InvalidArgumentError,
  AK002: NotFoundError,
  AK003: LeaseRequiredError,
  AK004: ConflictError,
  '22P02': InvalidArgumentError, // invalid_text_representation: a malformed uuid or interval
  '22007': InvalidArgumentError, // invalid_datetime_format
  '22023': InvalidArgumentError, // invalid_parameter_value
  '23514': InvalidArgumentError, // check_violation: e.g. an unknown status
  '22021': InvalidArgumentError, // character_not_in_repertoire: a NUL byte in text
  '22P05': InvalidArgumentError, // untranslatable_character: \u0000 in jsonb
};

/** Connection-level failures: class 08, admin shutdown (57P01..03), and node socket errors. */
// 57014: a statement timeout (or cancel): transient like a dropped connection; the caller retries.
const unavailableStates = new Set(['57P01', '57P02', '57P03', '53300', '57014']);
const unavailableNodeCodes = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND']);

/** Normalise anything thrown into an Error, mapping database errors to our classes. */
export function coerceError(raw: unknown): Error {
  if (raw instanceof AgentKitError) return raw;
  const error = raw instanceof Error ? raw : new Error(String(raw));
  const code = (raw as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    const mapped = sqlStateErrors[code];
    if (mapped) return new mapped(error.message, { cause: raw });
    if (code.startsWith('08') || unavailableStates.has(code) || unavailableNodeCodes.has(code)) {
      return new StoreUnavailableError(`database unavailable: ${error.message}`, { cause: raw });
    }
  }
  // pg-pool's "timeout exceeded when trying to connect": no connection within acquireTimeoutMs.
  if (/Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error/i
    .test(error.message)) {
    return new StoreUnavailableError(`database unavailable: ${error.message}`, { cause: raw });
  }
  return error;
}

/** Assert an invariant; a failure is a bug in agent-kit, never a user error. */
export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AgentKitBug(`invariant violated: ${message}`);
}

/** The stored shape of a failure. */
export function serializeError(raw: unknown): { name: string; code?: string; message: string; stack?: string } {
  const error = coerceError(raw);
  const code = (error as { code?: unknown }).code;
  return { name: error.name, code: typeof code === 'string' ? code : undefined, message: error.message, stack: error.stack };
}
