// A model step holds O(1) of its own per stream part. Racing every read against one long-lived
// abort promise (Promise.race) left a reaction on it per part until the step ended: a
// 20,000-token step held 14 MB near its end, half of it those reactions. What a step still holds
// per token is the AI SDK's own record of the stream (~300 bytes); the bound leaves room for
// that and fails with the per-part leak (~650 bytes per token).
import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { createScriptedModel } from '../model/scripted-model.js';
import { runModelStep } from './model-step.js';
import type { StreamMirror } from './stream-mirror.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** Heap held (after a full GC) just before the end of a `tokens`-token step, above the start. */
async function heldNearEnd(tokens: number): Promise<number> {
  const model = createScriptedModel({ tokens, delayMs: 0 });
  let pushed = 0;
  let held = Number.NaN;
  gc();
  const base = process.memoryUsage().heapUsed;
  const mirror = {
    push() {
      if (++pushed === tokens - 5) {
        gc();
        held = process.memoryUsage().heapUsed - base;
      }
    },
  } as unknown as StreamMirror;
  const result = await runModelStep({
    model, messages: [{ role: 'user', content: 'a long answer' }], tools: {}, prefix: '', mirror,
    segmentSignal: new AbortController().signal, stopAtMs: Date.now() + 60_000, stallTimeoutMs: 30_000, showReasoning: true,
  });
  expect(result.kind).toBe('done');
  expect(pushed).toBe(tokens);
  return held;
}

describe('runModelStep memory', () => {
  it('holds a bounded amount per streamed part while the step runs', async () => {
    await heldNearEnd(500); // warm up the SDK's and the JIT's one-time allocations
    const short = await heldNearEnd(2_000);
    const long = await heldNearEnd(20_000);
    const perToken = (long - short) / 18_000;
    console.log(`held near the end: ${(short / 1024).toFixed(0)} KiB at 2,000 tokens, ` +
      `${(long / 1024).toFixed(0)} KiB at 20,000: ${perToken.toFixed(0)} bytes per token`);
    expect(perToken).toBeLessThan(450);
  });
});
