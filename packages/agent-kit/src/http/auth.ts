// Who may call what. The app authenticates (an `authenticate(request)` hook); we authorise: a
// thread and its runs are visible only to their owner and to operators, and anything else is
// "not found", so a caller cannot learn that another user's thread exists. Cron routes take a
// shared secret, compared in constant time.
import crypto from 'node:crypto';
import { readRunAccess, type RunAccess } from '../event-log/read-runs.js';
import { readThreadHead } from '../event-log/read-threads.js';
import type { Queryable } from '../store/db.js';
import { HttpError } from './http-error.js';

/** The authenticated caller. Operators see every thread and may take runs over. */
export interface Caller {
  userId: string;
  isOperator: boolean;
}

/** The app's authentication: the caller of a request, or null when it is not signed in. */
export type Authenticate = (request: Request) => Promise<Caller | null>;

/** The caller, or a 401. */
export async function requireCaller(authenticate: Authenticate, request: Request): Promise<Caller> {
  const caller = await authenticate(request);
  if (!caller || typeof caller.userId !== 'string' || caller.userId === '') {
    throw new HttpError('UNAUTHENTICATED', 'sign in to use this route');
  }
  // Only `true` makes an operator: a string "false" from a header or a claim must not (a 500,
  // and the log names the app's bug).
  if (caller.isOperator !== undefined && typeof caller.isOperator !== 'boolean') {
    throw new TypeError(`authenticate() returned isOperator ${JSON.stringify(caller.isOperator)}; it must be true or false`);
  }
  return { ...caller, isOperator: caller.isOperator === true };
}

function canSee(caller: Caller, ownerId: string) {
  return caller.isOperator || caller.userId === ownerId;
}

/** The thread's owner and last seq, or a 404 when it does not exist or the caller may not see it. */
export async function requireThreadAccess(
  db: Queryable, caller: Caller, threadId: string,
): Promise<{ ownerId: string; lastSeq: number }> {
  const head = await readThreadHead(db, threadId);
  if (head === null || !canSee(caller, head.ownerId)) {
    throw new HttpError('NOT_FOUND', `thread ${threadId} not found`);
  }
  return head;
}

/** The run's thread and status, or a 404 when it does not exist or the caller may not see it. */
export async function requireRunAccess(
  db: Queryable, caller: Caller, runId: string,
): Promise<RunAccess> {
  const access = await readRunAccess(db, runId);
  if (access === null || !canSee(caller, access.ownerId)) {
    throw new HttpError('NOT_FOUND', `run ${runId} not found`);
  }
  return access;
}

/** A 403 unless the caller is an operator (checked after access, so strangers still get 404). */
export function requireOperator(caller: Caller): void {
  if (!caller.isOperator) throw new HttpError('FORBIDDEN', 'only an operator may do this');
}

/**
 * Check `Authorization: Bearer <secret>` for the cron routes: 503 when no secret is configured
 * (the routes are off), 401 when it is missing or wrong.
 */
export function requireCronSecret(request: Request, secret: string | undefined): void {
  if (!secret) throw new HttpError('NOT_CONFIGURED', 'set CRON_SECRET to enable the cron routes');
  const header = request.headers.get('authorization') ?? '';
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  if (!match) throw new HttpError('UNAUTHENTICATED', 'the cron routes need Authorization: Bearer $CRON_SECRET');
  // (Saying which: a scheduler configured with a stale secret is told so, and learns nothing else.)
  if (!secretsEqual(match[1]!, secret)) {
    throw new HttpError('UNAUTHENTICATED', 'the cron secret does not match CRON_SECRET: Authorization: Bearer $CRON_SECRET');
  }
}

/** Constant-time comparison: hashing first gives equal lengths, so timing reveals nothing. */
function secretsEqual(given: string, expected: string): boolean {
  const a = crypto.createHash('sha256').update(given).digest();
  const b = crypto.createHash('sha256').update(expected).digest();
  return crypto.timingSafeEqual(a, b);
}
