// The hostile-input kit: a signed-session `authenticate` that can be forged against, a snapshot
// of every agent_kit_ table and sequence (to prove a refused request wrote nothing), the check
// that a refusal is a documented status with a JSON `{error:{code,message}}` body, and a tally of
// every input tried, printed as a summary line and written as JSON for the docs table.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import type { Caller } from '../../src/http/auth.js';
import { statusByErrorCode } from '../../src/http/http-error.js';
import { routes } from '../../src/http/routes.js';
import type { Db } from '../../src/store/db.js';

/** fast-check runs per property: small in CI, `HOSTILE_RUNS=…` for long runs. */
export const hostileRuns = Number(process.env.HOSTILE_RUNS ?? 30);
/** Statuses a refusal may have (DESIGN §5 and http-error.ts); 500 is never one. */
export const refusalStatuses = [400, 401, 403, 404, 405, 409, 413, 415] as const;

// Signed sessions, the way an app authenticates (see ADR-0015): `ak_session=<payload>.<mac>`,
// payload = base64url(JSON {sub, exp}), mac = base64url(HMAC-SHA256(secret, payload)).
const sessionSecret = crypto.randomBytes(32);
export const operatorName = 'ops';

export function signSession(sub: unknown, options: { expMs?: number; secret?: Buffer } = {}): string {
  const payload = Buffer.from(JSON.stringify({ sub, exp: options.expMs ?? Date.now() + 3_600_000 }))
    .toString('base64url');
  const mac = crypto.createHmac('sha256', options.secret ?? sessionSecret).update(payload).digest('base64url');
  return `${payload}.${mac}`;
}

/** The app's authenticate: a verified, unexpired session, or null. Never throws. */
export async function sessionAuth(request: Request): Promise<Caller | null> {
  const cookies = request.headers.get('cookie') ?? '';
  const match = /(?:^|;\s*)ak_session=([^;]*)/.exec(cookies);
  const parts = match?.[1]?.split('.');
  if (!parts || parts.length !== 2) return null;
  const [payload, mac] = parts as [string, string];
  const expected = crypto.createHmac('sha256', sessionSecret).update(payload).digest();
  const given = Buffer.from(mac, 'base64url');
  if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) return null;
  let claims: { sub?: unknown; exp?: unknown };
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (typeof claims?.sub !== 'string' || !/^[a-z0-9._-]{1,40}$/.test(claims.sub)) return null;
  if (typeof claims.exp !== 'number' || claims.exp <= Date.now()) return null;
  return { userId: claims.sub, isOperator: claims.sub === operatorName };
}

/** A cookie header for a signed-in user. */
export const sessionCookie = (user: string) => `ak_session=${signSession(user)}`;

export interface HostileRequest {
  /** Signed-in user (a valid session cookie). */
  user?: string;
  /** A raw Cookie header (forged sessions). */
  cookie?: string;
  /** A JSON body (serialised here, content-type application/json unless headers say otherwise). */
  body?: unknown;
  /** A raw body, text or bytes, sent as is. */
  raw?: string | Uint8Array;
  headers?: Record<string, string>;
}

/** A Request as a browser (or an attacker) would send it. */
export function hostileRequest(method: string, url: string, options: HostileRequest = {}): Request {
  const headers = new Headers();
  if (options.user) headers.set('cookie', sessionCookie(options.user));
  if (options.cookie !== undefined) headers.set('cookie', options.cookie);
  let body: string | Uint8Array | undefined = options.raw;
  if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined) headers.set('content-type', 'application/json');
  for (const [name, value] of Object.entries(options.headers ?? {})) {
    if (value === '') headers.delete(name);
    else headers.set(name, value);
  }
  const absolute = url.startsWith('http') ? url : `http://agent-kit.test${url}`;
  return new Request(absolute, { method, headers, body: body as BodyInit | undefined });
}

/** Counts and checksums of every agent_kit_ table and the value of every agent_kit_ sequence. */
export async function snapshotTables(
  db: Db, options: { sequences?: boolean } = {},
): Promise<Record<string, string>> {
  const tables = await db.query<{ name: string }>(
    `select table_name as name from information_schema.tables
     where table_schema = current_schema() and table_name like 'agent\\_kit\\_%' and table_type = 'BASE TABLE'
     order by 1`);
  const sequences = await db.query<{ name: string; value: string | number | null }>(
    `select sequencename as name, last_value as value from pg_sequences
     where schemaname = current_schema() and sequencename like 'agent\\_kit\\_%'`);
  const parts = tables.map(({ name }) =>
    `select '${name}' as name, count(*)::text || ':' || coalesce(md5(string_agg(t::text, '|' order by t::text)), '-') as sum
     from ${name} t`);
  const rows = await db.query<{ name: string; sum: string }>(parts.join(' union all '));
  const snapshot: Record<string, string> = {};
  for (const row of rows) snapshot[row.name] = row.sum;
  if (options.sequences !== false) {
    for (const row of sequences) snapshot[`sequence ${row.name}`] = String(row.value);
  }
  return snapshot;
}

/** The names of the routes in routes.ts whose path a tally label ("METHOD /path …") names. */
export function routeNamesIn(label: string): string[] {
  const path = label.split(' ')[1] ?? '';
  return routes.filter((r) => r.path === path).map((r) => r.name);
}

