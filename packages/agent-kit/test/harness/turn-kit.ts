// Test helpers for the turn engine: a Runtime over a test database with the scripted model, and
// model/tool wrappers that freeze a segment at a chosen point so another owner can take over.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { z } from 'zod';
import type { AgentKitConfig } from '../../src/config.js';
import { startTurn } from '../../src/queue/start-turn.js';
import { createScriptedModel, demoTools, type AgentTool, type LanguageModelV3 } from '../../src/model/index.js';
import type { Db } from '../../src/store/db.js';
import type { Runtime } from '../../src/turn/types.js';
import type { TurnSettings } from '../../src/turn/settings.js';

export const testConfig = (overrides: Partial<AgentKitConfig> = {}): AgentKitConfig => ({
  model: 'scripted',
  invocationBudgetMs: 60_000,
  leaseTtlMs: 60_000,
  maxRunAttempts: 3,
  ...overrides,
});

export function makeRuntime(
  db: Db,
  options: {
    model?: Runtime['model'];
    tokens?: number;
    delayMs?: number;
    tools?: Record<string, AgentTool<any, any>>;
    settings?: Partial<TurnSettings>;
    config?: Partial<AgentKitConfig>;
  } = {},
): Runtime {
  return {
    db,
    model: options.model ?? createScriptedModel({ tokens: options.tokens ?? 12, delayMs: options.delayMs ?? 0 }),
    tools: options.tools ?? { ...demoTools },
    config: testConfig(options.config),
    turnSettings: { mirrorIntervalMs: 2, ...options.settings },
  };
}

/** A `charge_card` tool that records each call's idempotency key in `charged`. */
export function chargeTool(charged: string[]): AgentTool<{ cents: number }, { ok: true }> {
  return {
    name: 'charge_card', description: 'Charge the card', inputSchema: z.object({ cents: z.number() }),
    async execute(_input, { idempotencyKey }) {
      charged.push(idempotencyKey);
      return { ok: true };
    },
  };
}

/** A gate: `wait()` blocks until `open()`. */
export function gate() {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { wait: () => promise, open };
}

/**
 * Wrap a model so that, after `pauseAfter` stream parts (counted across all its calls), it blocks
 * until `until` resolves: the segment freezes there like a process stopped with SIGSTOP.
 * `onPause` fires when it blocks.
 */
export function freezingModel(
  inner: LanguageModelV3, pauseAfter: number, until: Promise<void>, onPause: () => void,
): LanguageModelV3 {
  let parts = 0;
  return {
    specificationVersion: 'v3',
    provider: inner.provider,
    modelId: inner.modelId,
    supportedUrls: inner.supportedUrls,
    doGenerate: (o) => inner.doGenerate(o),
    async doStream(o) {
      const result = await inner.doStream(o);
      const reader = result.stream.getReader();
      const stream = new ReadableStream({
        async pull(controller) {
          if (parts++ === pauseAfter) {
            onPause();
            await until;
          }
          const next = await reader.read();
          if (next.done) controller.close();
          else controller.enqueue(next.value);
        },
        cancel: (reason) => reader.cancel(reason),
      });
      return { ...result, stream };
    },
  };
}

/** A model whose stream fails with `error` after `after` parts (counted across calls, once). */
export function failingModel(inner: LanguageModelV3, after: number, error: Error): LanguageModelV3 {
  let parts = 0;
  let failed = false;
  return {
    ...freezingModel(inner, Number.POSITIVE_INFINITY, Promise.resolve(), () => {}),
    async doStream(o) {
      const result = await inner.doStream(o);
      const reader = result.stream.getReader();
      const stream = new ReadableStream({
        async pull(controller) {
          if (!failed && parts++ === after) {
            failed = true;
            controller.error(error);
            return;
          }
          const next = await reader.read();
          if (next.done) controller.close();
          else controller.enqueue(next.value);
        },
      });
      return { ...result, stream };
    },
  };
}

/** A temporary effects file for record_effect, and a reader of its lines. */
export function effectsFile() {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-kit-effects-')), 'effects.log');
  const previous = process.env.AGENT_KIT_DEMO_EFFECTS_FILE;
  process.env.AGENT_KIT_DEMO_EFFECTS_FILE = file;
  return {
    file,
    lines: () => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : []),
    restore: () => {
      if (previous === undefined) delete process.env.AGENT_KIT_DEMO_EFFECTS_FILE;
      else process.env.AGENT_KIT_DEMO_EFFECTS_FILE = previous;
    },
  };
}

/** The final assistant message of a run. */
export async function finalMessage(db: Db, runId: string) {
  const rows = await db.query<{ text: string; partial: boolean }>(
    `select content->>'text' as text, partial from agent_kit_messages where run_id = $1 and role = 'assistant'`,
    [runId],
  );
  return rows;
}

/**
 * A thread of `ann`'s with one answered turn per text, each run to its close by `run`; message n
 * is sent with the client id `<prefix><n>`.
 */
export async function answeredThread(db: Db, run: (runId: string) => Promise<unknown>, prefix: string, texts: string[]) {
  let threadId: string | undefined;
  const runIds: string[] = [];
  for (const [n, text] of texts.entries()) {
    const turn = await startTurn(db, { ...(threadId ? { threadId } : {}), ownerId: 'ann', text, clientMessageId: `${prefix}${n + 1}` });
    threadId = turn.threadId;
    runIds.push(turn.runId);
    expect(await run(turn.runId)).toMatchObject({ kind: 'closed', status: 'completed' });
  }
  return { threadId: threadId!, runIds };
}
