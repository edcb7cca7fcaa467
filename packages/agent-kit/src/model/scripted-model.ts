// The scripted model: a deterministic, offline LanguageModelV3 that the AI SDK drives like any
// provider. What it says comes from planScriptedStep; this file owns pacing, streaming and abort.

import { APICallError } from 'ai';
import { ModelConfigError } from './model-config-error.js';
import type {
  LanguageModelV3,
  ModelCallOptions,
  ModelGenerateResult,
  ModelPrompt,
  ModelStreamPart,
  ModelStreamResult,
  ModelUsage,
} from './provider-types.js';
import {
  hashFnv1a,
  messageText,
  planScriptedStep,
  splitReplyTokens,
  type ScriptedStep,
} from './scripted-reply.js';

/** Provider id of the scripted model; supportsPrefill() and tests recognise it by this. */
export const scriptedProviderId = 'agent-kit.scripted';

const defaultTokens = 40; // a few lines of text: long enough to kill a run mid-stream
const tokensMax = 100_000; // bounds one reply's memory and time
const delayMsMax = 60_000; // a longer per-token pause is a configuration mistake
const yieldEveryTokens = 64; // with no delay, still let other microtasks in during long replies

/**
 * Tag in the last user message: the model refuses each request it has not seen before, once, as a
 * rate-limited provider does (429, retry after `scriptedBusyRetryMs`). The engine waits and asks
 * again (ADR-0057), so the turn completes a second later. Seen requests are remembered per model.
 */
export const scriptedBusyTag = '#busy';
export const scriptedBusyRetryMs = 1_000;
const busySeenMax = 10_000;

/**
 * Tag in the last user message: the reply stops halfway with a 529 "overloaded" error part, as a
 * provider's stream can, once per turn. The engine waits and asks again with the half as the
 * assistant's prefill (ADR-0059), and the model goes on from there. Keyed on the prompt before
 * its prefill, so the continuation is not cut again.
 */
export const scriptedOverloadTag = '#overload';

export type ScriptedModelOptions = {
  /** Words per reply; default `AGENT_KIT_SCRIPTED_TOKENS` or 40. */
  tokens?: number;
  /** Pause before each streamed token; default `AGENT_KIT_SCRIPTED_DELAY_MS` or 0 (no timer). */
  delayMs?: number;
};

/** Reads an optional non-negative integer setting, failing loudly on anything else. */
function readCount(name: string, given: number | undefined, raw: string | undefined,
  fallback: number, max: number): number {
  const value = given ?? (raw === undefined || raw.trim() === '' ? fallback : Number(raw));
  if (!Number.isInteger(value) || value < 0 || value > max) {
    const shown = given ?? JSON.stringify(raw);
    throw new ModelConfigError(
      `${name} is ${shown}; expected an integer from 0 to ${max}. Fix the option or the variable.`,
    );
  }
  return value;
}

/** The per-token delay: a non-negative number of ms, fractions allowed (0.5 = 2,000 tokens/s). */
function readDelay(given: number | undefined, raw: string | undefined): number {
  const value = given ?? (raw === undefined || raw.trim() === '' ? 0 : Number(raw));
  if (!Number.isFinite(value) || value < 0 || value > delayMsMax) {
    throw new ModelConfigError(
      `AGENT_KIT_SCRIPTED_DELAY_MS is ${given ?? JSON.stringify(raw)}; expected a number of ms from 0 to ` +
        `${delayMsMax}. Fix the option or the variable.`,
    );
  }
  return value;
}

/**
 * Creates the deterministic offline model. Options win over the environment.
 * @throws ModelConfigError when tokens or delayMs (or their variables) are not valid integers.
 */
export function createScriptedModel(
  options: ScriptedModelOptions = {},
  env: NodeJS.ProcessEnv = process.env,
): LanguageModelV3 {
  const tokens = readCount('AGENT_KIT_SCRIPTED_TOKENS', options.tokens,
    env.AGENT_KIT_SCRIPTED_TOKENS, defaultTokens, tokensMax);
  const delayMs = readDelay(options.delayMs, env.AGENT_KIT_SCRIPTED_DELAY_MS);
  return new ScriptedLanguageModel(tokens, delayMs);
}

