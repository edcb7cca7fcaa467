// The two streaming routes. POST /api/chat stores the message, starts the turn's segment in the
// background (not tied to the request: a disconnect never stops a turn) and streams the thread
// from just before the message until the run closes or parks (with `regenerate: true`, a new run
// for an earlier message, from its first event: ADR-0091). GET /api/threads/:id/events replays
// from Last-Event-ID or ?after= and follows. See ADR-0003.
import { followEvents } from '../event-log/follow-events.js';
import {
  findMessageSeq, findRunFirstSeq, readEventsThrough, readRunBoundary, type ThreadEvent,
} from '../event-log/read-events.js';
import { readRunAccess } from '../event-log/read-runs.js';
import { findLatestRunId, findRunsUnderWay } from '../event-log/read-threads.js';
import { regenerateTurn } from '../queue/regenerate-turn.js';
import { startTurn } from '../queue/start-turn.js';
import { carryOn, type CarryOn } from './carry-on.js';
import { createUIMessageStreamEncoder, uiMessageStreamHeaders } from './ai-sdk-stream.js';
import { requireCaller, requireRunAccess, requireThreadAccess, type Caller } from './auth.js';
import type { HandlerContext, RouteHandler } from './context.js';
import { HttpError } from './http-error.js';
import {
  chatBodySchema, readCursor, readIdParam, readJsonBody, readStreamFormat, parseWith, idParam,
  type ChatBody, type StreamFormat,
} from './request.js';
import { createEventEncoder, eventStreamResponse, withoutLeaseOwner } from './sse.js';

/** The run's turn is over for this stream: it closed, or parked (a question, a takeover, a slice). */
export function endsRun(runId: string) {
  return (event: ThreadEvent) =>
    event.runId === runId && (event.type === 'run-closed' || event.type === 'run-parked');
}

interface StreamSpec {
  /** When the request arrived: the stream's time counts from then, as its invocation's does. */
  startedAtMs: number;
  threadId: string;
  /** The caller is an operator: the events keep the lease owners' names, which only operators see. */
  operator: boolean;
  afterSeq: number;
  format: StreamFormat;
  /** The run an ai-sdk stream shows (and whose end ends the stream). */
  runId: string | null;
  until?: (event: ThreadEvent) => boolean;
  headers?: Record<string, string>;
  /** An ai-sdk stream resumed with a cursor: the run's events the client already has. */
  seen?: readonly ThreadEvent[];
  /** The client shows `seen` in another message: this stream is a message of its own (ADR-0087). */
  ownMessage?: boolean;
  /** The client has every event up to where the run now waits: the stream only ends, saying so. */
  endsAtOnce?: boolean;
  /** The reader carries the thread's parked turns on (ADR-0120). */
  carryOn?: CarryOn;
}

function streamResponse(ctx: HandlerContext, request: Request, stream: StreamSpec): Response {
  const aiSdk = stream.format === 'ai-sdk' && stream.runId !== null;
  const encoder = aiSdk ? createUIMessageStreamEncoder(stream.runId!, stream.seen, stream) : createEventEncoder();
  if (!stream.operator) {
    const encode = encoder.encode.bind(encoder);
    encoder.encode = (event) => encode(withoutLeaseOwner(event));
  }
  if (stream.carryOn) {
    const { carryOn } = stream;
    const encode = encoder.encode.bind(encoder);
    encoder.encode = (event) => {
      carryOn.saw(event);
      return encode(event);
    };
  }
  const follower = followEvents(ctx.rt.db, {
    threadId: stream.threadId,
    afterSeq: stream.afterSeq,
    // A client that already has the whole message gets only the stream's end.
    signal: ('done' in encoder && encoder.done) || stream.endsAtOnce ? AbortSignal.abort() : request.signal,
    until: stream.until,
    // Through an outage for as long as the stream lasts (an outsider's trial: a 75 s one ended
    // useChat streams with STORE_UNAVAILABLE at the minute, while their turns went on).
    outageWaitMs: ctx.maxStreamMs,
  });
  return eventStreamResponse(follower, {
    encoder,
    keepAliveMs: ctx.keepAliveMs,
    retryMs: ctx.retryMs,
    maxStreamMs: ctx.maxStreamMs,
    startedAtMs: stream.startedAtMs,
    headers: { ...(aiSdk ? uiMessageStreamHeaders : {}), ...exposed(stream.headers) },
    log: ctx.rt.log,
    onClose: stream.carryOn?.close,
    endSignal: stream.carryOn?.handOff,
  });
}

