// The run actions: answer a waiting run, cancel (a stored intent), restore an earlier answer, and
// an operator's takeover, release, reply in a held run's place and verdict on an effect in doubt. Each is one SQL statement that decides under the
// row's lock; when the run is left queued, a background segment picks it up at once instead of
// waiting for the drain.
import { resolveEffect } from '../effect-ledger/index.js';
import { restoreTurn } from '../queue/restore-turn.js';
import { callIntent, cancelRun, releaseRun, replyToRun, takeOverRun } from '../queue/run-intents.js';
import { requireCaller, requireOperator, requireRunAccess } from './auth.js';
import type { HandlerContext, RouteHandler } from './context.js';
import { HttpError, jsonResponse } from './http-error.js';
import {
  cancelBodySchema, inputBodySchema, noBodySchema, readIdParam, readJsonBody, readOptionalJsonBody, replyBodySchema, resolveEffectBodySchema,
  type InputBody,
} from './request.js';
import type { RunAccess } from '../event-log/read-runs.js';
import { toolKind } from '../model/agent-tool.js';

/** POST /api/runs/:id/input {questionId, answer | approved}: a second answer is a 409. */
export function createRunInputHandler(ctx: HandlerContext): RouteHandler {
  return async (request, params = {}) => {
    const caller = await requireCaller(ctx.authenticate, request);
    const runId = readIdParam(params, 'id');
    const body = await readJsonBody(request, inputBodySchema, ctx.maxBodyBytes);
    await checkAnswerFits(ctx, runId, await requireRunAccess(ctx.rt.db, caller, runId), body);
    const data = 'answer' in body ? { answer: body.answer } : { approved: body.approved };
    const status = await callIntent(ctx.rt.db, 'agent_kit_submit_input($1, $2, $3::jsonb)', runId,
      [body.questionId, JSON.stringify({ ...data, by: caller.userId })]);
    if (status === 'queued') ctx.segments.start(runId);
    return jsonResponse({ runId, status });
  };
}

/**
 * Refuse an answer the run's question cannot take: an approval answers `approved`, a question an
 * `answer` (400; an approval's text answer was stored and read as a no). While the run still runs
 * (an answer may come before it parks, ADR-0012), the question must be one of its tool calls, a
 * question or an approval (409). Both facts only ever become true, so checking before the
 * statement that stores the answer decides nothing late; that statement checks the run's state.
 */
async function checkAnswerFits(ctx: HandlerContext, runId: string, run: RunAccess, body: InputBody) {
  let kind: string | undefined;
  if (run.status === 'waiting_input' && run.waitingFor?.id === body.questionId) kind = run.waitingFor.kind;
  else if (run.status === 'running') {
    const [call] = await ctx.rt.db.query<{ tool_name: string }>(
      `select c->>'toolName' as tool_name
       from agent_kit_thread_events e, jsonb_array_elements(e.data->'toolCalls') c
       where e.thread_id = $1 and e.run_id = $2 and e.type = 'step-finished' and c->>'toolCallId' = $3
       limit 1`, [run.threadId, runId, body.questionId]);
    if (!call) throw new HttpError('CONFLICT', `run ${runId} has asked nothing under "${body.questionId}"`);
    const tool = ctx.rt.tools[call.tool_name];
    kind = tool && toolKind(tool); // (a tool this process does not have: the run decides)
    if (kind === 'effect') throw new HttpError('CONFLICT', `${call.tool_name} call "${body.questionId}" takes no answer`);
  }
  if (kind === 'approval' && !('approved' in body)) {
    throw new HttpError('INVALID_ARGUMENT', `"${body.questionId}" asks for an approval: send { questionId, approved: true | false }`);
  }
  if (kind === 'question' && !('answer' in body)) {
    throw new HttpError('INVALID_ARGUMENT', `"${body.questionId}" is a question: send { questionId, answer }`);
  }
}

/**
 * POST /api/runs/:id/cancel: stored; the run's segment closes it as aborted. An optional body
 * `{ shownSeq }` says how far the caller had seen the reply: the run keeps its text as of then.
 */
export function createRunCancelHandler(ctx: HandlerContext): RouteHandler {
  return async (request, params = {}) => {
    const caller = await requireCaller(ctx.authenticate, request);
    const runId = readIdParam(params, 'id');
    const body = await readOptionalJsonBody(request, cancelBodySchema, ctx.maxBodyBytes);
    await requireRunAccess(ctx.rt.db, caller, runId);
    const { status } = await cancelRun(ctx.rt.db, { runId, shownSeq: body.shownSeq });
    // A running segment sees the intent at its next write; any other run needs a segment to close it.
    if (status !== 'running') ctx.segments.start(runId);
    return jsonResponse({ runId, status, cancelRequested: true }, 202);
  };
}

