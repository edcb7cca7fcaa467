// The invariants the simulator checks after every step, read from SQL and the effects file
// independently of the engine's code (DESIGN.md §6): one live lease per run, fence +1 per claim,
// gapless per-thread seq, no event under a lost fence, one final message per closed run, partial
// output always a prefix of the reply, each effect at most once and reconciled before a resume,
// and a run cancelled at a seq keeps the text its events had through it.
import type { Db } from '../../src/store/db.js';
import { scriptedReplyText } from '../../src/model/index.js';

export interface Violation {
  kind: string;
  detail: string;
}

export interface RunSnapshot {
  id: string;
  threadId: string;
  turnNo: number;
  status: string;
  owner: string | null;
  fence: number;
  attempts: number;
  partial: string;
  waitingFor: { id?: string; kind?: string } | null;
  cancel: boolean;
  takeover: boolean;
  leaseExpiresAt: Date | null;
  messageId: string | null;
  messageText: string | null;
  /** A regenerated reply replaced this run's turn (ADR-0091). */
  superseded?: boolean;
  /** Parked to wait out a model retry until then (ADR-0098). */
  retryDueAt?: Date | null;
}

/**
 * Violations of a known, reported protocol issue: counted and listed as findings, but they do not
 * fail a schedule, so the suite keeps guarding everything else until the fix lands. Remove an
 * entry when its fix is in; the simulator then fails on it again.
 */
export const knownIssues: Record<string, string> = {};

export const closedStatuses = ['completed', 'failed', 'aborted'];
export const isClosed = (status: string) => closedStatuses.includes(status);

/** The simulator's own record of claims: the fence each got and the thread's last seq then. */
export const claimsTableSql = `create table if not exists sim_claims (
  run_id uuid not null, fence bigint not null, seq_at_claim bigint not null, step int not null,
  attempts int not null, primary key (run_id, fence))`;

