// A tool's result over maxToolResultBytes (ADR-0058): kept as its head with a note of its size,
// in the ledger, the journal, the event log and the model's next prompt alike, and the turn
// completes on its first attempt with the tool run once. Before, a result of any size was stored
// three times and replayed to every viewer, and one past jsonb's limit (~255 MB) failed its
// record with the effect done. A thrown message is bounded the same way. On both stores.
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { answering, calling } from '../../test/harness/mock-streams.js';
import { openTestDb } from '../../test/harness/test-db.js';
import { makeRuntime } from '../../test/harness/turn-kit.js';
import { askReconcileHook } from '../effect-ledger/index.js';
import type { AgentKitConfig } from '../config.js';
import type { AgentTool } from '../model/index.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { defaultMaxToolResultBytes } from '../store/storable.js';
import { newOwner } from './runtime.js';
import { runSegment } from './run-segment.js';
import type { TurnSettings } from './settings.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

function fetchTool(result: () => unknown): AgentTool<{ url: string }, unknown> & { calls: number } {
  const tool = {
    calls: 0,
    name: 'fetch_page',
    description: 'Fetch a page.',
    inputSchema: z.object({ url: z.string() }),
    async execute() {
      tool.calls += 1;
      return result();
    },
  };
  return tool;
}

async function turnWith(tool: AgentTool<any, any>, settings: Partial<TurnSettings> = {}, config: Partial<AgentKitConfig> = {}) {
  const model = new MockLanguageModelV3({ doStream: [calling('fetch_page', { url: 'https://example.com' }), answering(['Read it.'])] });
  const rt = makeRuntime(db, { model, tools: { fetch_page: tool }, settings, config });
  const turn = await startTurn(db, { ownerId: 'alice', text: 'summarise the page' });
  const outcome = await runSegment(rt, { runId: turn.runId, owner: newOwner('sizes') });
  const [run] = await db.query<{ status: string; attempts: number }>('select status, attempts from agent_kit_runs where id = $1', [turn.runId]);
  const [effect] = await db.query<{ status: string; result: unknown; bytes: number }>(
    'select status, result, octet_length(result::text) as bytes from agent_kit_effects where run_id = $1', [turn.runId]);
  const [event] = await db.query<{ output: unknown }>(
    "select data->'output' as output from agent_kit_thread_events where run_id = $1 and type = 'tool-result'", [turn.runId]);
  const [step] = await db.query<{ output: unknown }>(
    "select data->'output' as output from agent_kit_steps where run_id = $1 and kind = 'tool'", [turn.runId]);
  const prompt = model.doStreamCalls[1]!.prompt.find((message) => message.role === 'tool');
  return { outcome, run: run!, effect: effect!, event: event!, step: step!, prompt };
}

describe("a tool's result over maxToolResultBytes", () => {
  it('a page of text over the default 1 MiB: its head, with a note, everywhere the result goes', async () => {
    const page = 'lorem ipsum '.repeat(300_000); // 3.6 MB
    const tool = fetchTool(() => page);
    const { outcome, run, effect, event, step, prompt } = await turnWith(tool);
    expect(outcome).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(run).toEqual({ status: 'completed', attempts: 1 });
    expect(tool.calls).toBe(1);
    const kept = effect.result as { truncated: string; head: string };
    expect(effect.status).toBe('completed');
    expect(kept.truncated).toBe(`the tool's result was ${page.length + 2} bytes, over the ${defaultMaxToolResultBytes} kept: `
      + `this is the first ${kept.head.length} characters of its text, cut`);
    expect(page.startsWith(kept.head)).toBe(true);
    expect(kept.head.length).toBeGreaterThan(defaultMaxToolResultBytes - 1024);
    expect(Number(effect.bytes)).toBeLessThanOrEqual(defaultMaxToolResultBytes);
    expect(event.output).toEqual(kept);
    expect(step.output).toEqual(kept);
    expect(prompt).toMatchObject({ content: [{ type: 'tool-result', output: { value: kept } }] });
  });

  it('a result under the bound is kept whole, and the bound is a turn setting', async () => {
    const rows = Array.from({ length: 400 }, (_, i) => ({ id: i, name: `row ${i} \u{1F600}` }));
    const whole = await turnWith(fetchTool(() => rows), { maxToolResultBytes: 20_000 });
    expect(whole.effect.result).toEqual(rows);

    const many = Array.from({ length: 1_000 }, (_, i) => ({ id: i, name: `row ${i} \u{1F600}` }));
    const cut = await turnWith(fetchTool(() => many), { maxToolResultBytes: 20_000 });
    expect(cut.run).toEqual({ status: 'completed', attempts: 1 });
    const kept = cut.effect.result as { truncated: string; head: string };
    expect(kept.truncated).toMatch(/^the tool's result was \d+ bytes, over the 20000 kept: this is the first \d+ characters of its JSON text, cut$/);
    expect(JSON.stringify(many).startsWith(kept.head)).toBe(true);
    expect(Buffer.byteLength(JSON.stringify(kept))).toBeLessThanOrEqual(20_000);
    expect(cut.prompt).toMatchObject({ content: [{ type: 'tool-result', output: { value: kept } }] });
  });

  it('the bound from the configuration (AGENT_KIT_MAX_TOOL_RESULT_BYTES), which a turn setting overrides', async () => {
    const page = 'x'.repeat(20_000);
    const fromConfig = await turnWith(fetchTool(() => page), {}, { maxToolResultBytes: 8_192 });
    expect(fromConfig.effect.result).toMatchObject({ truncated: expect.stringContaining('over the 8192 kept') });
    const overridden = await turnWith(fetchTool(() => page), { maxToolResultBytes: 30_000 }, { maxToolResultBytes: 8_192 });
    expect(overridden.effect.result).toBe(page);
  });

  it("a thrown error's message over the bound: recorded failed with its head", async () => {
    const body = '<html>'.padEnd(50_000, 'x');
    const tool = fetchTool(() => {
      throw new Error(`502 from upstream: ${body}`);
    });
    const { run, effect, prompt } = await turnWith(tool, { maxToolResultBytes: 4_096 });
    expect(run).toEqual({ status: 'completed', attempts: 1 });
    const error = (effect.result as { error: string }).error;
    expect(effect.status).toBe('failed');
    expect(error).toMatch(/^502 from upstream: <html>x+ … \(cut: the message was 50019 bytes\)$/);
    expect(Buffer.byteLength(error)).toBeLessThanOrEqual(4_096);
    expect(JSON.stringify(prompt)).toContain('(cut: the message was 50019 bytes)');
  });

  it("a reconcile hook's answer over the bound", async () => {
    const hook: AgentTool<object, unknown> = {
      name: 'pay', description: 'Pay.', inputSchema: z.object({}),
      reconcile: async () => ({ found: true, result: { receipt: 'r'.repeat(10_000) } }),
    };
    const outcome = await askReconcileHook(hook, 'k1', { maxResultBytes: 2_048 });
    expect(outcome).toMatchObject({ status: 'completed', result: { truncated: expect.stringContaining('over the 2048 kept') } });
    expect(Buffer.byteLength(JSON.stringify(outcome!.result))).toBeLessThanOrEqual(2_048);
  });
});
