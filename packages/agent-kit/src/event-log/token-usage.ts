// Token usage (ADR-0065): the tokens a model step used as its provider reported them, kept in
// the step's journal entry and its step-finished event, and a run's total over its journal. No
// runtime imports, so the CLI's read commands load it without the engine.
import type { LanguageModelUsage } from 'ai';

/**
 * The tokens one model request used, as its provider reported them: a count it did not report
 * is absent (ADR-0065). Input counts cached tokens too; output counts reasoning tokens too.
 */
export interface TokenUsage {
  inputTokens?: number;
  outputTokens?: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  reasoningTokens?: number;
}

export const tokenCounts = ['inputTokens', 'outputTokens', 'cacheReadTokens', 'cacheWriteTokens', 'reasoningTokens'] as const;

/** The AI SDK's usage of a step as TokenUsage; undefined when the provider reported no count. */
export function tokenUsage(usage: LanguageModelUsage | undefined): TokenUsage | undefined {
  if (!usage) return undefined;
  const counts: Record<keyof TokenUsage, number | undefined> = {
    inputTokens: usage.inputTokens,
    outputTokens: usage.outputTokens,
    cacheReadTokens: usage.inputTokenDetails?.cacheReadTokens,
    cacheWriteTokens: usage.inputTokenDetails?.cacheWriteTokens,
    reasoningTokens: usage.outputTokenDetails?.reasoningTokens,
  };
  const known = Object.entries(counts).filter(([, n]) => typeof n === 'number' && Number.isFinite(n) && n >= 0);
  return known.length > 0 ? Object.fromEntries(known) as TokenUsage : undefined;
}

/** Two requests' usage added up, count by count; undefined when neither reported any. */
export function addUsage(a: TokenUsage | undefined, b: TokenUsage | undefined): TokenUsage | undefined {
  if (!a || !b) return a ?? b;
  const sum: TokenUsage = {};
  for (const count of tokenCounts) {
    if (a[count] !== undefined || b[count] !== undefined) sum[count] = (a[count] ?? 0) + (b[count] ?? 0);
  }
  return sum;
}

/** A run's token counts, each the sum over the model steps that reported it. */
export type RunUsage = TokenUsage & {
  /** The model steps in the journal, and how many of them reported their usage. */
  modelSteps: number;
  reported: number;
};

/** The tokens of a run's journalled model steps, added up (see RunDetail.usage). */
export function runUsage(steps: { kind: string; data: Record<string, unknown> }[]): RunUsage | null {
  const models = steps.filter((step) => step.kind === 'model');
  const total: RunUsage = { modelSteps: models.length, reported: 0 };
  for (const { data } of models) {
    const usage = data.usage as TokenUsage | undefined;
    if (!usage || typeof usage !== 'object') continue;
    total.reported += 1;
    for (const count of tokenCounts) {
      const n = usage[count];
      if (typeof n === 'number') total[count] = (total[count] ?? 0) + n;
    }
  }
  return total.reported > 0 ? total : null;
}