export interface TallyRow {
  suite: string;
  route: string;
  what: string;
  expected: string;
  inputs: number;
  statuses: Record<string, number>;
  violations: number;
  /** The first answer seen (a CLI's stderr line), for the docs. */
  sample?: string;
}

/** Every input tried, grouped by route and kind, with the statuses seen and violations. */
export class Tally {
  readonly rows = new Map<string, TallyRow>();
  readonly violations: string[] = [];
  /** `unit`: what the summary counts, the routes of routes.ts or the CLI commands tried. */
  constructor(readonly suite: string, readonly unit: 'routes' | 'commands' = 'routes') {}

  record(
    route: string, what: string, expected: readonly number[], status: number, violation?: string, sample?: string,
  ) {
    const key = `${route}\u0000${what}`;
    let row = this.rows.get(key);
    if (!row) {
      row = {
        suite: this.suite, route, what, expected: expected.join('/'), inputs: 0, statuses: {}, violations: 0, sample,
      };
      this.rows.set(key, row);
    }
    const union = new Set([...row.expected.split('/'), ...expected.map(String)]);
    row.expected = [...union].sort().join('/');
    row.inputs++;
    row.statuses[status] = (row.statuses[status] ?? 0) + 1;
    if (violation) {
      row.violations++;
      this.violations.push(`${route} ${what}: ${violation}`);
    }
  }

  get inputs() {
    return [...this.rows.values()].reduce((n, r) => n + r.inputs, 0);
  }

  /** Print `hostile: N inputs, M routes, V violations` and, with HOSTILE_REPORT_DIR, write JSON. */
  report(): string {
    const covered = new Set([...this.rows.values()]
      .flatMap((r) => (this.unit === 'routes' ? routeNamesIn(r.route) : [r.route])));
    const line = `hostile(${this.suite}): ${this.inputs} inputs, ${covered.size} ${this.unit}, ` +
      `${this.violations.length} violations (store: ${process.env.DATABASE_URL ? 'postgres' : 'pglite'}, ` +
      `runs ${hostileRuns})`;
    console.log(line);
    const dir = process.env.HOSTILE_REPORT_DIR;
    if (dir) {
      fs.mkdirSync(dir, { recursive: true });
      const store = process.env.DATABASE_URL ? 'postgres' : 'pglite';
      fs.writeFileSync(path.join(dir, `${this.suite}-${store}.json`),
        JSON.stringify({ suite: this.suite, store, runs: hostileRuns, rows: [...this.rows.values()] }, null, 1));
    }
    return line;
  }
}

export interface Refusal {
  status: number;
  code: string;
  message: string;
  headers: Headers;
}

/**
 * Check a refusal: its status is one of `expected` (never 5xx), the body is exactly
 * `{error:{code,message}}` and the code maps to that status. Records it in the tally; a
 * violation is recorded and then fails the test (so fast-check shrinks it).
 */
export async function expectRefusal(
  tally: Tally, route: string, what: string, response: Response, expected: readonly number[],
): Promise<Refusal> {
  const text = await response.text();
  let problem: string | undefined;
  let body: { error?: { code?: unknown; message?: unknown } } | undefined;
  try {
    body = JSON.parse(text);
  } catch {
    problem = `body is not JSON: ${text.slice(0, 120)}`;
  }
  const code = body?.error?.code;
  const message = body?.error?.message;
  if (!problem && !expected.includes(response.status)) {
    problem = `status ${response.status}, expected ${expected.join('/')}: ${text.slice(0, 200)}`;
  } else if (!problem && !/^application\/json/.test(response.headers.get('content-type') ?? '')) {
    problem = `content-type ${response.headers.get('content-type')}`;
  } else if (!problem && (typeof code !== 'string' || typeof message !== 'string' || message === '')) {
    problem = `body is not {error:{code,message}}: ${text.slice(0, 200)}`;
  } else if (!problem && (Object.keys(body!).length !== 1 || Object.keys(body!.error!).length !== 2)) {
    problem = `body has extra fields: ${text.slice(0, 200)}`;
  } else if (!problem && statusByErrorCode[code as string] !== response.status) {
    problem = `code ${String(code)} does not map to ${response.status}`;
  } else if (!problem && response.status === 405 && !response.headers.get('allow')) {
    problem = '405 without an allow header';
  }
  tally.record(route, what, expected, response.status, problem);
  expect(problem, `${route} ${what}`).toBeUndefined();
  return { status: response.status, code: String(code), message: String(message), headers: response.headers };
}

/** Fail (and tally) when the store changed since `before`. */
export async function expectNothingWritten(
  tally: Tally, route: string, what: string, db: Db, before: Record<string, string>,
): Promise<void> {
  const after = await snapshotTables(db);
  const changed = Object.keys({ ...before, ...after }).filter((k) => before[k] !== after[k]);
  if (changed.length > 0) {
    tally.violations.push(`${route} ${what}: wrote to ${changed.join(', ')}`);
    const row = tally.rows.get(`${route}\u0000${what}`);
    if (row) row.violations++;
  }
  expect(changed, `${route} ${what} wrote to`).toEqual([]);
}