/**
 * `headers`, readable by a page of another origin too: a browser hides a cross-origin response's
 * headers from its script unless they are exposed, and the client's stop() needs the run id.
 * (The app's CORS still decides who may read the response at all.)
 */
function exposed(headers: Record<string, string> | undefined): Record<string, string> {
  if (!headers) return {};
  return { ...headers, 'access-control-expose-headers': Object.keys(headers).join(', ') };
}

export function createChatHandler(ctx: HandlerContext): RouteHandler {
  return async (request) => {
    const startedAtMs = Date.now();
    const caller = await requireCaller(ctx.authenticate, request);
    const format = readStreamFormat(new URL(request.url));
    const body = await readJsonBody(request, chatBodySchema, ctx.maxBodyBytes);
    if (body.regenerate) return regenerated(ctx, request, startedAtMs, format, caller, body);
    const turn = await startTurn(ctx.rt.db, {
      threadId: body.threadId,
      ownerId: caller.userId,
      text: body.message!,
      clientMessageId: body.clientMessageId,
      jobDelayMs: ctx.chatJobDelayMs,
    });
    if (!turn.created) await requireSameMessage(ctx, turn.messageId, body.message!);
    const until = await runTurn(ctx, turn, startedAtMs);
    const messageSeq = await findMessageSeq(ctx.rt.db, turn.threadId, turn.messageId);
    const afterSeq = Math.max(0, (messageSeq ?? 1) - 1);
    return streamResponse(ctx, request, {
      startedAtMs,
      threadId: turn.threadId,
      operator: caller.isOperator,
      afterSeq,
      format,
      runId: turn.runId,
      ...(format === 'ai-sdk' && turn.kind !== 'turn' ? await answered(ctx, turn, afterSeq) : {}),
      until,
      headers: turnHeaders(turn),
    });
  };
}

/**
 * Start the segment of a turn the request made, and say where its stream ends: at the run's end.
 * The same request again (a retried POST, a regeneration sent again, ADR-0092) runs the turn only
 * if nobody has claimed it yet (the claim decides anyway), and streams it as it is now: past a
 * question it asked and went on from. The segment's deadline counts from the request's arrival.
 */
async function runTurn(
  ctx: HandlerContext, turn: { runId: string; created: boolean }, startedAtMs: number,
): Promise<StreamSpec['until']> {
  const deadlineMs = startedAtMs + ctx.rt.config.invocationBudgetMs;
  if (turn.created) {
    ctx.segments.start(turn.runId, deadlineMs);
    return endsRun(turn.runId);
  }
  if ((await readRunAccess(ctx.rt.db, turn.runId))?.status === 'queued') ctx.segments.start(turn.runId, deadlineMs);
  return (await runEnd(ctx, turn.runId)).until;
}

/** What a chat response names: the thread, the run (a client's stop cancels it) and the message. */
function turnHeaders(turn: { threadId: string; runId: string; messageId: string }): Record<string, string> {
  return { 'x-agent-kit-thread-id': turn.threadId, 'x-agent-kit-run-id': turn.runId, 'x-agent-kit-message-id': turn.messageId };
}

/**
 * `POST /api/chat` with `regenerate: true`: the turn of an earlier message asked again, as a new
 * run (ADR-0091), streamed from its first event (the `turn-regenerated` that replaced the old turns).
 */
async function regenerated(
  ctx: HandlerContext, request: Request, startedAtMs: number, format: StreamFormat, caller: Caller, body: ChatBody,
): Promise<Response> {
  const turn = await regenerateTurn(ctx.rt.db, {
    threadId: body.threadId!, ownerId: caller.userId, message: body.clientMessageId!, text: body.message, jobDelayMs: ctx.chatJobDelayMs,
    ...(body.replaces ? { replaces: body.replaces } : {}),
  });
  const until = await runTurn(ctx, turn, startedAtMs);
  return streamResponse(ctx, request, {
    startedAtMs,
    threadId: turn.threadId,
    operator: caller.isOperator,
    afterSeq: Math.max(0, ((await findRunFirstSeq(ctx.rt.db, turn.runId)) ?? 1) - 1),
    format,
    runId: turn.runId,
    until,
    headers: turnHeaders(turn),
  });
}

