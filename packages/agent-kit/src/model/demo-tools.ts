// Built-in demo tools for the scripted model's #effect, #ask and #approve. Each executed effect
// appends exactly one line, its idempotency key, to AGENT_KIT_DEMO_EFFECTS_FILE, so tests and the
// chaos harness can count side effects per key (the exactly-once check).

import { appendFileSync, readFileSync } from 'node:fs';
import { z } from 'zod';
import type { AgentTool, ReconcileResult } from './agent-tool.js';

const keyLengthMax = 512; // one short line; a longer key is a caller bug, not data

/** Path of the effects file, read at call time so a test or process can point it elsewhere. */
function effectsFilePath(): string | undefined {
  const path = process.env.AGENT_KIT_DEMO_EFFECTS_FILE?.trim();
  return path === undefined || path === '' ? undefined : path;
}

function assertKey(idempotencyKey: string): void {
  // A newline would split one effect into two lines and break the one-line-per-effect count.
  if (idempotencyKey === '' || idempotencyKey.length > keyLengthMax ||
    /[\r\n]/.test(idempotencyKey)) {
    throw new Error(`Idempotency key ${JSON.stringify(idempotencyKey.slice(0, 80))} is not ` +
      `usable: expected 1 to ${keyLengthMax} characters without line breaks.`);
  }
}

/** Appends the key as one line in a single write (O_APPEND), so concurrent writers never mix. */
function appendEffectLine(idempotencyKey: string, signal: AbortSignal): void {
  assertKey(idempotencyKey);
  signal.throwIfAborted();
  const path = effectsFilePath();
  if (path !== undefined) appendFileSync(path, `${idempotencyKey}\n`, { flag: 'a' });
}

/** Whether the effects file holds a line that is exactly this key. */
function hasEffectLine(idempotencyKey: string): boolean {
  const path = effectsFilePath();
  if (path === undefined) return false;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (raw) {
    // No file yet means no effect happened yet; any other read failure must surface.
    if ((raw as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw raw;
  }
  return text.split('\n').includes(idempotencyKey);
}

export type RecordEffectInput = { note: string };
export type RecordEffectOutput = { recorded: true; key: string };

/** `record_effect`: an effect with a reconcile hook (the scripted model calls it on #effect). */
export const recordEffectTool: AgentTool<RecordEffectInput, RecordEffectOutput> = {
  name: 'record_effect',
  description: 'Records a demo side effect once, keyed by its idempotency key.',
  inputSchema: z.object({ note: z.string() }),
  async execute(_input, { idempotencyKey, signal }) {
    appendEffectLine(idempotencyKey, signal);
    return { recorded: true, key: idempotencyKey };
  },
  async reconcile({ idempotencyKey }): Promise<ReconcileResult<RecordEffectOutput>> {
    return hasEffectLine(idempotencyKey)
      ? { found: true, result: { recorded: true, key: idempotencyKey } }
      : { found: false };
  },
};

export type TransferFundsInput = { amount: number; to: string };
export type TransferFundsOutput = { transferred: number; to: string; key: string };

/**
 * `transfer_funds`: an effect that waits for the user's approval (the scripted model calls it on
 * #approve). It has no reconcile hook on purpose, so a crash mid-execute shows the in_doubt path.
 */
export const transferFundsTool: AgentTool<TransferFundsInput, TransferFundsOutput> = {
  name: 'transfer_funds',
  description: 'Transfers a demo amount to a recipient after the user approves.',
  inputSchema: z.object({ amount: z.number(), to: z.string() }),
  needsApproval: true,
  async execute({ amount, to }, { idempotencyKey, signal }) {
    appendEffectLine(idempotencyKey, signal);
    return { transferred: amount, to, key: idempotencyKey };
  },
};

export type AskUserInput = { question: string };

/** `ask_user`: a question; the run parks until the user answers, and the answer is its result. */
export const askUserTool: AgentTool<AskUserInput, unknown> = {
  name: 'ask_user',
  description: 'Asks the user a question and waits for the answer.',
  inputSchema: z.object({ question: z.string() }),
  kind: 'question',
};

/** The demo tools by name, for a turn engine that registers them all. */
export const demoTools = {
  record_effect: recordEffectTool,
  transfer_funds: transferFundsTool,
  ask_user: askUserTool,
} as const;
