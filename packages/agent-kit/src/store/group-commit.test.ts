// Group commit (migration 0017, ADR-0021) on both stores: writes of one kind that pile up while
// one is in flight go out as one statement; each element keeps its own guard and its own result;
// a grouped statement the database refused, or cancelled at its statement timeout, falls back to
// one statement per write, so each caller gets its own outcome; after a lost connection or a
// cancel request nothing is sent again; inside a transaction nothing is grouped.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onPostgres, openTestDb } from '../../test/harness/test-db.js';
import { claimRun, closeRun, type Lease } from '../lease/lease.js';
import { startTurn } from '../queue/start-turn.js';
import { commitStep, type Step } from '../turn/journal.js';
import { advanceFakeNow } from './clock.js';
import type { Db, Queryable } from './db.js';
import { StoreUnavailableError } from '../errors.js';
import { writeGrouped, type GroupedWrite } from './group-commit.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

/** `db`, with the text of every statement sent through it recorded (a Db, so writes group). */
function recording(inner: Db): { db: Db; statements: string[] } {
  const statements: string[] = [];
  const wrapped: Db = {
    kind: inner.kind,
    query: (sql, params) => {
      statements.push(sql);
      return inner.query(sql, params);
    },
    exec: (sql) => inner.exec(sql),
    transaction: (fn) => inner.transaction(fn),
    listen: (channel, onNotify) => inner.listen(channel, onNotify),
    close: () => inner.close(),
  };
  return { db: wrapped, statements };
}

/** A write kind over plain SQL arithmetic that records how it was sent; some numbers make it fail. */
function doubling(name = 'doubling') {
  const sent: { one: number[]; many: number[][] } = { one: [], many: [] };
  const kind: GroupedWrite<number, number> = {
    name,
    async one(q: Queryable, n: number) {
      sent.one.push(n);
      const rows = await q.query<{ v: number }>('select (2 * $1::int)::int as v where $1::int >= 0', [n]);
      if (!rows[0]) throw new Error(`negative: ${n}`);
      return rows[0].v;
    },
    async many(q: Queryable, all: number[]) {
      sent.many.push(all);
      if (all.some((n) => n < 0)) throw new Error('a negative element fails the whole statement');
      if (all.includes(999)) throw new StoreUnavailableError('database unavailable: the connection dropped mid-statement');
      if (all.includes(998)) throw Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' });
      if (all.includes(997)) throw Object.assign(new Error('canceling statement due to user request'), { code: '57014' });
      if (all.includes(996) && onPostgres) {
        // A real statement timeout: the server cancels the statement and rolls it back.
        await (q as Db).transaction(async (tx) => {
          await tx.query("set local statement_timeout = '50ms'");
          await tx.query('select pg_sleep(5)');
        });
      }
      const rows = await q.query<{ v: number }>('select (2 * n)::int as v from unnest($1::int[]) with ordinality u(n, o) order by o', [all]);
      return rows.map((r) => r.v);
    },
  };
  return { kind, sent };
}

