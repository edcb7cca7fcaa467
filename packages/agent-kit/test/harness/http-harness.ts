// HTTP test kit: handlers over a fresh test database with a fake segment runner and header-based
// authentication (`x-user`, `x-operator: 1`), plus an SSE reader built on eventsource-parser.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { configFromEnv } from '../../src/config.js';
import { createHandlers, type Handlers } from '../../src/http/handlers.js';
import type { HandlerDeps } from '../../src/http/context.js';
import type { Caller } from '../../src/http/auth.js';
import type { Db } from '../../src/store/db.js';
import type { Runtime } from '../../src/turn/types.js';
import { fakeRunSegment, type FakeSegmentOptions } from './fake-segment.js';
import { openTestDb } from './test-db.js';

export const base = 'http://agent-kit.test';
export const cronSecret = 'test-cron-secret-0123456789';

export interface HttpTest {
  db: Db;
  rt: Runtime;
  handlers: Handlers;
  runner: ReturnType<typeof fakeRunSegment>;
  close(): Promise<void>;
}

/** Authenticate from test headers: `x-user: <id>` and `x-operator: 1`. */
export async function headerAuth(request: Request): Promise<Caller | null> {
  const userId = request.headers.get('x-user');
  return userId ? { userId, isOperator: request.headers.get('x-operator') === '1' } : null;
}

export async function openHttpTest(
  options: { segment?: FakeSegmentOptions; deps?: Partial<HandlerDeps> } = {},
): Promise<HttpTest> {
  const db = await openTestDb();
  const rt: Runtime = { db, model: 'test-model', tools: {}, config: { ...configFromEnv({}), cronSecret } };
  const runner = fakeRunSegment(options.segment);
  const handlers = createHandlers({ rt, authenticate: headerAuth, runSegment: runner, ...options.deps });
  return {
    db, rt, handlers, runner,
    async close() {
      await handlers.segments.settle();
      await db.close();
    },
  };
}

export interface RequestOptions {
  user?: string;
  operator?: boolean;
  body?: unknown;
  /** Raw body text (sent as is). */
  raw?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** A Request to the handlers, as a browser with a session would send it. */
export function makeRequest(method: string, path: string, options: RequestOptions = {}): Request {
  const headers: Record<string, string> = { ...options.headers };
  if (options.user) headers['x-user'] = options.user;
  if (options.operator) headers['x-operator'] = '1';
  let body: string | undefined = options.raw;
  if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
    headers['content-type'] = 'application/json';
  }
  return new Request(`${base}${path}`, { method, headers, body, signal: options.signal });
}

export interface SseRead {
  events: EventSourceMessage[];
  comments: string[];
  /** The first `retry:` hint (the stream's opening one). */
  retry: number | undefined;
  /** Every `retry:` hint, in order. */
  retries: number[];
  /** True when the server ended the stream (not us). */
  ended: boolean;
}

/**
 * Read an SSE body until it ends, `until(event)` is true, or `max` events; then cancel it.
 */
export async function readSse(
  response: Response,
  options: { until?: (event: EventSourceMessage) => boolean; max?: number; onComment?: (c: string) => boolean } = {},
): Promise<SseRead> {
  const result: SseRead = { events: [], comments: [], retry: undefined, retries: [], ended: false };
  let stop = false;
  const parser = createParser({
    onEvent(event) {
      result.events.push(event);
      if (options.until?.(event) || (options.max !== undefined && result.events.length >= options.max)) stop = true;
    },
    onComment(comment) {
      result.comments.push(comment);
      if (options.onComment?.(comment)) stop = true;
    },
    onRetry(retry) {
      result.retry ??= retry;
      result.retries.push(retry);
    },
  });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  while (!stop) {
    const { done, value } = await reader.read();
    if (done) {
      result.ended = true;
      break;
    }
    parser.feed(decoder.decode(value, { stream: true }));
  }
  if (!result.ended) await reader.cancel();
  return result;
}

/** The agent-kit event payload of an SSE message. */
export function payload(event: EventSourceMessage): {
  seq: number; runId: string | null; fence: number; type: string; data: Record<string, unknown>; createdAt: string;
} {
  return JSON.parse(event.data);
}

/** Row counts of every table a request could write, to prove a refused request wrote nothing. */
export async function countRows(db: Db): Promise<Record<string, number>> {
  const tables = ['threads', 'runs', 'messages', 'thread_events', 'jobs', 'inputs', 'effects', 'steps'];
  const counts: Record<string, number> = {};
  for (const table of tables) {
    const [row] = await db.query<{ n: number | string }>(`select count(*) as n from agent_kit_${table}`);
    counts[table] = Number(row!.n);
  }
  return counts;
}
