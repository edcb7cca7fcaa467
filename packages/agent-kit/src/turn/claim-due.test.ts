// Batch claims (migration 0018, ADR-0022) on both stores: one statement claims the runs of the
// earliest due jobs, one per owner, with the same rule, fence and job deletion as a single claim,
// begins each fresh segment with its history, and leaves every job it cannot use untouched for
// the take path. On Postgres: a run held by another transaction is skipped, not waited for, and
// concurrent batch claims never claim a run twice.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { onPostgres, openTestDb } from '../../test/harness/test-db.js';
import { InvalidArgumentError } from '../errors.js';
import { claimRun, closeRun, parkRun } from '../lease/lease.js';
import { startTurn } from '../queue/start-turn.js';
import { advanceFakeNow, clearFakeNow } from '../store/clock.js';
import type { Db } from '../store/db.js';
import { claimDueSegments, type ClaimDueOptions } from './segment-claim.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb({ poolMax: 12 });
});
afterAll(async () => {
  await db.close();
});
beforeEach(async () => {
  await db.query('delete from agent_kit_jobs');
});

const owners = (n: number, prefix = 'batch') => Array.from({ length: n }, (_, i) => `${prefix}-${i + 1}`);
const options = (o: Partial<ClaimDueOptions> = {}): ClaimDueOptions => ({
  owners: owners(4), leaseTtlMs: 30_000, budgetMs: 60_000, maxRunAttempts: 3, ...o,
});

async function jobsOf(runId: string) {
  return db.query<{ due_at: Date; tries: number }>('select due_at, tries from agent_kit_jobs where run_id = $1', [runId]);
}

async function newTurn(text: string, threadId?: string) {
  return startTurn(db, { ownerId: 'u', text, threadId });
}