describe('writeGrouped', () => {
  it('sends a lone write at once, alone, and groups the writes that arrive while it is in flight', async () => {
    const { kind, sent } = doubling();
    const results = await Promise.all([1, 2, 3, 4].map((n) => writeGrouped(db, kind, n)));
    expect(results).toEqual([2, 4, 6, 8]);
    expect(sent.one).toEqual([1]); // nothing was in flight: the first went alone
    expect(sent.many).toEqual([[2, 3, 4]]); // the rest piled up behind it: one statement
    const alone = await writeGrouped(db, kind, 5); // quiet again: alone again
    expect(alone).toBe(10);
    expect(sent.one).toEqual([1, 5]);
  });

  it('falls back to one statement per write when the grouped one fails: each caller gets its own outcome', async () => {
    const { kind, sent } = doubling();
    const outcomes = await Promise.allSettled([0, 7, -1, 9].map((n) => writeGrouped(db, kind, n)));
    expect(sent.many).toEqual([[7, -1, 9]]);
    expect(sent.one.sort()).toEqual([-1, 0, 7, 9].sort());
    expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value : (o.reason as Error).message)))
      .toEqual([0, 14, 'negative: -1', 18]);
  });

  it('sends nothing again when the connection failed under a grouped statement: its outcome is unknown', async () => {
    const { kind, sent } = doubling();
    const outcomes = await Promise.allSettled([1, 2, 999].map((n) => writeGrouped(db, kind, n)));
    expect(sent.one).toEqual([1]);
    expect(sent.many).toEqual([[2, 999]]);
    expect(outcomes[0]).toEqual({ status: 'fulfilled', value: 2 });
    for (const o of outcomes.slice(1)) expect(o).toMatchObject({ status: 'rejected', reason: { code: 'STORE_UNAVAILABLE' } });
  });

  it('sends each write again on its own when the database cancelled the grouped statement at its statement timeout', async () => {
    // It rolled the statement back: nothing was written, so each write is sent alone instead of
    // every segment of the group stopping until its lease expires. 998 fails with the error's
    // shape; on Postgres, 996 meets the server's real statement timeout.
    for (const timedOut of onPostgres ? [998, 996] : [998]) {
      const { kind, sent } = doubling(`doubling-${timedOut}`); // a queue of its own, idle
      const outcomes = await Promise.all([1, 2, timedOut].map((n) => writeGrouped(db, kind, n)));
      expect(sent.many).toEqual([[2, timedOut]]);
      expect(sent.one.sort()).toEqual([1, 2, timedOut]);
      expect(outcomes).toEqual([2, 4, 2 * timedOut]);
    }
  });

  it('sends nothing again after a cancel request: the statement may have committed before it', async () => {
    const { kind, sent } = doubling();
    const outcomes = await Promise.allSettled([1, 2, 997].map((n) => writeGrouped(db, kind, n)));
    expect(sent.one).toEqual([1]);
    for (const o of outcomes.slice(1)) expect(o).toMatchObject({ status: 'rejected', reason: { code: 'STORE_UNAVAILABLE' } });
  });

  it('never groups inside a transaction: a write there goes alone, even while one of its kind is in flight', async () => {
    const { kind, sent } = doubling();
    const inFlight = writeGrouped(db, kind, 1);
    const inTx = await db.transaction((tx) => writeGrouped(tx, kind, 2));
    expect([await inFlight, inTx]).toEqual([2, 4]);
    expect(sent.one).toEqual([1, 2]);
    expect(sent.many).toEqual([]);
  });
});

async function claimed(text: string): Promise<Lease> {
  const turn = await startTurn(db, { ownerId: 'group-commit', text });
  const claim = await claimRun(db, { runId: turn.runId, owner: `w-${text}`, leaseTtlMs: 30_000 });
  if (!claim.claimed) throw new Error(`expected a claim, got ${claim.reason}`);
  return claim.lease;
}

const step = (text: string): Step => ({ kind: 'model', stepNo: 0, text, toolCalls: [], finishReason: 'stop' });
const event = { type: 'step-finished', data: { stepNo: 0 } };

async function stepsOf(runId: string) {
  return db.query<{ fence: number; data: { text: string } }>('select fence, data from agent_kit_steps where run_id = $1', [runId]);
}

