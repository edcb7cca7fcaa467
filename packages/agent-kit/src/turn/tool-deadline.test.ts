// A tool still running at its segment's deadline is told so: its signal aborts (as the guide
// says: "signal aborts when the segment gives up"), so its work stops instead of going on in the
// background with a result nobody will record. The effect stays `started` for the next owner.
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
