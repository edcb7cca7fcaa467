// The operator page's view of GET /api/runs and GET /api/runs/:id (JSON: dates are strings),
// and the one read of both that the page's server load and its poll in the browser share.

export interface OpsRun {
  id: string;
  threadId: string;
  ownerId: string;
  turnNo: number;
  status: string;
  owner: string | null;
  fence: number;
  attempts: number;
  leaseExpiresAt: string | null;
  /** Queued to wait out a model provider's Retry-After: no claim takes it before then (ADR-0098). */
  retryDueAt: string | null;
  effects: number;
  /** Of those, effects whose outcome nobody knows (a payment that may or may not have gone out). */
  inDoubt: number;
  /** The tokens in and out its model steps reported (ADR-0065); null when none did. */
  usage: { inputTokens: number; outputTokens: number } | null;
  updatedAt: string;
}

/**
 * The runs table's lease cell at the server's `nowMs`: a running run's time left on its lease (or
 * how long ago it expired), a queued run's wait for a model retry; null for neither.
 */
export function leaseCell(
  run: Pick<OpsRun, 'status' | 'leaseExpiresAt' | 'retryDueAt'>, nowMs: number,
): { text: string; expired: boolean } | null {
  const seconds = (ms: number) => `${Math.abs(ms / 1000).toFixed(1)} s`;
  if (run.status === 'running' && run.leaseExpiresAt) {
    const leftMs = Date.parse(run.leaseExpiresAt) - nowMs;
    return leftMs > 0 ? { text: `in ${seconds(leftMs)}`, expired: false } : { text: `expired ${seconds(leftMs)} ago`, expired: true };
  }
  const waitMs = run.status === 'queued' && run.retryDueAt ? Date.parse(run.retryDueAt) - nowMs : 0;
  return waitMs > 0 ? { text: `retry in ${seconds(waitMs)}`, expired: false } : null;
}

/** The runs table's tokens cell: "1,234 / 56" (in / out), or a dash when none were reported. */
export function tokensCell(run: Pick<OpsRun, 'usage'>): string {
  const n = (count: number) => count.toLocaleString('en-US');
  return run.usage ? `${n(run.usage.inputTokens)} / ${n(run.usage.outputTokens)}` : '—';
}

/** The runs table's effects cell: the count, and how many are in doubt when any are. */
export function effectsCell(run: Pick<OpsRun, 'effects' | 'inDoubt'>): { count: string; inDoubt: string | null } {
  return { count: String(run.effects), inDoubt: run.inDoubt > 0 ? `${run.inDoubt} in doubt` : null };
}

export interface OpsEffect {
  key: string;
  status: string;
  fence: number;
  tool: string;
  input: unknown;
  result: unknown;
}

/**
 * The effect ledger's result cell: an operator's verdict in words (who found what, their note),
 * anything else as the start of its JSON.
 */
export function effectResultText(effect: Pick<OpsEffect, 'result'>): string {
  const result = effect.result as { resolved?: { by?: unknown; happened?: unknown; note?: unknown } } | null;
  const verdict = result?.resolved;
  if (verdict && typeof verdict.happened === 'boolean') {
    const found = verdict.happened ? 'it happened' : 'it did not happen';
    const note = typeof verdict.note === 'string' && verdict.note !== '' ? ` (${verdict.note})` : '';
    return `${String(verdict.by ?? 'an operator')} checked: ${found}${note}`;
  }
  return JSON.stringify(effect.result ?? null).slice(0, 80);
}

export interface OpsRunDetail {
  run: OpsRun & {
    takenOverBy: string | null; cancelRequestedAt: string | null;
    /** The run that regenerated this turn's reply, replacing it in the thread (ADR-0091). */
    supersededBy?: string | null;
  };
  effects: OpsEffect[];
  /** The seq of the run's first event: its timeline replays the thread from there. */
  firstSeq: number | null;
  /** The run whose reply this one replaced, for a regenerated run (ADR-0091); null otherwise. */
  regenerates?: { runId: string; edited: boolean } | null;
  /** The run it was put back in place of, for an earlier answer restored (ADR-0096). */
  restoredOver?: string | null;
  /** The tokens of the run's journalled model steps, added up (ADR-0065); null when none reported. */
  usage: { inputTokens?: number; outputTokens?: number; cacheReadTokens?: number; reasoningTokens?: number;
    modelSteps: number; reported: number } | null;
}

/** "1,234 tokens in (1,000 cached) · 56 out (20 reasoning)": a run's usage for the operator. */
export function usageText(usage: NonNullable<OpsRunDetail['usage']>): string {
  const n = (count: number | undefined) => (count ?? 0).toLocaleString('en-US');
  const cached = usage.cacheReadTokens ? ` (${n(usage.cacheReadTokens)} cached)` : '';
  const reasoning = usage.reasoningTokens ? ` (${n(usage.reasoningTokens)} reasoning)` : '';
  const missing = usage.modelSteps - usage.reported;
  const unreported = missing > 0 ? ` · ${missing} model step${missing === 1 ? '' : 's'} unreported` : '';
  return `${n(usage.inputTokens)} tokens in${cached} · ${n(usage.outputTokens)} out${reasoning}${unreported}`;
}

/** GET /api/status (ADR-0053): the work in flight and what needs a person. */
export interface OpsStatus {
  runs: { queued: number; running: number; waitingInput: number; waitingTakeover: number };
  expiredLeases: { count: number; oldestMs: number | null };
  dueJobs: { count: number; oldestMs: number | null };
  inDoubt: { effects: number; runs: number };
  /** Of the runs started in the last hour: failed, and salvaged after their crash budget. */
  lastHour?: { failed: number; salvaged: number };
  /** The last look of a drain and of a reaper (recorded at most every 10 s per process). */
  lastPass: { drain: OpsPass | null; reap: OpsPass | null };
  alerts: { kind: string; message: string }[];
}

