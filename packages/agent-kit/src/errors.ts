// Error classes that cross layers, and the one table mapping our SQLSTATEs to them.
// Outcomes a caller branches on (a lost lease, a busy run) are return values, not errors.

import { storableText } from './store/storable.js';

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

/**
 * The TLS handshake with the database server failed on a setting: a certificate this process does
 * not trust, one for another host, or a server without TLS. Fix the setting; retrying won't help.
 * The message names the setting; `cause` is the driver's error.
 */
export class StoreTlsError extends AgentKitError {
  override readonly code = 'STORE_TLS';
}

/** Another process holds the embedded store's folder. */
export class StoreLockedError extends AgentKitError {
  override readonly code = 'STORE_LOCKED';
}

/** The database role lacks a privilege on agent-kit's tables (SQLSTATE 42501); the message says which grants. */
export class StorePermissionError extends AgentKitError {
  override readonly code = 'STORE_PERMISSION';
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

/**
 * Node's codes for a server certificate it would not trust. Like a wrong password, a refused
 * certificate is a setting to fix, not an outage to wait out: the error says which setting.
 */
const untrustedCertificateCodes = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'CERT_UNTRUSTED', 'CERT_SIGNATURE_FAILURE',
]);
const tlsGuide = 'see "TLS to a hosted Postgres" in docs/guides/operating.md';

function explainTls(error: Error, code: string): StoreTlsError | undefined {
  let advice: string | undefined;
  if (untrustedCertificateCodes.has(code)) {
    advice = 'the database server\'s TLS certificate is not signed by a CA this process trusts. Name the CA your '
      + 'provider publishes in the connection string: ?sslmode=verify-full&sslrootcert=/path/to/ca.pem';
  } else if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    advice = 'the database server\'s TLS certificate is for another host name. Connect by the name the '
      + 'certificate carries (the host your provider gives), not by an IP address or an alias';
  } else if (code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID') {
    advice = 'the database server\'s TLS certificate is outside its validity period (or this machine\'s clock is wrong)';
  } else if (error.message === 'The server does not support SSL connections') {
    advice = 'the connection string asks for TLS (sslmode or ssl=true) but this server has ssl = off';
  }
  if (!advice) return undefined;
  return new StoreTlsError(`${advice} (${error.message}); ${tlsGuide}`, { cause: error });
}

/** Anything thrown, as an Error and otherwise as it was: for what the app's code threw. */
export function asError(raw: unknown): Error {
  return raw instanceof Error ? raw : new Error(String(raw));
}

/**
 * Normalise anything a database driver threw into an Error, mapping database errors to our
 * classes. Not for what the app's code threw: its ECONNREFUSED is its own service's, not the store's.
 */
export function coerceError(raw: unknown): Error {
  if (raw instanceof AgentKitError) return raw;
  const error = asError(raw);
  const code = (raw as { code?: unknown } | null)?.code;
  const tls = explainTls(error, typeof code === 'string' ? code : '');
  if (tls) return tls;
  if (typeof code === 'string') {
    const mapped = sqlStateErrors[code];
    if (mapped) return new mapped(error.message, { cause: raw });
    if (code === '42501') {
      return new StorePermissionError(`${error.message}: \`agent-kit migrate\` runs as the role that owns agent-kit's ` +
        'tables; every other role needs usage on their schema and select, insert, update and delete on them (the ' +
        'operating guide: "Roles, grants and a schema of your own")', { cause: raw });
    }
    if (code === '3D000') {
      // invalid_catalog_name: the database in DATABASE_URL is not on that server. A setting to fix.
      return new Error(`${error.message}: create it (\`createdb NAME\`, or CREATE DATABASE in psql) or fix DATABASE_URL`, { cause: raw });
    }
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

/** The stored shape of a failure (the drivers have mapped the store's own errors already). */
export function serializeError(raw: unknown): { name: string; code?: string; message: string; stack?: string } {
  const error = asError(raw);
  const code = (error as { code?: unknown }).code;
  return {
    name: storableText(error.name), code: typeof code === 'string' ? storableText(code) : undefined,
    message: storableText(error.message), stack: error.stack === undefined ? undefined : storableText(error.stack),
  };
}