describe('claimDueSegments', () => {
  it('claims the earliest due runs, one per owner in order, and begins each fresh segment', async () => {
    const turns = [];
    for (let i = 0; i < 3; i++) turns.push(await newTurn(`hello ${i}`));
    const claims = await claimDueSegments(db, options());
    expect(claims.map((c) => c.lease.runId)).toEqual(turns.map((t) => t.runId));
    expect(claims.map((c) => c.lease.owner)).toEqual(['batch-1', 'batch-2', 'batch-3']);
    for (const [i, claim] of claims.entries()) {
      expect(claim.lease).toMatchObject({ fence: 1, attempts: 1, threadId: turns[i]!.threadId });
      expect(claim.run.status).toBe('running');
      expect(claim.begun?.history).toEqual([{ role: 'user', content: `hello ${i}` }]);
      expect(await jobsOf(claim.lease.runId)).toEqual([]);
    }
    const [started] = await db.query<{ type: string; fence: number; owner: string }>(
      `select type, fence, data->>'owner' as owner from agent_kit_thread_events where thread_id = $1 and seq = $2`,
      [turns[0]!.threadId, claims[0]!.begun!.seq],
    );
    expect(started).toMatchObject({ type: 'segment-started', fence: 1, owner: 'batch-1' });
    expect(await claimDueSegments(db, options())).toEqual([]);
  });

  it('begins a fresh segment as agent_kit_begin_segment would, writing the run row once', async () => {
    const viaBatch = await newTurn('batch-begun');
    const viaFunction = await newTurn('function-begun');
    const [claim, updates] = await db.transaction(async (tx) => {
      const updated = async () => (await tx.query<{ n: number }>(
        `select pg_stat_get_xact_tuples_updated('agent_kit_runs'::regclass)::int as n`,
      ))[0]!.n;
      const before = await updated();
      const [only] = await claimDueSegments(tx, options({ owners: ['same-owner'] }));
      return [only!, (await updated()) - before] as const;
    });
    expect(claim.lease.runId).toBe(viaBatch.runId);
    expect(updates).toBe(1); // the claim; no second write to set what the claim just set
    const other = await claimRun(db, { runId: viaFunction.runId, owner: 'same-owner', leaseTtlMs: 30_000, budgetMs: 60_000 });
    if (!other.claimed) throw new Error('expected a claim');
    await db.query(`select agent_kit_begin_segment($1, $2, 1, '', $3::jsonb)`, [
      viaFunction.runId, 'same-owner', JSON.stringify({ continued: false, stepNo: 0 }),
    ]);
    const started = async (runId: string) => (await db.query<{ data: Record<string, unknown> }>(
      `select data from agent_kit_thread_events where run_id = $1 and type = 'segment-started'`, [runId],
    ))[0]!.data;
    const runOf = async (runId: string) => (await db.query<Record<string, unknown>>(
      `select to_jsonb(r) as row from agent_kit_runs r where id = $1`, [runId],
    ))[0]!.row as Record<string, unknown>;
    const [batchData, functionData] = [await started(viaBatch.runId), await started(viaFunction.runId)];
    expect(Object.keys(batchData).sort()).toEqual(Object.keys(functionData).sort());
    for (const [data, runId] of [[batchData, viaBatch.runId], [functionData, viaFunction.runId]] as const) {
      const row = await runOf(runId);
      expect(data).toEqual({
        continued: false, stepNo: 0, runId, fence: 1, attempt: 1, owner: 'same-owner', text: '',
        leaseExpiresAt: row.lease_expires_at, deadlineAt: row.deadline_at,
      });
      expect(row).toMatchObject({ partial: '', status: 'running', fence: 1 });
    }
  });

  it('claims no more runs than it has owners; the rest stay due', async () => {
    const turns = [];
    for (let i = 0; i < 5; i++) turns.push(await newTurn(`many ${i}`));
    const first = await claimDueSegments(db, options({ owners: owners(2) }));
    expect(first.map((c) => c.lease.runId)).toEqual([turns[0]!.runId, turns[1]!.runId]);
    expect(await jobsOf(turns[2]!.runId)).toHaveLength(1);
    const rest = await claimDueSegments(db, options({ owners: owners(8, 'next') }));
    expect(rest.map((c) => c.lease.runId)).toEqual(turns.slice(2).map((t) => t.runId));
  });

  it('leaves the jobs of closed, waiting, blocked, leased and spent runs untouched', async () => {
    const closed = await newTurn('closed');
    const waiting = await newTurn('waiting');
    const leased = await newTurn('leased');
    const spent = await newTurn('spent');
    const blocking = await newTurn('blocking');
    const blocked = await newTurn('blocked', blocking.threadId);
    for (const turn of [closed, waiting, leased, spent, blocking]) {
      const claim = await claimRun(db, { runId: turn.runId, owner: 'other', leaseTtlMs: 5_000 });
      if (!claim.claimed) throw new Error('expected a claim');
      if (turn === closed) expect(await closeRun(db, claim.lease, 'completed', { text: 'done' })).not.toBeNull();
      if (turn === waiting) expect(await parkRun(db, claim.lease, 'waiting_input', { id: 'q1', kind: 'question' })).toBe(true);
    }
    await advanceFakeNow(db, 6_000); // spent's lease (and blocking's) expire; leased is claimed again below
    try {
      expect((await claimRun(db, { runId: leased.runId, owner: 'other-2', leaseTtlMs: 60_000 })).claimed).toBe(true);
      // A job for each, from elsewhere (a settle, a rescheduled take, an answer that came twice).
      for (const turn of [closed, waiting, leased, spent, blocked]) {
        await db.query('insert into agent_kit_jobs (run_id, due_at) values ($1, agent_kit_now()) on conflict do nothing', [turn.runId]);
      }
      await db.query(`update agent_kit_runs set status = 'running', owner = 'ghost', lease_expires_at = agent_kit_now() + interval '1 hour'
        where id = $1`, [blocking.runId]); // the blocking turn is live again: `blocked` must wait
      const before = new Map<string, unknown>();
      for (const turn of [closed, waiting, leased, spent, blocked]) before.set(turn.runId, await jobsOf(turn.runId));
      expect(await claimDueSegments(db, options({ maxRunAttempts: 1 }))).toEqual([]);
      for (const turn of [closed, waiting, leased, spent, blocked]) {
        const jobs = await jobsOf(turn.runId);
        expect(jobs).toHaveLength(1);
        expect(jobs).toEqual(before.get(turn.runId));
      }
      // With an attempt left, the expired run is taken over: the next fence, no fresh begin.
      const [takeover] = await claimDueSegments(db, options({ maxRunAttempts: 2 }));
      expect(takeover?.lease).toMatchObject({ runId: spent.runId, fence: 2, attempts: 2, owner: 'batch-1' });
      expect(takeover?.begun).toBeUndefined();
    } finally {
      await clearFakeNow(db);
    }
  });

  it('claims a waiting run with a cancel to carry out, without beginning it', async () => {
    const turn = await newTurn('cancel me');
    const claim = await claimRun(db, { runId: turn.runId, owner: 'other', leaseTtlMs: 30_000 });
    if (!claim.claimed) throw new Error('expected a claim');
    expect(await parkRun(db, claim.lease, 'waiting_input', { id: 'q1', kind: 'question' })).toBe(true);
    await db.query('select agent_kit_request_cancel($1)', [turn.runId]);
    const [cancel] = await claimDueSegments(db, options());
    expect(cancel?.lease).toMatchObject({ runId: turn.runId, fence: 2 });
    expect(cancel?.run.cancelRequestedAt).not.toBeNull();
    expect(cancel?.begun).toBeUndefined();
  });

  it('rejects bad arguments with a clear error and claims nothing', async () => {
    const turn = await newTurn('untouched');
    await expect(claimDueSegments(db, options({ owners: [] }))).rejects.toThrow(InvalidArgumentError);
    await expect(claimDueSegments(db, options({ owners: owners(1001) }))).rejects.toThrow(/1\.\.1000 owners, got 1001/);
    await expect(claimDueSegments(db, options({ owners: ['a', ''] }))).rejects.toThrow(/non-empty/);
    await expect(claimDueSegments(db, options({ owners: ['a', 'a'] }))).rejects.toThrow(/distinct/);
    await expect(claimDueSegments(db, options({ maxRunAttempts: 0 }))).rejects.toThrow(/max attempts must be at least 1/);
    await expect(claimDueSegments(db, options({ leaseTtlMs: 0 }))).rejects.toThrow(InvalidArgumentError);
    await expect(db.query(`select * from agent_kit_claim_due_runs(array['a', null], '1 second', '1 second', 1)`))
      .rejects.toThrow(InvalidArgumentError);
    await expect(db.query(`select * from agent_kit_claim_due_runs('{}', '1 second', '1 second', 1)`))
      .rejects.toThrow(/1\.\.1000 lease owners, got 0/);
    await expect(db.query(`select * from agent_kit_claim_due_runs(array['a'], '0 seconds', '1 second', 1)`))
      .rejects.toThrow(/lease ttl/);
    expect(await jobsOf(turn.runId)).toHaveLength(1);
  });
});

