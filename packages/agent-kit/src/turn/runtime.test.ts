// createRuntime with your own tool, on both stores: the tool is called by a stand-in model (the
// AI SDK's MockLanguageModelV3, as the guide shows for trying a tool offline), waits for its
// approval, runs once through the effect ledger and the turn completes; a tool registered under
// a key other than its name is refused before the store is opened.
import { simulateReadableStream } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openTestDb } from '../../test/harness/test-db.js';
import { testConfig } from '../../test/harness/turn-kit.js';
import { InvalidArgumentError } from '../errors.js';
import type { AgentTool } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { createRuntime, newOwner } from './runtime.js';
import { runSegment } from './run-segment.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** The guide's stand-in model: its first step calls send_invoice, its second answers. */
function standInModel() {
  return new MockLanguageModelV3({
    doStream: [
      {
        stream: simulateReadableStream({
          chunks: [
            { type: 'tool-call', toolCallId: 'call-1', toolName: 'send_invoice', input: JSON.stringify({ customer: 'acme', cents: 1200 }) },
            { type: 'finish', finishReason: { unified: 'tool-calls', raw: undefined }, usage },
          ],
        }),
      },
      {
        stream: simulateReadableStream({
          chunks: [
            { type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'Sent.' }, { type: 'text-end', id: 't' },
            { type: 'finish', finishReason: { unified: 'stop', raw: undefined }, usage },
          ],
        }),
      },
    ],
  });
}

function invoiceTool(invoicesByKey: Map<string, { invoiceId: string }>) {
  const sendInvoice: AgentTool<{ customer: string; cents: number }, { invoiceId: string }> = {
    name: 'send_invoice',
    description: 'Send an invoice to a customer.',
    inputSchema: z.object({ customer: z.string(), cents: z.number().int().positive() }),
    needsApproval: true,
    async execute(_input, { idempotencyKey }) {
      const existing = invoicesByKey.get(idempotencyKey);
      if (existing) return existing;
      const invoice = { invoiceId: `inv-${invoicesByKey.size + 1}` };
      invoicesByKey.set(idempotencyKey, invoice);
      return invoice;
    },
  };
  return sendInvoice;
}

describe('createRuntime with a tool of your own', () => {
  it('runs it offline with a stand-in model: approval, one execution, the turn completes', async () => {
    const invoicesByKey = new Map<string, { invoiceId: string }>();
    const rt = await createRuntime(testConfig(), { db, model: standInModel(), tools: { send_invoice: invoiceTool(invoicesByKey) } });
    const turn = await startTurn(rt.db, { ownerId: 'alice', text: 'Invoice acme for $12' });
    expect(await runSegment(rt, { runId: turn.runId, owner: newOwner('try') }))
      .toMatchObject({ kind: 'parked', status: 'waiting_input' });
    const answer = await startTurn(rt.db, { threadId: turn.threadId, ownerId: 'alice', text: 'yes' });
    expect(answer.kind).toBe('input');
    expect(await runSegment(rt, { runId: turn.runId, owner: newOwner('try') }))
      .toMatchObject({ kind: 'closed', status: 'completed' });
    expect([...invoicesByKey.values()]).toEqual([{ invoiceId: 'inv-1' }]);
    // Your tools alone: the demo tools come only when asked for, or when you have none.
    expect(Object.keys(rt.tools)).toEqual(['send_invoice']);
    const both = await createRuntime(testConfig(), { db, model: standInModel(), tools: { send_invoice: invoiceTool(invoicesByKey) }, demoTools: true });
    expect(Object.keys(both.tools).sort()).toEqual(['ask_user', 'record_effect', 'send_invoice', 'transfer_funds']);
    expect(Object.keys((await createRuntime(testConfig(), { db, model: standInModel() })).tools).sort())
      .toEqual(['ask_user', 'record_effect', 'transfer_funds']);
    expect((await createRuntime(testConfig(), { db, model: standInModel(), demoTools: false })).tools).toEqual({});
    const [message] = await db.query<{ text: string }>(
      `select content->>'text' as text from agent_kit_messages where run_id = $1 and role = 'assistant'`, [turn.runId]);
    expect(message?.text).toBe('Sent.');
  });

  it('refuses a tool registered under a key that is not its name, before opening a store', async () => {
    const tool = invoiceTool(new Map());
    // No db is given and the config names no store: a store opened first would be the embedded
    // one in ./.agent-kit, so the refusal must come before it.
    const config = { ...testConfig(), dataDir: '/dev/null/agent-kit-must-not-open' };
    await expect(createRuntime(config, { tools: { invoice: tool } })).rejects.toThrow(InvalidArgumentError);
    await expect(createRuntime(config, { tools: { invoice: tool } }))
      .rejects.toThrow('the tool registered as "invoice" is named "send_invoice": register each tool under its name');
  });
});
