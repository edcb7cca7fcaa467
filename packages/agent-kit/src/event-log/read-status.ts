// What an operator (or a monitor) asks first: is work moving, and does anything need a person?
// One statement of counts, each through a partial index that holds only the rows counted (the
// runs not closed, the due jobs, the effects in doubt), so its cost follows the work in flight,
// not the history. Ages are measured on the database's clock.
import type { Queryable } from '../store/db.js';
import { toNumber } from '../store/db.js';

export interface StoreStatus {
  /** The database's time when it was read. */
  at: Date;
  runs: { queued: number; running: number; waitingInput: number; waitingTakeover: number };
  /** Running runs whose lease expired: the reaper's backlog, normally empty within a reap. */
  expiredLeases: { count: number; oldestMs: number | null };
  /** Jobs due now (a run waiting for a drain), and how long the oldest has been due. */
  dueJobs: { count: number; oldestMs: number | null };
  /** Effects nobody knows happened, and their runs: each needs an operator's verdict. */
  inDoubt: { effects: number; runs: number };
  /**
   * Of the runs started in the last hour (created_at, on the database's now()), those that ended
   * `failed` (a provider refused for good) and those given up after their crash budget
   * (salvaged, `aborted`; not a cancel): a provider down shows here before anyone reads a thread.
   */
  lastHour: { failed: number; salvaged: number };
  /**
   * The last look of a drain and of a reaper, and whose it was; null when none is recorded. Each
   * process records its passes at most every 10 s, so `agoMs` runs that much behind.
   */
  lastPass: { drain: LastPass | null; reap: LastPass | null };
}

export interface LastPass {
  agoMs: number;
  owner: string;
}

/** Something in a StoreStatus that a person should look at, with what to do. */
export interface StatusAlert {
  kind: 'reaper-behind' | 'drain-behind' | 'effects-in-doubt';
  message: string;
}

const statusSql = `
select agent_kit_now() as at,
  (select count(*) from agent_kit_runs where status = 'queued') as queued,
  (select count(*) from agent_kit_runs where status = 'running') as running,
  (select count(*) from agent_kit_runs where status = 'waiting_input') as waiting_input,
  (select count(*) from agent_kit_runs where status = 'waiting_takeover') as waiting_takeover,
  e.expired, e.oldest_expired_ms, j.due, j.oldest_due_ms, d.effects as in_doubt_effects, d.runs as in_doubt_runs,
  (select extract(epoch from agent_kit_now() - at) * 1000 from agent_kit_passes where kind = 'drain') as drain_ago_ms,
  (select owner from agent_kit_passes where kind = 'drain') as drain_owner,
  (select extract(epoch from agent_kit_now() - at) * 1000 from agent_kit_passes where kind = 'reap') as reap_ago_ms,
  (select owner from agent_kit_passes where kind = 'reap') as reap_owner,
  f.failed, f.salvaged
from (
  select count(*) as expired,
    extract(epoch from agent_kit_now() - min(lease_expires_at)) * 1000 as oldest_expired_ms
  from agent_kit_runs r where status = 'running' and lease_expires_at <= agent_kit_now()
    -- One a reaper handed back has its job: the drain's backlog now (counted with the jobs).
    and not exists (select 1 from agent_kit_jobs j where j.run_id = r.id)
) e, (
  select count(*) as due, extract(epoch from agent_kit_now() - min(due_at)) * 1000 as oldest_due_ms
  from agent_kit_jobs where due_at <= agent_kit_now()
) j, (
  select count(*) as effects, count(distinct run_id) as runs from agent_kit_effects where status = 'in_doubt'
) d, (
  -- Through agent_kit_runs__failed_created_at_idx: the failed and aborted runs of the hour only.
  select count(*) filter (where r.status = 'failed') as failed,
    count(*) filter (where r.status = 'aborted' and exists (
      select 1 from agent_kit_messages m where m.id = r.message_id and m.content ? 'salvaged')) as salvaged
  from agent_kit_runs r
  where r.status in ('failed', 'aborted') and r.created_at > now() - interval '1 hour' -- (created_at is now())
) f`;

interface StatusRow {
  at: Date; queued: unknown; running: unknown; waiting_input: unknown; waiting_takeover: unknown;
  expired: unknown; oldest_expired_ms: unknown; due: unknown; oldest_due_ms: unknown;
  in_doubt_effects: unknown; in_doubt_runs: unknown; failed: unknown; salvaged: unknown;
  drain_ago_ms: unknown; drain_owner: string | null; reap_ago_ms: unknown; reap_owner: string | null;
}

const orNull = (value: unknown) => (value === null || value === undefined ? null : Math.round(toNumber(value)));