describe.runIf(onPostgres)('claimDueSegments under concurrency (Postgres)', () => {
  it('skips a run whose row another transaction holds, instead of waiting for it', async () => {
    const held = await newTurn('held');
    const free = await newTurn('free');
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const holder = db.transaction(async (tx) => {
      await tx.query('select 1 from agent_kit_runs where id = $1 for update', [held.runId]);
      locked();
      await released;
    });
    try {
      await isLocked;
      const claims = await claimDueSegments(db, options());
      expect(claims.map((c) => c.lease.runId)).toEqual([free.runId]);
      expect(await jobsOf(held.runId)).toHaveLength(1);
    } finally {
      release();
      await holder;
    }
    expect((await claimDueSegments(db, options())).map((c) => c.lease.runId)).toEqual([held.runId]);
  });

  it('never claims a run twice across concurrent batch claims', async () => {
    const runIds = new Set<string>();
    for (let i = 0; i < 40; i++) runIds.add((await newTurn(`race ${i}`)).runId);
    const claimed: string[] = [];
    for (let round = 0; round < 10 && claimed.length < runIds.size; round++) {
      const batches = await Promise.all(Array.from({ length: 6 }, (_, k) =>
        claimDueSegments(db, options({ owners: owners(5, `r${round}-d${k}`) }))));
      for (const batch of batches) claimed.push(...batch.map((c) => c.lease.runId));
    }
    expect(claimed.length).toBe(runIds.size);
    expect(new Set(claimed)).toEqual(runIds);
    const [fences] = await db.query<{ n: number; max: number }>(
      'select count(*)::int as n, max(fence)::int as max from agent_kit_runs where id = any($1::uuid[])', [[...runIds]]);
    expect(fences).toEqual({ n: 40, max: 1 });
  });
});