// One statement, so the check costs one round trip per step. Each branch names a violation.
const protocolViolationsSql = `
with recursive open_runs as (
  select id, thread_id, turn_no from agent_kit_runs
  where status in ('queued', 'running', 'waiting_input', 'waiting_takeover')),
-- Each superseded run, followed along superseded_by (bounded: a cycle would not end).
chains (id, at, depth) as (
  select r.id, r.superseded_by, 1 from agent_kit_runs r where r.superseded_by is not null
  union all
  select c.id, n.superseded_by, c.depth + 1 from chains c join agent_kit_runs n on n.id = c.at
  where n.superseded_by is not null and c.depth < 100)
select 'lease' as kind, id::text as run_id,
  format('status=%s owner=%s lease_expires_at=%s deadline_at=%s', status, owner, lease_expires_at, deadline_at) as detail
from agent_kit_runs
where (status = 'running') <> (owner is not null)
   or (status = 'running' and (lease_expires_at is null or deadline_at is null))
   or (status <> 'running' and (lease_expires_at is not null or deadline_at is not null))
union all
-- Invariant 8: no lease outlives its invocation's deadline (renewals and failures included).
select 'lease', r.id::text,
  format('lease_expires_at=%s is past deadline_at=%s (fence %s)', r.lease_expires_at, r.deadline_at, r.fence)
from agent_kit_runs r
where r.status = 'running' and r.lease_expires_at > r.deadline_at
union all
select 'seq', null, format('thread %s: last_seq=%s, %s events, seq %s..%s', t.id, t.last_seq, count(e.seq), min(e.seq), max(e.seq))
from agent_kit_threads t left join agent_kit_thread_events e on e.thread_id = t.id
group by t.id, t.last_seq
having count(e.seq) <> t.last_seq or coalesce(max(e.seq), 0) <> t.last_seq or coalesce(min(e.seq), 1) <> 1
union all
select 'event-after-takeover', e.run_id::text,
  format('%s of fence %s at seq %s follows segment-started of fence %s at seq %s', e.type, e.fence, e.seq, s.fence, s.seq)
from agent_kit_thread_events e
join agent_kit_thread_events s on s.thread_id = e.thread_id and s.run_id = e.run_id
  and s.type = 'segment-started' and s.fence > e.fence and s.seq < e.seq
where e.fence > 0
union all
select 'message', r.id::text, format('status=%s message_id=%s, %s assistant messages, partial flags %s',
  r.status, r.message_id, count(m.id), string_agg(m.partial::text, ','))
from agent_kit_runs r left join agent_kit_messages m on m.run_id = r.id and m.role = 'assistant'
group by r.id, r.status, r.message_id
having (r.status in ('completed', 'failed', 'aborted') and (r.message_id is null or count(m.id) <> 1
          or not bool_and(m.id = r.message_id) or bool_or(m.partial <> (r.status <> 'completed'))))
    or (r.status not in ('completed', 'failed', 'aborted') and (r.message_id is not null or count(m.id) > 0))
union all
select 'effect-open-on-closed', f.run_id::text, format('key %s is %s (fence %s) on a %s run', f.key, f.status, f.fence, r.status)
from agent_kit_effects f join agent_kit_runs r on r.id = f.run_id
where r.status in ('completed', 'failed', 'aborted') and f.status = 'started'
union all
select 'effect-not-reconciled', f.run_id::text, format('key %s still started at fence %s after segment-started of fence %s',
  f.key, f.fence, (select max(s.fence) from agent_kit_thread_events s where s.run_id = f.run_id and s.type = 'segment-started'))
from agent_kit_effects f
where f.status = 'started' and exists (select 1 from agent_kit_thread_events s
  where s.run_id = f.run_id and s.type = 'segment-started' and s.fence > f.fence)
union all
select 'journal', s.run_id::text, format('%s steps, highest step_no %s, highest fence %s (run fence %s)',
  count(*), max(s.step_no), max(s.fence), max(r.fence))
from agent_kit_steps s join agent_kit_runs r on r.id = s.run_id
group by s.run_id having count(*) <> max(s.step_no) + 1 or max(s.fence) > max(r.fence)
union all
select 'thread-order', r.id::text, format('%s while an earlier turn of its thread is open', r.status)
from agent_kit_runs r
where r.status in ('running', 'waiting_input', 'waiting_takeover')
  and exists (select 1 from open_runs e where e.thread_id = r.thread_id and e.turn_no < r.turn_no)
union all
select 'lost-job', r.id::text, format('%s (cancel requested: %s), first open turn of its thread, and no job',
  r.status, r.cancel_requested_at is not null)
from agent_kit_runs r
where (r.status = 'queued' or (r.status in ('waiting_input', 'waiting_takeover') and r.cancel_requested_at is not null))
  and not exists (select 1 from agent_kit_jobs j where j.run_id = r.id)
  and not exists (select 1 from open_runs e where e.thread_id = r.thread_id and e.turn_no < r.turn_no)
union all
select 'waiting', r.id::text, 'waiting_input without a question'
from agent_kit_runs r where r.status = 'waiting_input' and r.waiting_for is null
union all
select 'input', i.run_id::text, format('answer to %s consumed at fence %s but no tool step records it', i.question_id, i.consumed_fence)
from agent_kit_inputs i
where i.consumed_at is not null and not exists (select 1 from agent_kit_steps s
  where s.run_id = i.run_id and s.kind = 'tool' and s.data->>'toolCallId' = i.question_id)
union all
select 'partial-vs-events', r.id::text, format('partial %s, but its latest %s (fence %s) plus the text-deltas after it say %s',
  to_json(r.partial), s.type, s.fence, to_json(s.text || coalesce(d.text, '')))
from agent_kit_runs r
join lateral (select e.seq, e.type, e.fence, e.data->>'text' as text from agent_kit_thread_events e
  where e.thread_id = r.thread_id and e.run_id = r.id
    and (e.type = 'segment-started' or (e.type = 'model-retry' and e.data ? 'text'))
  order by e.seq desc limit 1) s on true
left join lateral (select string_agg(e.data->>'text', '' order by e.seq) as text from agent_kit_thread_events e
  where e.thread_id = r.thread_id and e.run_id = r.id and e.type = 'text-delta' and e.seq > s.seq) d on true
where r.partial <> s.text || coalesce(d.text, '')
union all
-- A run cancelled at the event its viewer had shown keeps the text a viewer had there (ADR-0090).
select 'cancel-text', r.id::text, format('cancelled at seq %s with %s, but its events through that seq say %s',
  r.cancel_shown_seq, to_json(m.content->>'text'), to_json(coalesce(s.text, '') || coalesce(d.text, '')))
from agent_kit_runs r
join agent_kit_messages m on m.run_id = r.id and m.role = 'assistant'
left join lateral (select e.seq, e.data->>'text' as text from agent_kit_thread_events e
  where e.thread_id = r.thread_id and e.run_id = r.id and e.seq <= r.cancel_shown_seq
    and (e.type = 'segment-started' or (e.type = 'model-retry' and e.data ? 'text'))
  order by e.seq desc limit 1) s on true
left join lateral (select string_agg(e.data->>'text', '' order by e.seq) as text from agent_kit_thread_events e
  where e.thread_id = r.thread_id and e.run_id = r.id and e.type = 'text-delta'
    and e.seq > coalesce(s.seq, 0) and e.seq <= r.cancel_shown_seq) d on true
where r.status = 'aborted' and r.cancel_shown_seq is not null and m.content->>'cancelled' = 'true'
  and m.content->>'text' <> coalesce(s.text, '') || coalesce(d.text, '')
union all
-- The conversation (ADR-0091, ADR-0096): only an ended run is superseded, by a run of its thread,
-- along links that lead back to a run in the conversation; and each run in it opens with a user
-- message of its own (a restore moves the message a regeneration took back to its run).
select 'conversation', r.id::text, format('superseded by %s while %s', r.superseded_by, r.status)
from agent_kit_runs r where r.superseded_by is not null and r.status not in ('completed', 'failed', 'aborted')
union all
select 'conversation', r.id::text, format('superseded by %s: %s', r.superseded_by,
  case when s.id is null then 'no such run' when s.id = r.id then 'itself' else 'a run of another thread' end)
from agent_kit_runs r left join agent_kit_runs s on s.id = r.superseded_by
where r.superseded_by is not null and (s.id is null or s.id = r.id or s.thread_id <> r.thread_id)
union all
select 'conversation', c.id::text, format('superseded_by leads to no run in the conversation in %s steps', max(c.depth))
from chains c group by c.id having max(c.depth) >= 100
union all
select 'conversation', r.id::text, format('in the conversation, but its opening message %s is %s',
  agent_kit__opening_message(r.id), coalesce(format('a %s message of run %s', m.role, m.run_id), 'missing'))
from agent_kit_runs r left join agent_kit_messages m on m.id = agent_kit__opening_message(r.id)
where r.superseded_by is null and (m.id is null or m.run_id is distinct from r.id or m.role <> 'user')
union all
select 'crash-budget', e.run_id::text, format('segment-started of fence %s is attempt %s, above the crash budget %s',
  e.fence, e.data->>'attempt', $1::int)
from agent_kit_thread_events e
where e.type = 'segment-started' and (e.data->>'attempt')::int > $1::int
union all
-- A run shows no more attempts than the budget: a claim past it that only ends the run (a salvage,
-- a cancel) spent none of them.
select 'crash-budget', r.id::text, format('%s with attempts %s, above the crash budget %s', r.status, r.attempts, $1::int)
from agent_kit_runs r where r.attempts > $1::int and r.status in ('completed', 'failed', 'aborted')
union all
select 'crash-budget', e.run_id::text, format('run-salvaged at seq %s says attempts %s, above the crash budget %s',
  e.seq, e.data->>'attempts', $1::int)
from agent_kit_thread_events e where e.type = 'run-salvaged' and (e.data->>'attempts')::int > $1::int
`;