describe('grouped step commits (agent_kit_commit_steps)', () => {
  it('writes each run\'s step under its own guard: a stale fence writes nothing, the others commit', async () => {
    const leases = await Promise.all(['a', 'b', 'c', 'd'].map((t) => claimed(`commit-${t}`)));
    const stale = { ...leases[2]!, fence: leases[2]!.fence + 1 }; // a fence this run never had
    const { db: rec, statements } = recording(db);
    const results = await Promise.all([
      commitStep(rec, leases[0]!, step('zero'), event, { delta: 'zero' }),
      commitStep(rec, leases[1]!, step('one'), event),
      commitStep(rec, stale, step('stale'), event, { close: { status: 'completed', message: { text: 'never' } } }),
      commitStep(rec, leases[3]!, step('three'), event, { close: { status: 'completed', message: { text: 'three' } } }),
    ]);
    expect(statements.filter((s) => s.includes('agent_kit_commit_steps('))).toHaveLength(1);
    expect(results.map((r) => r.ok)).toEqual([true, true, false, true]);
    expect(results[3]).toMatchObject({ ok: true, interrupt: null, messageId: expect.any(String) });
    expect(results[0]).toMatchObject({ ok: true, messageId: null });
    expect((await stepsOf(leases[0]!.runId)).map((s) => s.data.text)).toEqual(['zero']);
    expect(await stepsOf(leases[2]!.runId)).toEqual([]);
    const runs = await db.query<{ id: string; status: string; partial: string }>(
      'select id, status, partial from agent_kit_runs where id = any($1::uuid[])', [leases.map((l) => l.runId)],
    );
    const byId = new Map(runs.map((r) => [r.id, r]));
    expect(byId.get(leases[0]!.runId)).toMatchObject({ status: 'running', partial: 'zero' });
    expect(byId.get(leases[2]!.runId)).toMatchObject({ status: 'running' });
    expect(byId.get(leases[3]!.runId)).toMatchObject({ status: 'completed' });
  });

  it('lets a zombie and the run\'s new owner share a group: only the new owner\'s step is written', async () => {
    const zombie = await claimed('zombie');
    await advanceFakeNow(db, 31_000); // the zombie's lease expires; another segment takes the run over
    const takeover = await claimRun(db, { runId: zombie.runId, owner: 'w-new', leaseTtlMs: 30_000 });
    if (!takeover.claimed) throw new Error(`expected a takeover, got ${takeover.reason}`);
    const other = await claimed('zombie-other');
    const { db: rec, statements } = recording(db);
    const results = await Promise.all([
      commitStep(rec, other, step('other'), event),
      commitStep(rec, zombie, step('from the zombie'), event, { close: { status: 'completed', message: { text: 'zombie' } } }),
      commitStep(rec, takeover.lease, step('from the new owner'), event),
    ]);
    expect(statements.filter((s) => s.includes('agent_kit_commit_steps('))).toHaveLength(1);
    expect(results.map((r) => r.ok)).toEqual([true, false, true]);
    expect(await stepsOf(zombie.runId)).toEqual([{ fence: 2, data: expect.objectContaining({ text: 'from the new owner' }) }]);
    const [run] = await db.query<{ status: string; owner: string }>('select status, owner from agent_kit_runs where id = $1', [zombie.runId]);
    expect(run).toEqual({ status: 'running', owner: 'w-new' });
  });

  it('gives a bad commit its own error and still commits the others grouped with it', async () => {
    const leases = await Promise.all(['a', 'b', 'c'].map((t) => claimed(`bad-${t}`)));
    const outcomes = await Promise.allSettled([
      commitStep(db, leases[0]!, step('first'), event),
      commitStep(db, leases[1]!, step('good'), event),
      // A finished effect with no such status: AK001 from agent_kit_commit_step.
      commitStep(db, leases[2]!, step('bad'), event, { effect: { key: 'k', status: 'exploded' as 'completed', result: 1 } }),
    ]);
    expect(outcomes[0]).toMatchObject({ status: 'fulfilled', value: { ok: true } });
    expect(outcomes[1]).toMatchObject({ status: 'fulfilled', value: { ok: true } });
    expect(outcomes[2]).toMatchObject({ status: 'rejected', reason: { code: 'INVALID_ARGUMENT' } });
    expect(await stepsOf(leases[1]!.runId)).toHaveLength(1);
    expect(await stepsOf(leases[2]!.runId)).toEqual([]);
  });

  it('refuses a malformed or oversized group', async () => {
    await expect(db.query(`select * from agent_kit_commit_steps('{}'::jsonb)`)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(db.query(`select * from agent_kit_commit_steps((select jsonb_agg('{}'::jsonb) from generate_series(1, 101)))`))
      .rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('grouped closes (agent_kit_close_runs)', () => {
  it('closes each run under its own guard and returns its message id; a stale lease gets null', async () => {
    const leases = await Promise.all(['a', 'b', 'c', 'd'].map((t) => claimed(`close-${t}`)));
    const { db: rec, statements } = recording(db);
    const ids = await Promise.all([
      closeRun(rec, leases[0]!, 'completed', { text: 'zero' }),
      closeRun(rec, leases[1]!, 'failed', { text: 'one' }),
      closeRun(rec, { ...leases[2]!, owner: 'somebody-else' }, 'completed', { text: 'never' }),
      closeRun(rec, leases[3]!, 'aborted', { text: 'three', cancelled: true }),
    ]);
    expect(statements.filter((s) => s.includes('agent_kit_close_runs('))).toHaveLength(1);
    expect(ids.map((id) => id === null)).toEqual([false, false, true, false]);
    const messages = await db.query<{ id: string; run_id: string; content: { text: string }; partial: boolean }>(
      'select id, run_id, content, partial from agent_kit_messages where run_id = any($1::uuid[]) and role = $2',
      [leases.map((l) => l.runId), 'assistant'],
    );
    const byRun = new Map(messages.map((m) => [m.run_id, m]));
    expect(byRun.get(leases[0]!.runId)).toMatchObject({ id: ids[0], content: { text: 'zero' }, partial: false });
    expect(byRun.get(leases[1]!.runId)).toMatchObject({ id: ids[1], content: { text: 'one' }, partial: true });
    expect(byRun.has(leases[2]!.runId)).toBe(false);
    expect(byRun.get(leases[3]!.runId)).toMatchObject({ id: ids[3], content: { text: 'three', cancelled: true } });
  });

  it('refuses a malformed or oversized group', async () => {
    await expect(db.query(`select * from agent_kit_close_runs('"x"'::jsonb)`)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(db.query(`select * from agent_kit_close_runs((select jsonb_agg('{}'::jsonb) from generate_series(1, 101)))`))
      .rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