class ScriptedLanguageModel implements LanguageModelV3 {
  readonly specificationVersion = 'v3';
  readonly provider = scriptedProviderId;
  readonly modelId = 'scripted';
  readonly supportedUrls: Record<string, RegExp[]> = {};
  /** Requests refused for #busy, and turns cut for #overload: each once. */
  private readonly refused = new Set<number>();
  private readonly overloaded = new Set<number>();

  constructor(
    readonly tokens: number,
    readonly delayMs: number,
  ) {}

  async doGenerate(options: ModelCallOptions): Promise<ModelGenerateResult> {
    options.abortSignal?.throwIfAborted();
    this.refuseIfBusy(options.prompt);
    const step = planScriptedStep(options.prompt, this.tokens);
    if (step.kind === 'text' && this.delayMs > 0) {
      // Same wall time as streaming the remainder, so timeouts behave alike in both modes.
      const pauseMs = this.delayMs * splitReplyTokens(step.remainder).length;
      await sleep(pauseMs, options.abortSignal);
    }
    const content: ModelGenerateResult['content'] = step.reasoning === '' ? [] : [{ type: 'reasoning', text: step.reasoning }];
    if (step.kind === 'tool-call') {
      content.push({ type: 'tool-call', toolCallId: step.toolCallId, toolName: step.toolName, input: JSON.stringify(step.input) });
    } else if (step.remainder !== '') {
      content.push({ type: 'text', text: step.remainder });
    }
    return {
      content,
      finishReason: finishReasonOf(step),
      usage: usageOf(options.prompt, step),
      response: { id: responseIdOf(step), modelId: this.modelId },
      warnings: [],
    };
  }

  async doStream(options: ModelCallOptions): Promise<ModelStreamResult> {
    options.abortSignal?.throwIfAborted();
    this.refuseIfBusy(options.prompt);
    const step = planScriptedStep(options.prompt, this.tokens);
    const stop = new AbortController();
    const signal = options.abortSignal ? AbortSignal.any([options.abortSignal, stop.signal])
      : stop.signal;
    const parts = this.streamParts(step, options.prompt, signal);
    return { stream: toReadableStream(parts, stop, options.abortSignal) };
  }

  /** For #busy: a 429 the first time this request is seen. */
  private refuseIfBusy(prompt: ModelPrompt): void {
    if (firstTimeTagged(this.refused, prompt, scriptedBusyTag)) throw tryLater(429, `busy (${scriptedBusyTag})`);
  }

  private async *streamParts(step: ScriptedStep, prompt: ModelPrompt,
    signal: AbortSignal): AsyncGenerator<ModelStreamPart> {
    yield { type: 'stream-start', warnings: [] };
    yield { type: 'response-metadata', id: responseIdOf(step), modelId: this.modelId };
    if (step.reasoning !== '') {
      yield { type: 'reasoning-start', id: 'reasoning-0' };
      const startedAtMs = performance.now();
      let index = 0;
      for (const delta of splitReplyTokens(step.reasoning)) {
        await this.pace(index++, startedAtMs, signal);
        yield { type: 'reasoning-delta', id: 'reasoning-0', delta };
      }
      yield { type: 'reasoning-end', id: 'reasoning-0' };
    }
    if (step.kind === 'tool-call') {
      yield { type: 'tool-call', toolCallId: step.toolCallId, toolName: step.toolName,
        input: JSON.stringify(step.input) };
    } else if (step.remainder !== '') {
      yield { type: 'text-start', id: 'text-0' };
      let index = 0;
      const startedAtMs = performance.now();
      const deltas = splitReplyTokens(step.remainder);
      const cutAt = this.overloadAt(prompt, deltas.length);
      for (const delta of deltas) {
        await this.pace(index, startedAtMs, signal);
        if (index === cutAt) {
          yield { type: 'error', error: tryLater(529, `overloaded (${scriptedOverloadTag})`) };
          return;
        }
        yield { type: 'text-delta', id: 'text-0', delta };
        index += 1;
      }
      yield { type: 'text-end', id: 'text-0' };
    }
    yield { type: 'finish', finishReason: finishReasonOf(step), usage: usageOf(prompt, step) };
  }

  /** For #overload: where this turn's reply is cut (half of it), the first time only; else -1. */
  private overloadAt(prompt: ModelPrompt, tokens: number): number {
    const asked = prompt.at(-1)?.role === 'assistant' ? prompt.slice(0, -1) : prompt; // less the prefill
    return tokens >= 2 && firstTimeTagged(this.overloaded, asked, scriptedOverloadTag) ? Math.floor(tokens / 2) : -1;
  }