// The checks that need the simulator's record of claims (sim_claims).
const claimViolationsSql = `
select 'fence' as kind, r.id::text as run_id, format('fence=%s but %s claims seen (highest %s)', r.fence, count(c.fence), max(c.fence)) as detail
from agent_kit_runs r left join sim_claims c on c.run_id = r.id
group by r.id, r.fence
having r.fence <> coalesce(max(c.fence), 0) or count(c.fence) <> coalesce(max(c.fence), 0)
union all
select 'event-under-lost-fence', e.run_id::text,
  format('%s of fence %s at seq %s, after fence %s was claimed at seq %s', e.type, e.fence, e.seq, c.fence, c.seq_at_claim)
from agent_kit_thread_events e
join sim_claims c on c.run_id = e.run_id and e.fence > 0 and e.fence < c.fence and e.seq > c.seq_at_claim
union all
-- A claim past the crash budget may only salvage (ADR-0007): no work, no other ending.
select 'crash-budget', e.run_id::text, format('%s (%s) at seq %s under fence %s, whose claim made attempt %s (budget %s)',
  e.type, coalesce(e.data->>'status', ''), e.seq, e.fence, c.attempts, $1::int)
from agent_kit_thread_events e join sim_claims c on c.run_id = e.run_id and c.fence = e.fence
where c.attempts > $1::int and e.type <> 'run-salvaged' and not (e.type = 'run-closed' and e.data->>'status' = 'aborted')
`;

