// The read routes: a caller's threads, one thread's messages and runs, the run list and one run
// in detail. A thread or run the caller may not see is "not found", never "forbidden".
import { z } from 'zod';
import { listRunsPage, maxRunListSize, readRunDetail } from '../event-log/read-runs.js';
import {
  defaultStaleMs, maxStaleSeconds, parseStaleSeconds, readStoreStatus, statusAlerts,
} from '../event-log/read-status.js';
import {
  listThreadMessages, listThreadRuns, listThreadsPage, maxThreadItems, readThread,
} from '../event-log/read-threads.js';
import { maxTurnNo, readTurnPage } from '../event-log/turn-window.js';
import { closedStatuses, runStatuses, type RunStatus } from '../lease/run-row.js';
import { requireCaller, requireOperator, requireRunAccess, requireThreadAccess, type Caller } from './auth.js';
import type { HandlerContext, RouteHandler } from './context.js';
import { HttpError, jsonResponse } from './http-error.js';
import { idParam, parseWith, readIdParam, readLimit } from './request.js';

const defaultListSize = 50;

/** A yes/no query parameter: 1 or true, 0 or false, or absent (no). Anything else is a 400. */
const flag = z.enum(['0', '1', 'false', 'true']).optional()
  .transform((v) => v === '1' || v === 'true');

/** An id in the query, if given: `?before=` (the row a page starts after, ADR-0044), `?thread=`. */
function readIdQuery(url: URL, name: string): string | undefined {
  const raw = url.searchParams.get(name);
  return raw === null ? undefined : parseWith(idParam, raw, `query parameter "${name}"`);
}

function readFlag(url: URL, name: string): boolean {
  return parseWith(flag, url.searchParams.get(name) ?? undefined, `query parameter "${name}"`);
}

/**
 * GET /api/threads: the caller's threads, newest first; operators may ask for all with ?all=1.
 * `next` is the `?before=` of the next, older page (null on the last).
 */
export function createThreadsHandler(ctx: HandlerContext): RouteHandler {
  return async (request) => {
    const caller = await requireCaller(ctx.authenticate, request);
    const url = new URL(request.url);
    const all = readFlag(url, 'all'); // operators: everyone's threads, not the caller's own
    if (all && !caller.isOperator) throw new HttpError('FORBIDDEN', 'only an operator may list every thread');
    const limit = readLimit(url, defaultListSize, maxThreadItems);
    const before = readIdQuery(url, 'before');
    const { threads, next } = await listThreadsPage(ctx.rt.db, { ownerId: all ? null : caller.userId, before, limit });
    return jsonResponse({ threads, next });
  };
}

const turnCount = z.coerce.number().int().min(1).max(maxThreadItems);
const turnNumber = z.coerce.number().int().min(1).max(maxTurnNo);

/**
 * GET /api/threads/:id: the thread, its messages and its runs. With `?turns=N`, a page of turns
 * (ADR-0049): the latest N (and any older turn still open), or with `&beforeTurn=T` the N before
 * turn T; their runs and messages, and in `window` the span of the event log that replays them.
 */
export function createThreadHandler(ctx: HandlerContext): RouteHandler {
  return async (request, params = {}) => {
    const caller = await requireCaller(ctx.authenticate, request);
    const threadId = readIdParam(params, 'id');
    const url = new URL(request.url);
    const turnsRaw = url.searchParams.get('turns');
    const beforeRaw = url.searchParams.get('beforeTurn');
    const turns = turnsRaw === null ? undefined : parseWith(turnCount, turnsRaw, 'query parameter "turns"');
    const beforeTurn = beforeRaw === null ? undefined : parseWith(turnNumber, beforeRaw, 'query parameter "beforeTurn"');
    if (beforeTurn !== undefined && turns === undefined) {
      throw new HttpError('INVALID_ARGUMENT', 'invalid query parameter "beforeTurn": only with "turns"');
    }
    await requireThreadAccess(ctx.rt.db, caller, threadId);
    const thread = await readThread(ctx.rt.db, threadId);
    if (!thread) throw new HttpError('NOT_FOUND', `thread ${threadId} not found`);
    const shown = ownersFor(caller);
    if (turns !== undefined) {
      const page = await readTurnPage(ctx.rt.db, threadId, { turns, beforeTurn });
      return jsonResponse({ thread, ...page, runs: (await withReplySoFar(ctx, page.runs)).map(shown) });
    }
    const messages = await listThreadMessages(ctx.rt.db, threadId);
    const runs = (await withReplySoFar(ctx, await listThreadRuns(ctx.rt.db, threadId))).map(shown);
    return jsonResponse({ thread, messages, runs });
  };
}

/**
 * The runs, each turn under way whose question the user answered by typing a message (ADR-0087)
 * with `replySoFar`: its reply up to the last such answer, the text and the questions as a closed
 * run's message holds them. The read has no reply of a turn under way, and a chat shows this
 * one in pieces around the answers; the rest streams after the last answer in a message of its
 * own (the events route's resume starts there).
 */
