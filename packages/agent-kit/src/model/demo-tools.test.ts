// Goal: the demo tools write exactly one line per executed effect and reconcile by key. Method:
// point AGENT_KIT_DEMO_EFFECTS_FILE at a temporary file and read it back after each call.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { askUserTool, demoTools, recordEffectTool, transferFundsTool } from './demo-tools.js';

let folder: string;
let effectsFile: string;
const previousFile = process.env.AGENT_KIT_DEMO_EFFECTS_FILE;
const signal = new AbortController().signal;

beforeEach(() => {
  folder = mkdtempSync(join(tmpdir(), 'agent-kit-demo-tools-'));
  effectsFile = join(folder, 'effects.log');
  process.env.AGENT_KIT_DEMO_EFFECTS_FILE = effectsFile;
});

afterEach(() => {
  if (previousFile === undefined) delete process.env.AGENT_KIT_DEMO_EFFECTS_FILE;
  else process.env.AGENT_KIT_DEMO_EFFECTS_FILE = previousFile;
  rmSync(folder, { recursive: true, force: true });
});

const effectLines = (): string[] => readFileSync(effectsFile, 'utf8').split('\n').slice(0, -1);

describe('record_effect', () => {
  it('appends exactly the idempotency key as one line per execution', async () => {
    const result = await recordEffectTool.execute?.({ note: 'n' }, { idempotencyKey: 'run-1:c1',
      signal });
    await recordEffectTool.execute?.({ note: 'n' }, { idempotencyKey: 'run-2:c1', signal });
    expect(result).toEqual({ recorded: true, key: 'run-1:c1' });
    expect(readFileSync(effectsFile, 'utf8')).toBe('run-1:c1\nrun-2:c1\n');
  });

  it('reconciles by exact key: found after execute, not found for other keys', async () => {
    expect(await recordEffectTool.reconcile?.({ idempotencyKey: 'k1' })).toEqual({ found: false });
    await recordEffectTool.execute?.({ note: 'n' }, { idempotencyKey: 'k1', signal });
    expect(await recordEffectTool.reconcile?.({ idempotencyKey: 'k1' }))
      .toEqual({ found: true, result: { recorded: true, key: 'k1' } });
    expect(await recordEffectTool.reconcile?.({ idempotencyKey: 'k' })).toEqual({ found: false });
  });

  it('writes nothing and reconciles as not found when the variable is unset', async () => {
    delete process.env.AGENT_KIT_DEMO_EFFECTS_FILE;
    expect(await recordEffectTool.execute?.({ note: 'n' }, { idempotencyKey: 'k2', signal }))
      .toEqual({ recorded: true, key: 'k2' });
    expect(await recordEffectTool.reconcile?.({ idempotencyKey: 'k2' })).toEqual({ found: false });
  });

  it('refuses keys with line breaks and aborted signals without writing', async () => {
    await expect(recordEffectTool.execute?.({ note: 'n' }, { idempotencyKey: 'a\nb', signal }))
      .rejects.toThrow(/line breaks/);
    const reason = new Error('lease lost');
    await expect(recordEffectTool.execute?.({ note: 'n' }, { idempotencyKey: 'k3',
      signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(() => readFileSync(effectsFile)).toThrow(/ENOENT/);
  });

  it('validates its input with zod', () => {
    expect(recordEffectTool.inputSchema.safeParse({ note: 'x' }).success).toBe(true);
    expect(recordEffectTool.inputSchema.safeParse({ note: 3 }).success).toBe(false);
  });
});

describe('transfer_funds and ask_user', () => {
  it('transfer_funds needs approval, returns the transfer and records its key', async () => {
    expect(transferFundsTool.needsApproval).toBe(true);
    const result = await transferFundsTool.execute?.({ amount: 42, to: 'demo' },
      { idempotencyKey: 'run-3:t1', signal });
    expect(result).toEqual({ transferred: 42, to: 'demo', key: 'run-3:t1' });
    expect(effectLines()).toEqual(['run-3:t1']);
    expect(transferFundsTool.inputSchema.safeParse({ amount: '42', to: 'demo' }).success)
      .toBe(false);
  });

  it('ask_user is a question with no execute', () => {
    expect(askUserTool.kind).toBe('question');
    expect(askUserTool.execute).toBeUndefined();
    expect(askUserTool.inputSchema.safeParse({ question: 'why?' }).success).toBe(true);
  });

  it('lists the three tools under the names the scripted model calls', () => {
    expect(Object.entries(demoTools).map(([key, entry]) => [key, entry.name])).toEqual([
      ['record_effect', 'record_effect'], ['transfer_funds', 'transfer_funds'],
      ['ask_user', 'ask_user']]);
  });
});
