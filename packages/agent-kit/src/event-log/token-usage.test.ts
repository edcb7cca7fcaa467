// Token usage (ADR-0065): the AI SDK's usage of a step as the journal keeps it (only the counts
// the provider reported), and a run's total over its model steps, as `agent-kit show` and
// GET /api/runs/:id give it.
import { describe, expect, it } from 'vitest';
import { runUsage, tokenUsage } from './token-usage.js';

const sdkUsage = (counts: {
  input?: number; output?: number; cacheRead?: number; cacheWrite?: number; reasoning?: number;
}) => ({
  inputTokens: counts.input,
  inputTokenDetails: { noCacheTokens: undefined, cacheReadTokens: counts.cacheRead, cacheWriteTokens: counts.cacheWrite },
  outputTokens: counts.output,
  outputTokenDetails: { textTokens: undefined, reasoningTokens: counts.reasoning },
  totalTokens: undefined,
});

describe('a step\'s token usage', () => {
  it('keeps the counts the provider reported, cached and reasoning ones included', () => {
    expect(tokenUsage(sdkUsage({ input: 1200, output: 80, cacheRead: 1000, reasoning: 30 })))
      .toEqual({ inputTokens: 1200, outputTokens: 80, cacheReadTokens: 1000, reasoningTokens: 30 });
    expect(tokenUsage(sdkUsage({ input: 5, output: 0, cacheWrite: 5 }))).toEqual({ inputTokens: 5, outputTokens: 0, cacheWriteTokens: 5 });
  });

  it('is absent when the provider reported no count, and drops counts that are not counts', () => {
    expect(tokenUsage(undefined)).toBeUndefined();
    expect(tokenUsage(sdkUsage({}))).toBeUndefined();
    expect(tokenUsage(sdkUsage({ input: Number.NaN, output: -1, reasoning: 7 }))).toEqual({ reasoningTokens: 7 });
  });
});

describe('a run\'s token usage', () => {
  const model = (usage?: Record<string, number>) => ({ kind: 'model', data: usage ? { usage } : {} });
  const tool = { kind: 'tool', data: { usage: { inputTokens: 999 } } }; // not a model step: never counted

  it('adds each count over the model steps that reported it', () => {
    expect(runUsage([
      model({ inputTokens: 100, outputTokens: 10, cacheReadTokens: 60 }), tool,
      model({ inputTokens: 150, outputTokens: 20, reasoningTokens: 5 }),
    ])).toEqual({ inputTokens: 250, outputTokens: 30, cacheReadTokens: 60, reasoningTokens: 5, modelSteps: 2, reported: 2 });
  });

  it('says how many steps reported, and is null when none did', () => {
    expect(runUsage([model({ inputTokens: 7, outputTokens: 1 }), model()]))
      .toEqual({ inputTokens: 7, outputTokens: 1, modelSteps: 2, reported: 1 });
    expect(runUsage([model(), tool])).toBeNull();
    expect(runUsage([])).toBeNull();
  });
});
