// The cron routes: one queue drain, one reaper pass. A platform's scheduler calls them with
// `Authorization: Bearer $CRON_SECRET`; Vercel Cron sends GET, so both GET and POST are routed.
// They are safe to overlap: the claim and the fence decide, there is no leader. See ADR-0004.
import { z } from 'zod';
import { requireCronSecret } from './auth.js';
import type { HandlerContext, RouteHandler } from './context.js';
import { HttpError, jsonResponse } from './http-error.js';
import { parseWith } from './request.js';

// At most an hour, as AGENT_KIT_INVOCATION_BUDGET: a larger value is most likely milliseconds.
const budgetSchema = z.coerce.number().positive().max(3_600).optional();

/**
 * A scheduler's URL is written once and then runs unattended: a parameter the route does not
 * take (`?concurrency=4`, `?limit=100`, a misspelt `?budjet=`) would be ignored for ever, so it
 * is refused, naming what the route takes. Names starting `x-` or `_` pass.
 */
function refuseUnknownParams(url: URL, taken: readonly string[]): void {
  // A platform's own (`x-vercel-protection-bypass`) and a cache-buster (`_=…`) are not ours to refuse.
  const unknown = [...new Set(url.searchParams.keys())]
    .filter((name) => !taken.includes(name) && !/^(x-|_)/i.test(name));
  if (unknown.length === 0) return;
  const takes = taken.length ? `it takes only ${taken.map((name) => `"${name}"`).join(', ')}` : 'it takes none';
  throw new HttpError('INVALID_ARGUMENT',
    `query parameter ${unknown.slice(0, 3).map((name) => `"${name.slice(0, 40)}"`).join(', ')} is not one of this route's: ${takes}`);
}

/** POST /api/cron/drain[?budget=SECONDS]: drain for at most the budget (default the invocation's). */
export function createCronDrainHandler(ctx: HandlerContext): RouteHandler {
  return async (request) => {
    requireCronSecret(request, ctx.cronSecret);
    const url = new URL(request.url);
    refuseUnknownParams(url, ['budget']);
    const raw = url.searchParams.get('budget') ?? undefined;
    const budgetSeconds = parseWith(budgetSchema, raw, 'query parameter "budget"');
    // Never more than one invocation's budget: the lease must not outlive this request.
    const budgetMs = Math.min((budgetSeconds ?? Infinity) * 1000, ctx.rt.config.invocationBudgetMs);
    const drainQueue = await ctx.drainQueue();
    const report = await drainQueue(ctx.rt, { budgetMs });
    return jsonResponse({ drain: report });
  };
}

/** POST /api/cron/reap: one reaper pass. */
export function createCronReapHandler(ctx: HandlerContext): RouteHandler {
  return async (request) => {
    requireCronSecret(request, ctx.cronSecret);
    refuseUnknownParams(new URL(request.url), []);
    const reapExpiredRuns = await ctx.reapExpiredRuns();
    const report = await reapExpiredRuns(ctx.rt);
    return jsonResponse({ reap: report });
  };
}
