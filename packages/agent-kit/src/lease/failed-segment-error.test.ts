// A failed segment's event goes to everyone who may read the thread, the user's browser included:
// it says what failed, not where in the server (ADR-0100). The run's last_error keeps the stack
// for the operator.
import { describe, expect, it } from 'vitest';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { withTestDb } from '../../test/harness/test-db.js';
import { startTurn } from '../queue/start-turn.js';
import { migrate } from '../store/migrate.js';
import type { Db } from '../store/db.js';
import { runSegment } from '../turn/run-segment.js';
import { claimRun, failLease } from './lease.js';

class BillingDown extends Error {
  code = 'ECONNREFUSED';
  constructor() {
    super('connect ECONNREFUSED 10.20.30.40:443');
    this.name = 'BillingDown';
  }
}

async function failOneSegment(db: Db, text: string): Promise<string> {
  const turn = await startTurn(db, { ownerId: 'u', text });
  const claim = await claimRun(db, { runId: turn.runId, owner: 'w1', leaseTtlMs: 30_000 });
  if (!claim.claimed) throw new Error(`not claimed: ${claim.reason}`);
  expect(await failLease(db, claim.lease, new BillingDown())).toBe(true);
  return turn.runId;
}

async function failure(db: Db, runId: string) {
  const [row] = await db.query<{ event: Record<string, unknown>; last_error: Record<string, unknown> }>(
    `select e.data->'error' as event, r.last_error from agent_kit_thread_events e join agent_kit_runs r on r.id = e.run_id
     where e.run_id = $1 and e.type = 'segment-failed'`, [runId]);
  return row!;
}

describe('a failed segment', () => {
  it('tells the thread what failed without the stack, and keeps the stack in the run for the operator', async () => {
    await withTestDb(async (db) => {
      const runId = await failOneSegment(db, 'fails now');
      const { event, last_error } = await failure(db, runId);
      expect(event).toEqual({ name: 'BillingDown', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 10.20.30.40:443' });
      expect(last_error).toMatchObject({ name: 'BillingDown', message: 'connect ECONNREFUSED 10.20.30.40:443' });
      expect(last_error.stack).toMatch(/^BillingDown: connect ECONNREFUSED[^\n]*\n\s+at failOneSegment/);
    });
  });

  it("blames the app's own service, not the database, for a network error its code threw", async () => {
    await withTestDb(async (db) => {
      const logged: Record<string, unknown>[] = [];
      const rt = {
        ...makeRuntime(db),
        instructions: () => { throw new BillingDown(); },
        log: (entry: Record<string, unknown>) => { logged.push(entry); },
      };
      const turn = await startTurn(db, { ownerId: 'u', text: 'instructions from a service that is down' });
      expect(await runSegment(rt, { runId: turn.runId, owner: 'w1' }))
        .toEqual({ kind: 'stopped', fence: 1, reason: 'connect ECONNREFUSED 10.20.30.40:443' });
      const { event } = await failure(db, turn.runId);
      expect(event).toEqual({ name: 'BillingDown', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 10.20.30.40:443' });
      expect(logged.map((e) => e.msg)).toContain('segment failed');
      expect(logged.map((e) => e.msg)).not.toContain('segment gave its lease up after a store error: the next reaper pass hands the run on');
    });
  });

  it('reports the run lost, not stopped, when another segment took it before the failure was written', async () => {
    await withTestDb(async (db) => {
      const turn = await startTurn(db, { ownerId: 'u', text: 'fails after a takeover' });
      const rt = {
        ...makeRuntime(db),
        instructions: async () => {
          // A second segment claims the run (its lease ran out while this one waited on a service).
          await db.query(`update agent_kit_runs set owner = 'w2', fence = fence + 1 where id = $1`, [turn.runId]);
          throw new BillingDown();
        },
      };
      expect(await runSegment(rt, { runId: turn.runId, owner: 'w1' })).toEqual({ kind: 'lost', fence: 1 });
      const [row] = await db.query<{ failed: number }>(
        `select count(*)::int as failed from agent_kit_thread_events where run_id = $1 and type = 'segment-failed'`, [turn.runId]);
      expect(row!.failed).toBe(0);
    });
  });

  it('takes an error of any JSON shape, and no stack of its causes reaches the thread', async () => {
    await withTestDb(async (db) => {
      const fail = async (text: string, error: string) => {
        const turn = await startTurn(db, { ownerId: 'u', text });
        const claim = await claimRun(db, { runId: turn.runId, owner: 'w1', leaseTtlMs: 30_000 });
        if (!claim.claimed) throw new Error(`not claimed: ${claim.reason}`);
        const [{ given }] = await db.query<{ given: boolean }>(
          `select agent_kit_fail_segment($1, 'w1', $2, $3::jsonb) as given`, [turn.runId, claim.lease.fence, error]) as [{ given: boolean }];
        expect(given, error).toBe(true); // the lease is given up, whatever the error's shape (0039 raised for a scalar)
        return failure(db, turn.runId);
      };
      for (const scalar of ['"boom"', '42', 'null', '["a", "stack"]']) {
        const { event, last_error } = await fail(`scalar ${scalar}`, scalar);
        expect(event).toEqual(JSON.parse(scalar));
        expect(last_error).toEqual(JSON.parse(scalar));
      }
      const nested = { name: 'Error', message: 'outer', stack: 'Error: outer\n  at a', cause: { message: 'inner', stack: 'at b', cause: { stack: 'at c', code: 'E1' } } };
      const { event, last_error } = await fail('nested causes', JSON.stringify(nested));
      expect(event).toEqual({ name: 'Error', message: 'outer', cause: { message: 'inner', cause: { code: 'E1' } } });
      expect(last_error).toEqual(nested);
    });
  });

  it('loses the stack from the events written before migration 0039, and nothing else', async () => {
    await withTestDb(async (db) => {
      const runId = await failOneSegment(db, 'failed under 0038');
      const before = await failure(db, runId);
      expect(before.event.stack).toEqual(expect.any(String));
      const [{ data: kept }] = await db.query<{ data: unknown }>(
        `select data from agent_kit_thread_events where run_id = $1 and type = 'message'`, [runId]) as [{ data: unknown }];

      expect(await migrate(db)).toMatchObject({ applied: expect.arrayContaining([39]) });
      const after = await failure(db, runId);
      const { stack: _stack, ...rest } = before.event;
      expect(after.event).toEqual(rest);
      expect(after.last_error).toEqual(before.last_error);
      const [{ data: still }] = await db.query<{ data: unknown }>(
        `select data from agent_kit_thread_events where run_id = $1 and type = 'message'`, [runId]) as [{ data: unknown }];
      expect(still).toEqual(kept);
    }, { to: 38 });
  });
});