/**
 * A message that answered its run's question (sent while the run waited, or sent again since):
 * the client shows the run so far in the message that asked, so the stream is a message of its
 * own that goes on from there, the run's earlier text not sent again (ADR-0087). Not so for a
 * message that started its run (a retried POST): its stream is the whole reply.
 */
async function answered(
  ctx: HandlerContext, turn: { threadId: string; runId: string }, afterSeq: number,
): Promise<Pick<StreamSpec, 'seen' | 'ownMessage'>> {
  const { seen } = await runSoFar(ctx, turn.threadId, turn.runId, afterSeq);
  return seen ? { seen, ownMessage: true } : {};
}

/**
 * Where an ai-sdk stream of one run starts for a client that has the thread's events through
 * `afterSeq`: past the run's start, it goes on from there with the run's events up to it as
 * `seen`; before it, it starts at the run's first event.
 */
async function runSoFar(
  ctx: HandlerContext, threadId: string, runId: string, afterSeq: number,
): Promise<{ afterSeq: number; seen?: ThreadEvent[] }> {
  const beforeRun = Math.max(0, ((await findRunFirstSeq(ctx.rt.db, runId)) ?? 1) - 1);
  if (afterSeq <= beforeRun) return { afterSeq: beforeRun };
  return { afterSeq, seen: await readEventsThrough(ctx.rt.db, threadId, beforeRun, afterSeq) };
}

/**
 * The last chat message that answered a question of the run (a message sent while it waited,
 * ADR-0087): its event's seq and the id the chat knows it by. Null when none did.
 */
async function lastTypedAnswer(ctx: HandlerContext, runId: string): Promise<{ seq: number; clientId: string } | null> {
  const [row] = await ctx.rt.db.query<{ seq: number | string; client_id: string }>(
    `select e.seq, coalesce(m.client_message_id, m.id::text) as client_id
     from agent_kit_inputs i
     join agent_kit_messages m on m.id = (i.data->>'messageId')::uuid
     join agent_kit_thread_events e on e.run_id = i.run_id and e.type = 'message' and e.data->>'messageId' = m.id::text
     where i.run_id = $1
     order by e.seq desc limit 1`, [runId]);
  return row ? { seq: Number(row.seq), clientId: row.client_id } : null;
}

/**
 * A client message id names one message: sent again it must be the same text (a retry), else
 * the new text would be dropped without a word while the first message's turn streamed (409).
 */
async function requireSameMessage(ctx: HandlerContext, messageId: string, text: string): Promise<void> {
  const [stored] = await ctx.rt.db.query<{ text: string | null; client_message_id: string }>(
    `select content->>'text' as text, client_message_id from agent_kit_messages where id = $1`, [messageId]);
  if (stored && stored.text !== text) {
    throw new HttpError('CONFLICT',
      `clientMessageId "${stored.client_message_id}" was sent with another message; a new message needs a new id`);
  }
}