/** Read the store's status: counts of the runs in flight, the reaper's and the drains' backlogs, effects in doubt. */
export async function readStoreStatus(db: Queryable): Promise<StoreStatus> {
  const [row] = await db.query<StatusRow>(statusSql);
  const r = row!;
  return {
    at: new Date(r.at),
    runs: {
      queued: toNumber(r.queued), running: toNumber(r.running),
      waitingInput: toNumber(r.waiting_input), waitingTakeover: toNumber(r.waiting_takeover),
    },
    expiredLeases: { count: toNumber(r.expired), oldestMs: orNull(r.oldest_expired_ms) },
    dueJobs: { count: toNumber(r.due), oldestMs: orNull(r.oldest_due_ms) },
    inDoubt: { effects: toNumber(r.in_doubt_effects), runs: toNumber(r.in_doubt_runs) },
    lastHour: { failed: toNumber(r.failed), salvaged: toNumber(r.salvaged) },
    lastPass: { drain: lastPass(r.drain_ago_ms, r.drain_owner), reap: lastPass(r.reap_ago_ms, r.reap_owner) },
  };
}

const lastPass = (agoMs: unknown, owner: string | null): LastPass | null =>
  owner === null ? null : { agoMs: Math.max(0, orNull(agoMs)!), owner };

/** How long an expired lease or a due job may wait before it is news: a cron minute, twice. */
export const defaultStaleMs = 120_000;
/** The longest `stale` a caller may give, in seconds: a day. */
export const maxStaleSeconds = 86_400;

/** A `stale` given as text (`--stale`, `?stale=`): whole seconds 1..maxStaleSeconds, or null. */
export function parseStaleSeconds(text: string): number | null {
  const seconds = Number(text);
  return /^\d{1,6}$/.test(text) && seconds >= 1 && seconds <= maxStaleSeconds ? seconds : null;
}

/**
 * What in `status` a person should act on. A lease expired longer than `staleMs` ago means no
 * reaper has handed its run back; a job due that long means no drain has taken it (a turn queued
 * behind its thread's running turn is due again only when that turn's lease would expire, so a
 * long turn does not count); an effect in doubt always waits for a verdict. The last recorded
 * passes say which it is: nothing running (no pass lately), or something running that does not
 * get to it (a recent pass).
 */
export function statusAlerts(status: StoreStatus, staleMs = defaultStaleMs): StatusAlert[] {
  const alerts: StatusAlert[] = [];
  const { expiredLeases, dueJobs, inDoubt, lastPass } = status;
  if (expiredLeases.oldestMs !== null && expiredLeases.oldestMs > staleMs) {
    alerts.push({
      kind: 'reaper-behind',
      message: `a lease expired ${secondsText(expiredLeases.oldestMs)} ago and its run was not taken over`
        + whyBehind(lastPass.reap, staleMs, 'reaper', 'reap', 'its requeue failing, or a reconcile hook slow'),
    });
  }
  if (dueJobs.oldestMs !== null && dueJobs.oldestMs > staleMs) {
    alerts.push({
      kind: 'drain-behind',
      message: `a job has been due for ${secondsText(dueJobs.oldestMs)}`
        + whyBehind(lastPass.drain, staleMs, 'drain', 'drain', 'every slot busy with long turns, or its claims failing'),
    });
  }
  if (inDoubt.effects > 0) {
    const effects = inDoubt.effects === 1 ? '1 effect is' : `${inDoubt.effects} effects are`;
    const runs = inDoubt.runs === 1 ? '1 run' : `${inDoubt.runs} runs`;
    alerts.push({
      kind: 'effects-in-doubt',
      message: `${effects} in doubt in ${runs}: list them with agent-kit runs --in-doubt, give each a verdict `
        + 'with agent-kit resolve-effect',
    });
  }
  return alerts;
}

const secondsText = (ms: number) => `${Math.round(ms / 1000)} s`;

/** Why a backlog waits, from the last pass of what should have taken it. */
function whyBehind(pass: LastPass | null, staleMs: number, who: 'reaper' | 'drain', route: string, busy: string): string {
  const start = `agent-kit worker, or the cron route /api/cron/${route}`;
  if (pass === null) return `, and no ${who} pass is recorded: is a ${who} running (${start})?`;
  if (pass.agoMs > staleMs) {
    return `; the last ${who} pass was ${secondsText(pass.agoMs)} ago (${pass.owner}): is a ${who} still running (${start})?`;
  }
  return `, though a ${who} looked ${secondsText(pass.agoMs)} ago (${pass.owner}): see its log (${busy})`;
}