export interface OpsPass {
  agoMs: number;
  owner: string;
}

/** The status in one line: "2 queued · 1 running · … · 0 effects in doubt", and the last hour's failures if any. */
export function statusLine(status: OpsStatus): string {
  const n = (count: number, one: string, many = `${one}s`) => `${count} ${count === 1 ? one : many}`;
  const { runs } = status;
  return [
    `${runs.queued} queued`, `${runs.running} running`, `${runs.waitingInput} waiting for input`,
    `${runs.waitingTakeover} waiting for takeover`, n(status.expiredLeases.count, 'expired lease'),
    n(status.dueJobs.count, 'job due', 'jobs due'), `${n(status.inDoubt.effects, 'effect')} in doubt`,
    ...(status.lastHour && status.lastHour.failed + status.lastHour.salvaged > 0
      ? [`in the last hour: ${status.lastHour.failed} failed, ${status.lastHour.salvaged} salvaged`] : []),
  ].join(' · ');
}

/** When a drain and a reaper last looked, and whose they were: "drain 3 s ago (w-1) · reaper: none recorded". */
export function passesLine(status: OpsStatus): string {
  const ago = (ms: number) => (ms < 120_000 ? `${Math.round(ms / 1000)} s` : ms < 7_200_000
    ? `${Math.round(ms / 60_000)} min` : `${Math.round(ms / 3_600_000)} h`);
  const one = (name: string, pass: OpsPass | null) =>
    (pass === null ? `${name}: none recorded` : `${name} ${ago(pass.agoMs)} ago (${pass.owner})`);
  return `Last looked: ${one('drain', status.lastPass.drain)} · ${one('reaper', status.lastPass.reap)}`;
}

export interface OpsData {
  runs: OpsRun[];
  /** The `before` of the next, older page of runs, or null when these are the oldest. */
  next: string | null;
  /** The run named by ?run=, or null when it is none, not a uuid, or not one the caller sees. */
  selected: OpsRunDetail | null;
  /** The store's status, or null when it could not be read (the table still shows). */
  status: OpsStatus | null;
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * What the page's URL asks for: the selected run (?run=), whether to list only one thread's runs
 * (?thread=, ADR-0095) and only runs in doubt, and the page of runs (?before=: the runs listed
 * after that one; none, the newest).
 */
export interface OpsQuery {
  selectedId: string | null;
  threadId: string | null;
  inDoubt: boolean;
  before: string | null;
}

export function readOpsQuery(url: URL): OpsQuery {
  const threadId = url.searchParams.get('thread');
  return {
    selectedId: url.searchParams.get('run'),
    threadId: threadId && uuidPattern.test(threadId) ? threadId : null, // a mangled link lists every run
    inDoubt: url.searchParams.get('inDoubt') === '1',
    before: url.searchParams.get('before') || null,
  };
}

/** The page's URL for `query`: what a reload or a shared link opens again. */
export function opsHref(query: OpsQuery): string {
  const params = new URLSearchParams();
  if (query.threadId) params.set('thread', query.threadId);
  if (query.inDoubt) params.set('inDoubt', '1');
  if (query.before) params.set('before', query.before);
  if (query.selectedId) params.set('run', query.selectedId);
  const search = params.toString();
  return search ? `/ops?${search}` : '/ops';
}

/** The page's `?before=` names no run the API lists (gone, or never one): show the newest instead. */
export class StaleRunsPageError extends Error {
  constructor(before: string) {
    super(`no run ${before} to list runs before`);
  }
}

/** How many runs one page of the table shows. */
export const opsPageSize = 50;

/**
 * A page of runs (only one thread's with `threadId`; only those with an effect in doubt, however
 * old, with `inDoubt`; the newest, or those after `before`) and the selected run, through
 * `fetchFn` (SvelteKit's in a load, the browser's in the page's poll). Throws StaleRunsPageError
 * for a `before` the API refuses, and an Error when the list cannot be read.
 */
export async function readOps(fetchFn: typeof fetch, { selectedId, threadId, inDoubt, before }: OpsQuery): Promise<OpsData> {
  const params = new URLSearchParams({ limit: String(opsPageSize) });
  if (threadId) params.set('thread', threadId);
  if (inDoubt) params.set('inDoubt', '1');
  if (before) params.set('before', before);
  const [list, detail, statusResponse] = await Promise.all([
    fetchFn(`/api/runs?${params}`),
    selectedId && uuidPattern.test(selectedId) ? fetchFn(`/api/runs/${selectedId}`) : null,
    fetchFn('/api/status').catch(() => null),
  ]);
  if (list.status === 400 && before) throw new StaleRunsPageError(before);
  if (!list.ok) throw new Error(`/api/runs answered ${list.status}`);
  const { runs, next } = (await list.json()) as { runs: OpsRun[]; next: string | null };
  const status = statusResponse?.ok ? ((await statusResponse.json()) as OpsStatus) : null;
  if (!detail?.ok) return { runs, next, selected: null, status };
  // GET /api/runs/:id names the thread's owner beside the run, not in it; the page shows the
  // selected run from here when the list does not hold it (on another page).
  const read = (await detail.json()) as OpsRunDetail & { ownerId: string };
  return { runs, next, selected: { ...read, run: { ...read.run, ownerId: read.ownerId } }, status };
}