const snapshotSql = `
select r.id, r.thread_id, r.turn_no, r.status, r.owner, r.fence, r.attempts, r.partial, r.waiting_for,
  r.cancel_requested_at is not null as cancel, r.takeover_requested_at is not null as takeover,
  r.lease_expires_at, r.message_id, m.content->>'text' as message_text, r.superseded_by is not null as superseded,
  r.retry_due_at
from agent_kit_runs r left join agent_kit_messages m on m.id = r.message_id`;

export class InvariantChecker {
  private readonly expected = new Map<string, string>();
  private readonly closed = new Map<string, { status: string; fence: number; messageId: string | null }>();

  constructor(
    private readonly db: Db,
    private readonly tokens: number,
    private readonly maxRunAttempts: number,
    private readonly effectLines: () => string[],
    /** Check fences against the claims the simulator recorded (sim_claims); off outside it. */
    private readonly withClaims = true,
  ) {}

  async snapshot(): Promise<RunSnapshot[]> {
    const rows = await this.db.query<Record<string, any>>(snapshotSql);
    return rows.map((row) => ({
      id: row.id, threadId: row.thread_id, turnNo: Number(row.turn_no), status: row.status, owner: row.owner,
      fence: Number(row.fence),
      attempts: Number(row.attempts), partial: row.partial, waitingFor: row.waiting_for, cancel: row.cancel,
      takeover: row.takeover, leaseExpiresAt: row.lease_expires_at ? new Date(row.lease_expires_at) : null,
      messageId: row.message_id, messageText: row.message_text, superseded: row.superseded === true,
      retryDueAt: row.retry_due_at ? new Date(row.retry_due_at) : null,
    }));
  }

  /** The reply the scripted model gives this run: a function of its thread's first user messages. */
  async expectedReply(run: RunSnapshot): Promise<string> {
    const cached = this.expected.get(run.id);
    if (cached !== undefined) return cached;
    // Mirrors the engine's history: each turn's first user message, by creation, but the turns a
    // regenerated reply replaced (a run is first checked before it can be replaced: it is cached).
    const rows = await this.db.query<{ text: string }>(
      `select (select m.content->>'text' from agent_kit_messages m
               where m.run_id = r.id and m.role = 'user' order by m.created_at limit 1) as text
       from agent_kit_runs r where r.thread_id = $1 and r.turn_no <= $2 and r.superseded_by is null order by r.turn_no`,
      [run.threadId, run.turnNo],
    );
    const text = scriptedReplyText(rows.map((row) => row.text), this.tokens);
    this.expected.set(run.id, text);
    return text;
  }

  private functionsReady = false;