/** POST /api/runs/:id/takeover (operator): park the run for a human, now or at its next write. */
export function createRunTakeoverHandler(ctx: HandlerContext): RouteHandler {
  return async (request, params = {}) => {
    const caller = await requireCaller(ctx.authenticate, request);
    const runId = readIdParam(params, 'id');
    await readOptionalJsonBody(request, noBodySchema, ctx.maxBodyBytes);
    await requireRunAccess(ctx.rt.db, caller, runId);
    requireOperator(caller);
    return jsonResponse(await takeOverRun(ctx.rt.db, { runId, by: caller.userId }));
  };
}

/** POST /api/runs/:id/release (operator): hand the run back; it continues where it stopped. */
export function createRunReleaseHandler(ctx: HandlerContext): RouteHandler {
  return async (request, params = {}) => {
    const caller = await requireCaller(ctx.authenticate, request);
    const runId = readIdParam(params, 'id');
    await readOptionalJsonBody(request, noBodySchema, ctx.maxBodyBytes);
    await requireRunAccess(ctx.rt.db, caller, runId);
    requireOperator(caller);
    const result = await releaseRun(ctx.rt.db, { runId });
    if (result.status === 'queued') ctx.segments.start(runId);
    return jsonResponse(result);
  };
}

/**
 * POST /api/runs/:id/reply {text} (operator): answer in a held run's place (ADR-0114). The run,
 * `waiting_takeover`, closes `completed` with the text as its message, naming the operator; 409
 * for a run that is not held (a running one parks at its next write: wait for it).
 */
export function createRunReplyHandler(ctx: HandlerContext): RouteHandler {
  return async (request, params = {}) => {
    const caller = await requireCaller(ctx.authenticate, request);
    const runId = readIdParam(params, 'id');
    await requireRunAccess(ctx.rt.db, caller, runId);
    requireOperator(caller);
    const body = await readJsonBody(request, replyBodySchema, ctx.maxBodyBytes);
    const result = await replyToRun(ctx.rt.db, { runId, by: caller.userId, text: body.text });
    // The thread's next queued turn (a message sent while the run was held) goes on here at once,
    // as a release's run does, rather than at the next drain.
    if (result.nextRunId) ctx.segments.start(result.nextRunId);
    return jsonResponse(result);
  };
}

/**
 * POST /api/runs/:id/resolve-effect {key, happened, note?} (operator): the verdict on an effect in
 * doubt after checking the outside system (ADR-0042, ADR-0043). 404 for no such effect, 409 when
 * it is not in doubt; the thread gets an effect-resolved event.
 */
export function createRunResolveEffectHandler(ctx: HandlerContext): RouteHandler {
  return async (request, params = {}) => {
    const caller = await requireCaller(ctx.authenticate, request);
    const runId = readIdParam(params, 'id');
    await requireRunAccess(ctx.rt.db, caller, runId);
    requireOperator(caller);
    const body = await readJsonBody(request, resolveEffectBodySchema, ctx.maxBodyBytes);
    const effect = await resolveEffect(ctx.rt.db, { runId, ...body, by: caller.userId });
    return jsonResponse({ runId, key: effect.key, tool: effect.tool, status: effect.status, result: effect.result });
  };
}

/**
 * POST /api/runs/:id/restore: put an earlier answer (a reply a regeneration replaced) back in the
 * conversation, ADR-0096. The run in its place and every turn after that one are superseded, and
 * the thread gets a turn-restored event. `restored: false` when it was in the conversation
 * already; 409 while a turn is under way, or for a run left out as a turn after a replaced reply.
 */
export function createRunRestoreHandler(ctx: HandlerContext): RouteHandler {
  return async (request, params = {}) => {
    const caller = await requireCaller(ctx.authenticate, request);
    const runId = readIdParam(params, 'id');
    await readOptionalJsonBody(request, noBodySchema, ctx.maxBodyBytes);
    const access = await requireRunAccess(ctx.rt.db, caller, runId);
    const result = await restoreTurn(ctx.rt.db, { runId, ownerId: access.ownerId });
    return jsonResponse(result);
  };
}