export function createThreadEventsHandler(ctx: HandlerContext): RouteHandler {
  return async (request, params = {}) => {
    // The invocation's time counts from here: the stream's, and a turn's this request carries on.
    const startedAtMs = Date.now();
    const deadlineMs = startedAtMs + ctx.rt.config.invocationBudgetMs;
    const caller = await requireCaller(ctx.authenticate, request);
    const threadId = readIdParam(params, 'id');
    const url = new URL(request.url);
    const format = readStreamFormat(url);
    let afterSeq = readCursor(request, url);
    const { lastSeq } = await requireThreadAccess(ctx.rt.db, caller, threadId);
    // A cursor past the log's end would wait, silent, until the log reached it, and miss every
    // event before: a cursor of another thread, or of a database since restored from a backup.
    if (afterSeq > lastSeq) {
      throw new HttpError('CONFLICT', `the cursor ${afterSeq} is past the thread's last event (seq ${lastSeq}): ` +
        'read the thread again (a cursor of another thread, or of a database restored from a backup?)');
    }
    let runId: string | null = null;
    let until: StreamSpec['until'];
    let seen: readonly ThreadEvent[] | undefined;
    let ownMessage: boolean | undefined;
    let endsAtOnce = false;
    let underWay: string[] | undefined;
    let goesOnAfter: string | undefined;
    if (format === 'ai-sdk') {
      // One assistant message: a run of this thread (?runId=; by default the one under way or next
      // to run, else the latest), replayed from the run's first event unless the client resumes
      // with a cursor.
      const requested = url.searchParams.get('runId');
      if (requested) runId = parseWith(idParam, requested, 'query parameter "runId"');
      else {
        // The turns under way, which the client reads on to one by one (ADR-0088).
        underWay = await findRunsUnderWay(ctx.rt.db, threadId);
        runId = underWay[0] ?? await findLatestRunId(ctx.rt.db, threadId);
      }
      if (!runId) throw new HttpError('NOT_FOUND', `thread ${threadId} has no run`);
      const access = await requireRunAccess(ctx.rt.db, caller, runId);
      if (access.threadId !== threadId) throw new HttpError('NOT_FOUND', `run ${runId} not found`);
      ({ afterSeq, seen } = await runSoFar(ctx, threadId, runId, afterSeq));
      if (!requested && seen === undefined && underWay?.includes(runId)) {
        // A chat reopened from the thread's read shows the turn up to the last answer typed to
        // its question (the read's replySoFar): the rest goes on after that answer, in a
        // message of its own, as it did live (ADR-0087). The header names the answer.
        const answer = await lastTypedAnswer(ctx, runId);
        if (answer) {
          ({ seen, ownMessage } = await answered(ctx, { threadId, runId }, answer.seq));
          if (seen) [afterSeq, goesOnAfter] = [answer.seq, answer.clientId];
        }
      }
      const end = await runEnd(ctx, runId);
      until = end.until;
      // Read on from past the question the run still waits on (a stream cut before its `finish`):
      // no event will end this stream, so it ends at once, with the park's status. (Not a run an
      // operator holds: its reader reads on at each stream's end, so that stream lasts its budget.)
      endsAtOnce = end.waitsForInputSince !== null && afterSeq >= end.waitsForInputSince;
    }
    // An ai-sdk stream names its run, as the chat route's does: a client's stop cancels it. One of
    // the thread's current run also names the turns under way, in order (ADR-0088).
    const headers = runId
      ? {
        'x-agent-kit-run-id': runId, ...(underWay?.length ? { 'x-agent-kit-runs-under-way': underWay.join(',') } : {}),
        ...(goesOnAfter ? { 'x-agent-kit-goes-on-after': goesOnAfter } : {}),
      }
      : undefined;
    // A reader of the thread runs its next turn when it is due: at once, or as the stream goes on.
    const carrying = carryOn(ctx, threadId, deadlineMs, lastSeq);
    carrying.check('connect');
    return streamResponse(ctx, request, {
      startedAtMs, threadId, operator: caller.isOperator, afterSeq, format, runId, until, seen, ownMessage, headers, endsAtOnce,
      carryOn: carrying,
    });
  };
}

/**
 * Where a replay of one run ends (`until`): at the run's current boundary, its close, the park it
 * now waits in, or (while it runs) the next park or close. Earlier parks are passed, so a run that
 * asked a question and went on replays as one message. And the seq of the park it waits for input
 * in, if it does.
 */
async function runEnd(
  ctx: HandlerContext, runId: string,
): Promise<{ until: (event: ThreadEvent) => boolean; waitsForInputSince: number | null }> {
  const boundary = await readRunBoundary(ctx.rt.db, runId);
  const settled = boundary !== null && !['queued', 'running'].includes(boundary.status);
  const stopAtSeq = (boundary?.lastBoundarySeq ?? 0) + (settled ? 0 : 1);
  const ends = endsRun(runId);
  return {
    until: (event: ThreadEvent) => ends(event) && event.seq >= stopAtSeq,
    waitsForInputSince: boundary?.status === 'waiting_input' ? boundary.lastBoundarySeq : null,
  };
}