  /**
   * Waits before token `index` until `index × delayMs` after the stream started, so fractional
   * delays keep their average rate (timers have 1 ms granularity); without a delay, a microtask
   * every few tokens.
   */
  private async pace(index: number, startedAtMs: number, signal: AbortSignal): Promise<void> {
    if (this.delayMs > 0) {
      const waitMs = startedAtMs + (index + 1) * this.delayMs - performance.now();
      if (waitMs >= 1) await sleep(waitMs, signal);
      else if (index % yieldEveryTokens === yieldEveryTokens - 1) await new Promise((r) => setImmediate(r));
    } else if (index % yieldEveryTokens === yieldEveryTokens - 1) {
      await Promise.resolve();
    }
    signal.throwIfAborted();
  }
}

/**
 * True when the last user message of `prompt` has `tag` and `seen` does not hold the prompt yet
 * (it does from now on; a full set starts over).
 */
function firstTimeTagged(seen: Set<number>, prompt: ModelPrompt, tag: string): boolean {
  const last = prompt.filter((message) => message.role === 'user').at(-1);
  if (!last || !messageText(last).includes(tag)) return false;
  const request = hashFnv1a(`${prompt.length}\u0000${prompt.map(messageText).join('\u0000')}`);
  if (seen.has(request)) return false;
  if (seen.size >= busySeenMax) seen.clear();
  seen.add(request);
  return true;
}

/** A retryable refusal, as a provider sends it: the status, and retry after `scriptedBusyRetryMs`. */
function tryLater(statusCode: number, why: string): APICallError {
  return new APICallError({
    message: `the scripted model is ${why}: try again in ${scriptedBusyRetryMs} ms`,
    url: 'scripted://agent-kit', requestBodyValues: {}, statusCode, isRetryable: true,
    responseHeaders: { 'retry-after-ms': String(scriptedBusyRetryMs) },
  });
}

/**
 * Wraps the part generator in a pull-driven stream (so a slow reader paces the model). The
 * caller's abort errors the stream at once with the abort reason; a reader's cancel stops it.
 */
function toReadableStream(parts: AsyncGenerator<ModelStreamPart>, stop: AbortController,
  callerSignal: AbortSignal | undefined): ReadableStream<ModelStreamPart> {
  let isDone = false;
  const finish = (): void => {
    isDone = true;
    callerSignal?.removeEventListener('abort', onAbort);
    stop.abort(); // wakes a pending sleep so the generator can end
    void parts.return(undefined);
  };
  let onAbort = (): void => {};
  return new ReadableStream<ModelStreamPart>({
    start(controller) {
      onAbort = () => {
        if (isDone) return;
        finish();
        controller.error(callerSignal?.reason);
      };
      callerSignal?.addEventListener('abort', onAbort, { once: true });
    },
    async pull(controller) {
      try {
        const next = await parts.next();
        if (isDone) return;
        if (next.done) {
          finish();
          controller.close();
        } else {
          controller.enqueue(next.value);
        }
      } catch (error) {
        if (isDone) return;
        finish();
        controller.error(error);
      }
    },
    cancel() {
      finish();
    },
  });
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function finishReasonOf(step: ScriptedStep): ModelGenerateResult['finishReason'] {
  return step.kind === 'tool-call'
    ? { unified: 'tool-calls', raw: 'tool_calls' }
    : { unified: 'stop', raw: 'stop' };
}

function responseIdOf(step: ScriptedStep): string {
  return step.kind === 'tool-call' ? `response-${step.toolCallId}` : 'response-scripted-text';
}

/** Word counts stand in for tokens: deterministic, and close enough for budgets and logs. */
function usageOf(prompt: ModelPrompt, step: ScriptedStep): ModelUsage {
  let inputWords = 0;
  for (const message of prompt) inputWords += countWords(messageText(message));
  const outputWords = step.kind === 'text' ? countWords(step.remainder)
    : countWords(JSON.stringify(step.input));
  return {
    inputTokens: { total: inputWords, noCache: inputWords, cacheRead: undefined,
      cacheWrite: undefined },
    outputTokens: { total: outputWords, text: step.kind === 'text' ? outputWords : 0,
      reasoning: undefined },
  };
}

function countWords(text: string): number {
  return text.split(/\s+/).filter((word) => word !== '').length;
}