  /**
   * The checks live in plpgsql functions (created on first use), so the database plans their
   * queries once rather than at every step: the check runs after every step of every schedule.
   */
  private async ensureFunctions(): Promise<void> {
    if (this.functionsReady) return;
    const define = (name: string, sql: string) => `
      create or replace function ${name}(p_max int) returns table (kind text, run_id text, detail text)
      language plpgsql as $fn$ begin return query ${sql.replaceAll('$1::int', 'p_max')}; end $fn$;`;
    await this.db.exec(define('sim_protocol_violations', protocolViolationsSql) +
      (this.withClaims ? define('sim_claim_violations', claimViolationsSql) : ''));
    this.functionsReady = true;
  }

  async check(runs: RunSnapshot[]): Promise<Violation[]> {
    type Row = { kind: string; run_id: string | null; detail: string };
    await this.ensureFunctions();
    const rows = await this.db.query<Row>('select * from sim_protocol_violations($1)', [this.maxRunAttempts]);
    if (this.withClaims) rows.push(...(await this.db.query<Row>('select * from sim_claim_violations($1)', [this.maxRunAttempts])));
    const violations = rows.map((row) => ({ kind: row.kind, detail: `${row.run_id ?? ''} ${row.detail}`.trim() }));
    for (const run of runs) violations.push(...(await this.checkRun(run)));
    violations.push(...(await this.checkEffects()));
    return violations;
  }

  private async checkRun(run: RunSnapshot): Promise<Violation[]> {
    const found: Violation[] = [];
    const expected = await this.expectedReply(run);
    if (!expected.startsWith(run.partial)) {
      found.push({ kind: 'partial', detail: `${run.id} partial ${JSON.stringify(run.partial)} is not a prefix of the reply` });
    }
    if (run.messageText !== null) {
      const ok = run.status === 'completed' ? run.messageText === expected : expected.startsWith(run.messageText);
      if (!ok) {
        found.push({ kind: 'reply', detail: `${run.id} ${run.status} with ${JSON.stringify(run.messageText)}, expected ${JSON.stringify(expected)}` });
      }
    }
    const before = this.closed.get(run.id);
    if (before && (before.status !== run.status || before.fence !== run.fence || before.messageId !== run.messageId)) {
      found.push({ kind: 'reopened', detail: `${run.id} was ${before.status} at fence ${before.fence}, now ${run.status} at ${run.fence}` });
    }
    if (!before && isClosed(run.status)) this.closed.set(run.id, { status: run.status, fence: run.fence, messageId: run.messageId });
    return found;
  }

  /** Each effect key executed at most once, only after it was ledgered, and `completed` only if it happened. */
  private async checkEffects(): Promise<Violation[]> {
    const found: Violation[] = [];
    const counts = new Map<string, number>();
    for (const key of this.effectLines()) counts.set(key, (counts.get(key) ?? 0) + 1);
    const rows = await this.db.query<{ key: string; status: string }>('select key, status from agent_kit_effects');
    const ledger = new Map(rows.map((row) => [row.key, row.status]));
    for (const [key, count] of counts) {
      if (count > 1) found.push({ kind: 'effect-repeated', detail: `${key} executed ${count} times` });
      if (!ledger.has(key)) found.push({ kind: 'effect-unledgered', detail: `${key} executed without a ledger row` });
    }
    for (const [key, status] of ledger) {
      if (status === 'completed' && !counts.has(key)) {
        found.push({ kind: 'effect-phantom', detail: `${key} is completed but never executed` });
      }
    }
    return found;
  }

  /** At quiescence: every run ended, and a completed run says exactly the scripted reply. */
  async checkEnded(runs: RunSnapshot[]): Promise<Violation[]> {
    const found: Violation[] = [];
    for (const run of runs) {
      if (!isClosed(run.status)) {
        found.push({ kind: 'not-ended', detail: `${run.id} is ${run.status} (fence ${run.fence}, attempts ${run.attempts}) at quiescence` });
      }
    }
    return found;
  }
}
