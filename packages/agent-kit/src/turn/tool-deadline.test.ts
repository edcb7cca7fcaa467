// A tool still running at its segment's deadline is told so: its signal aborts (as the guide
// says: "signal aborts when the segment gives up"), so its work stops instead of going on in the
// background with a result nobody will record. The effect stays `started` for the next owner.
// And one frozen past its lease finds its signal aborted when it looks, before any outside call.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { stepsModel } from '../../test/harness/steps-model.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import type { AgentTool, LanguageModelV3 } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { runSegment } from './run-segment.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

it("aborts a running tool's signal at the segment's deadline and leaves its effect started", async () => {
  let signal: AbortSignal | undefined;
  let abortedAfterMs: number | undefined;
  const slow: AgentTool<{ to: string }, { sent: true }> = {
    name: 'send_email', description: 'takes its time', inputSchema: z.object({ to: z.string() }),
    async execute(_input, ctx) {
      signal = ctx.signal;
      const began = Date.now();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 10_000);
        ctx.signal.addEventListener('abort', () => {
          abortedAfterMs = Date.now() - began;
          clearTimeout(timer);
          resolve();
        }, { once: true });
      });
      return { sent: true };
    },
  };
  const model = stepsModel([{ calls: [{ id: 'e1', name: 'send_email', input: { to: 'a@example.com' } }] }, { text: 'Sent.' }]);
  const rt = makeRuntime(db, { tools: { send_email: slow }, model: model as LanguageModelV3 });
  const turn = await startTurn(db, { ownerId: 'u', text: 'email alice' });
  const outcome = await runSegment(rt, { runId: turn.runId, owner: 'w1', budgetMs: 2_000, leaseTtlMs: 2_000 });
  expect(outcome).toMatchObject({ kind: 'stopped', reason: 'deadline during tool' });
  expect(signal?.aborted).toBe(true);
  expect(abortedAfterMs).toBeLessThan(2_000);
  const [effect] = await db.query<{ status: string }>('select status from agent_kit_effects where run_id = $1', [turn.runId]);
  expect(effect?.status).toBe('started');
});

// A process frozen past its lease (SIGSTOP, a stalled VM: here, a busy wait of the whole event
// loop) runs its due timers in the order they were due when it resumes. The tool's own wait came
// before the lease's end, so it found the signal not yet aborted and charged after another
// process had taken the run over. Read, the signal now looks at the lease's end itself: with a
// renewed lease (TTL under the budget) and with the default, a lease as long as the budget.
it.each([
  { lease: 'renewed', budgetMs: 10_000, leaseTtlMs: 400 },
  { lease: 'as long as the budget', budgetMs: 400, leaseTtlMs: 400 },
])('a tool that checks its signal after a freeze past the lease ($lease) does not make its call', async ({ budgetMs, leaseTtlMs }) => {
  const charged: string[] = [];
  let sawAborted: boolean | undefined;
  const charge: AgentTool<{ cents: number }, { charged: true }> = {
    name: 'charge_card', description: 'charges', inputSchema: z.object({ cents: z.number() }),
    async execute(_input, ctx) {
      // The process freezes 20 ms into the tool's 60 ms wait, for longer than the lease.
      setTimeout(() => {
        const until = performance.now() + leaseTtlMs + 300;
        while (performance.now() < until) { /* frozen */ }
      }, 20);
      await new Promise((resolve) => setTimeout(resolve, 60));
      sawAborted = ctx.signal.aborted;
      if (ctx.signal.aborted) throw new Error('lease gone: not charging');
      charged.push(ctx.idempotencyKey);
      return { charged: true };
    },
  };
  const model = stepsModel([{ calls: [{ id: 'c1', name: 'charge_card', input: { cents: 100 } }] }, { text: 'Charged.' }]);
  const rt = makeRuntime(db, { tools: { charge_card: charge }, model: model as LanguageModelV3 });
  const turn = await startTurn(db, { ownerId: 'u', text: 'charge me' });
  const outcome = await runSegment(rt, { runId: turn.runId, owner: 'w1', budgetMs, leaseTtlMs });
  expect(sawAborted).toBe(true);
  expect(charged).toEqual([]);
  expect(outcome.kind).not.toBe('closed');
  const [effect] = await db.query<{ status: string }>('select status from agent_kit_effects where run_id = $1', [turn.runId]);
  expect(effect?.status).toBe('started'); // for the next owner to reconcile, never run again
});

// Renewed, a lease is still no longer than the invocation's deadline (the SQL caps it there):
// a process frozen past the deadline but not past its last renewal plus the TTL must not call
// out either (a review found the local hold uncapped: it charged at 2.2 s of a 2 s budget).
it('a tool that checks its signal after a freeze past the deadline, short of the last renewal plus the TTL, does not make its call', async () => {
  const charged: string[] = [];
  let startedAt = 0;
  const charge: AgentTool<{ cents: number }, { charged: true }> = {
    name: 'charge_card', description: 'charges', inputSchema: z.object({ cents: z.number() }),
    async execute(_input, ctx) {
      const since = performance.now() - startedAt;
      // Frozen from 1.33 s to 2.2 s of a 2 s budget, its lease renewed every 0.4 s for 1.2 s.
      setTimeout(() => {
        const until = startedAt + 2_200;
        while (performance.now() < until) { /* frozen */ }
      }, Math.max(0, 1_330 - since));
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, 1_420 - since)));
      if (ctx.signal.aborted) throw new Error('lease gone: not charging');
      charged.push(ctx.idempotencyKey);
      return { charged: true };
    },
  };
  const model = stepsModel([{ calls: [{ id: 'c1', name: 'charge_card', input: { cents: 100 } }] }, { text: 'Charged.' }]);
  const rt = makeRuntime(db, { tools: { charge_card: charge }, model: model as LanguageModelV3 });
  const turn = await startTurn(db, { ownerId: 'u', text: 'charge me late' });
  startedAt = performance.now();
  const outcome = await runSegment(rt, { runId: turn.runId, owner: 'w1', budgetMs: 2_000, leaseTtlMs: 1_200 });
  expect(charged).toEqual([]);
  expect(outcome.kind).not.toBe('closed');
  const [effect] = await db.query<{ status: string }>('select status from agent_kit_effects where run_id = $1', [turn.runId]);
  expect(effect?.status).toBe('started');
});