async function withReplySoFar<R extends { id: string; status: string }>(ctx: HandlerContext, runs: R[]) {
  if (runs.every((run) => closedStatuses.includes(run.status as RunStatus))) return runs;
  // (Imported here, as the engine is: the read routes do not load it for threads at rest.)
  const [{ committedText, loadJournal }, { askedIn }] = await Promise.all([
    import('../turn/journal.js'), import('../turn/reply-content.js'),
  ]);
  return Promise.all(runs.map(async (run) => {
    if (closedStatuses.includes(run.status as RunStatus)) return run;
    const journal = await loadJournal(ctx.rt.db, run.id);
    const asked = await askedIn(ctx.rt.db, run.id, journal, ctx.rt.tools);
    const last = asked.findLastIndex((a) => a.answeredBy !== undefined);
    if (last < 0) return run;
    return { ...run, replySoFar: { text: committedText(journal).slice(0, asked[last]!.at), asked: asked.slice(0, last + 1) } };
  }));
}

/**
 * GET /api/runs: runs newest first with status, lease holder, fence, attempts, lease expiry and
 * effect counts (all, in doubt). Operators see every run; other callers the runs of their own
 * threads (an operator's own with `?mine=1`). `?thread=` (one thread's runs), `?status=` and
 * `?inDoubt=1` (only runs with an effect in doubt) filter the list. `next` is the `?before=` of
 * the next, older page (null on the last).
 */
export function createRunsHandler(ctx: HandlerContext): RouteHandler {
  return async (request) => {
    const caller = await requireCaller(ctx.authenticate, request);
    const url = new URL(request.url);
    const limit = readLimit(url, defaultListSize, maxRunListSize);
    const status = parseWith(z.enum(runStatuses).optional(), url.searchParams.get('status') ?? undefined,
      'query parameter "status"');
    const inDoubt = readFlag(url, 'inDoubt');
    const mine = readFlag(url, 'mine') || !caller.isOperator; // operators: only their own threads' runs
    const ownerId = mine ? caller.userId : null;
    const before = readIdQuery(url, 'before');
    const threadId = readIdQuery(url, 'thread');
    const { runs, next } = await listRunsPage(ctx.rt.db, { ownerId, threadId, status, inDoubt, before, limit });
    return jsonResponse({ runs: runs.map(ownersFor(caller)), next });
  };
}

/** GET /api/runs/:id: the run, its effects, journal steps, segments and messages, and its first seq. */
export function createRunHandler(ctx: HandlerContext): RouteHandler {
  return async (request, params = {}) => {
    const caller = await requireCaller(ctx.authenticate, request);
    const runId = readIdParam(params, 'id');
    await requireRunAccess(ctx.rt.db, caller, runId);
    const detail = await readRunDetail(ctx.rt.db, runId);
    if (!detail) throw new HttpError('NOT_FOUND', `run ${runId} not found`);
    if (caller.isOperator) return jsonResponse(detail);
    const shown = ownersFor(caller);
    return jsonResponse({
      ...detail, run: shown(detail.run), segments: detail.segments.map(shown), effects: detail.effects.map(withoutOperatorNote),
    });
  };
}

/**
 * How a run (or a segment) shows its lease owner to `caller`: as it is to an operator; as null to
 * anyone else, to whom the name (a host name and a process id) says nothing about their turn and
 * much about the servers (ADR-0107).
 */
function ownersFor(caller: Caller) {
  return <T extends { owner: string | null }>(row: T): T => (caller.isOperator ? row : { ...row, owner: null });
}

/**
 * An effect as its run's owner sees it: an operator's verdict without their note, which they
 * wrote for operators (resolve-effect, ADR-0043).
 */
function withoutOperatorNote<T extends { result: unknown }>(effect: T): T {
  const result = effect.result as { resolved?: Record<string, unknown> } | null;
  if (!result?.resolved || !('note' in result.resolved)) return effect;
  const { note: _note, ...resolved } = result.resolved;
  return { ...effect, result: { ...result, resolved } };
}

/**
 * GET /api/status (operators): the runs in flight by status, expired leases, due jobs, effects
 * in doubt, and `alerts` for what needs a person (ADR-0053); `?stale=SECONDS` (default 120) is
 * how long an expired lease or a due job may wait before it does.
 */
export function createStatusHandler(ctx: HandlerContext): RouteHandler {
  return async (request) => {
    requireOperator(await requireCaller(ctx.authenticate, request));
    const raw = new URL(request.url).searchParams.get('stale');
    const seconds = raw === null ? defaultStaleMs / 1000 : parseStaleSeconds(raw);
    if (seconds === null) {
      throw new HttpError('INVALID_ARGUMENT', `invalid query parameter "stale": expected whole seconds 1..${maxStaleSeconds}`);
    }
    const staleMs = seconds * 1000;
    const status = await readStoreStatus(ctx.rt.db);
    return jsonResponse({ ...status, alerts: statusAlerts(status, staleMs) });
  };
}
