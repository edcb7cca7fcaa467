// One model step: stream the model's answer to the prompt, mirroring text as it comes, and
// collect its tool calls. Stops early when the mirror is rejected, the lease is lost, the
// deadline comes, or the stream stalls; the caller decides what each stop means for the run.
import {
  asSchema, streamText, tool, type LanguageModel, type ModelMessage, type TextStreamPart, type ToolSet,
} from 'ai';
import type { AgentTool } from '../model/index.js';
import { storableText, StorableTextStream, storableValue } from '../store/storable.js';
import { tokenUsage, type TokenUsage } from '../event-log/token-usage.js';
import type { Reasoning, ToolCall } from './journal.js';
import { ModelStalledError, ModelStreamCutError, streamError } from './model-retry.js';
import type { StreamMirror } from './stream-mirror.js';
import { finishTheStep } from './types.js';
import { wakeOnAbort } from '../queue/pace.js';

type StreamPart = TextStreamPart<ToolSet>;

/** `stop`: the process is going away (SIGTERM) and the step outlasted its grace (ADR-0117). */
export type StepStop = 'lost' | 'cancel' | 'takeover' | 'store-error' | 'deadline' | 'stop';

export type StepResult =
  | { kind: 'done'; text: string; toolCalls: ToolCall[]; reasoning: Reasoning[]; usage?: TokenUsage; finishReason: string }
  | { kind: 'stopped'; reason: StepStop; text: string }
  /**
   * `produced`: what arrived before the error: nothing (a refused request), only text (which a
   * model that continues a prefill can go on from), or a tool call.
   */
  | { kind: 'error'; error: Error; text: string; produced: 'nothing' | 'text' | 'tool-calls' };

export interface ModelStepOptions {
  model: LanguageModel;
  /** The runtime's instructions for this turn, sent as the system prompt; empty: none. */
  system?: string;
  messages: ModelMessage[];
  tools: Record<string, AgentTool<any, any>>;
  /** Text already shown for this step (mid-step continuation): sent as assistant prefill. */
  prefix: string;
  mirror: StreamMirror;
  /** Aborted by the segment with a StepStop reason (mirror stopped, renewal rejected). */
  segmentSignal: AbortSignal;
  /** Local time (ms) at which the step must stop. */
  stopAtMs: number;
  /** The process is going away (SIGTERM): the step may go on for `stopGraceMs`, then it is cut. */
  stopSignal?: AbortSignal;
  stopGraceMs?: number;
  /** Abort when no stream part arrives for this long. */
  stallTimeoutMs: number;
  /** Mirror what the model thinks as reasoning-delta events (ADR-0070). */
  showReasoning: boolean;
}

// One declaration per tool for the process. The SDK converts a zod schema to JSON Schema lazily
// and keeps the result on the schema object it wraps it in, so reusing that object converts each
// tool once instead of once per step (~3 % of a scripted turn's CPU).
const declarations = new WeakMap<AgentTool<any, any>, ToolSet[string]>();

/** Tool declarations for the model: schemas only; agent-kit runs tools itself, via the ledger. */
function declareTools(tools: Record<string, AgentTool<any, any>>): ToolSet {
  const set: ToolSet = {};
  for (const [name, t] of Object.entries(tools)) {
    let declared = declarations.get(t);
    if (!declared) {
      declared = tool({ description: t.description, inputSchema: asSchema(t.inputSchema) });
      declarations.set(t, declared);
    }
    set[name] = declared;
  }
  return set;
}

/** A tool call as the journal keeps it, its id, name and input made storable. */
function storableCall(part: { toolCallId: string; toolName: string; input: unknown }): ToolCall {
  return { toolCallId: storableText(part.toolCallId), toolName: storableText(part.toolName), input: storableValue(part.input) };
}

export async function runModelStep(options: ModelStepOptions): Promise<StepResult> {
  const controller = new AbortController();
  // 'stalled' is not a stop for the segment: the step ends as a retryable error (ADR-0063).
  let stop: StepStop | 'stalled' | undefined;
  const abort = (reason: StepStop | 'stalled') => {
    stop ??= reason;
    // No reason argument: the AI SDK turns a plain abort into a clean `abort` part.
    controller.abort();
  };
  // The segment aborts with a reason: the mirror's stop (lost, cancel, takeover, store-error)
  // or 'lost' when a renewal was rejected.
  const onSegmentAbort = () => abort((options.segmentSignal.reason as StepStop | undefined) ?? 'lost');
  if (options.segmentSignal.aborted) onSegmentAbort();
  options.segmentSignal.addEventListener('abort', onSegmentAbort);
  const deadlineTimer = setTimeout(() => abort('deadline'), Math.max(0, options.stopAtMs - Date.now()));
  let graceTimer: ReturnType<typeof setTimeout> | undefined;
  const onStop = () => {
    if (options.stopSignal?.reason !== finishTheStep) graceTimer = setTimeout(() => abort('stop'), Math.max(0, options.stopGraceMs ?? 0));
  };
  // (One listener per signal for all its steps: a worker's stop signal is shared by its segments.)
  let forgetStop = () => {};
  if (options.stopSignal?.aborted) onStop();
  else if (options.stopSignal) forgetStop = wakeOnAbort(options.stopSignal, onStop);
  // One timer for the stall, re-armed when it fires early, not one per part.
  let lastPartAt = performance.now();
  const checkStall = () => {
    const idleMs = performance.now() - lastPartAt;
    if (idleMs >= options.stallTimeoutMs) abort('stalled');
    else stallTimer = setTimeout(checkStall, options.stallTimeoutMs - idleMs);
  };
  let stallTimer = setTimeout(checkStall, options.stallTimeoutMs);

  let text = options.prefix;
  let produced: 'nothing' | 'text' | 'tool-calls' = 'nothing';
  // A stream that went quiet is asked again like a provider's refusal (ADR-0063).
  const stopped = (reason: StepStop | 'stalled'): StepResult => (reason === 'stalled'
    ? { kind: 'error', error: new ModelStalledError(options.stallTimeoutMs), text, produced }
    : { kind: 'stopped', reason, text });
  // What the model sends is made storable as it arrives (ADR-0056): streamed, written, replayed
  // and journalled alike.
  const deltas = new StorableTextStream();
  // The prefill goes without its trailing whitespace, which Anthropic refuses at the end of an
  // assistant message (a 400); the continuation usually starts with it again, and viewers have it.
  const prefill = options.prefix.trimEnd();
  const owed = new OwedText(options.prefix.slice(prefill.length));
  const toolCalls: ToolCall[] = [];
  const reasoning = new ReasoningParts();
  const shown = new ShownReasoning();
  let finishReason = 'unknown';
  // Whether the provider said the step finished: the AI SDK ends a stream cut after some output
  // with 'other' and no raw reason of the provider's, as if it had. (An older-spec (v2) model's
  // finish never has a raw reason, and its 'unknown' becomes 'other': taken at its word.)
  const rawReasons = typeof options.model === 'string' || options.model.specificationVersion === 'v3';
  let finished = false;
  let usage: TokenUsage | undefined;
  try {
    const prompt: ModelMessage[] = prefill
      ? [...options.messages, { role: 'assistant', content: prefill }]
      : options.messages;
    const result = streamText({
      model: options.model,
      ...(options.system ? { system: options.system } : {}),
      messages: prompt,
      tools: declareTools(options.tools),
      abortSignal: controller.signal,
      maxRetries: 0,
      // The error reaches the engine as the stream's error part (the segment's outcome, logged
      // through rt.log); without a handler the AI SDK also prints it to stderr, stack and request
      // body included, on every provider failure.
      onError: () => {},
    });
    // Race each part against our abort: a provider stream that ignores the abort signal (a hung
    // socket, a stuck pull) must not keep the segment waiting. One small promise per read, not
    // Promise.race against one long-lived abort promise: each race would leave a reaction on it
    // until the step ends (~340 bytes per part measured: 14 MB held by a 20,000-token step).
    const parts = result.fullStream[Symbol.asyncIterator]();
    let wakeOnAbort: ((value: 'aborted') => void) | undefined;
    const onAbort = () => wakeOnAbort?.('aborted');
    controller.signal.addEventListener('abort', onAbort, { once: true });
    const nextOrAborted = () => new Promise<IteratorResult<StreamPart> | 'aborted'>((resolve, reject) => {
      if (controller.signal.aborted) return resolve('aborted');
      wakeOnAbort = resolve;
      parts.next().then(resolve, reject);
    });
    for (;;) {
      const next = await nextOrAborted();
      if (next === 'aborted') {
        void parts.return?.(undefined).catch(() => {});
        break;
      }
      if (next.done) break;
      const part = next.value;
      lastPartAt = performance.now();
      if (part.type === 'tool-call' || part.type === 'tool-error') produced = 'tool-calls';
      else if (part.type === 'text-delta' && produced === 'nothing') produced = 'text';
      if (part.type === 'text-delta') {
        const delta = deltas.push(owed.skip(part.text));
        text += delta;
        options.mirror.push(delta);
      } else if (part.type === 'tool-call') {
        toolCalls.push(storableCall(part));
      } else if (part.type === 'reasoning-start' || part.type === 'reasoning-delta' || part.type === 'reasoning-end') {
        reasoning.add(part);
        const thought = options.showReasoning ? shown.add(part) : '';
        if (thought) options.mirror.pushReasoning(thought);
      } else if (part.type === 'tool-error') {
        // The SDK could not parse the call's input; record the call so the model gets an error
        // result. For an unknown tool or bad input the SDK has already sent the call itself (as
        // an invalid tool-call): recording it twice gave it two results under one id.
        const call = storableCall(part);
        if (!toolCalls.some((c) => c.toolCallId === call.toolCallId)) toolCalls.push(call);
      } else if (part.type === 'error') {
        throw streamError(part.error);
      } else if (part.type === 'finish') {
        finishReason = part.finishReason;
        finished = !rawReasons || part.finishReason !== 'other' || part.rawFinishReason !== undefined;
        usage = tokenUsage(part.totalUsage);
      }
      if (stop) break;
    }
    if (stop || controller.signal.aborted) return stopped(stop ?? 'lost');
    if (!finished) return { kind: 'error', error: new ModelStreamCutError(), text, produced };
    const thoughtTail = options.showReasoning ? shown.end() : '';
    if (thoughtTail) options.mirror.pushReasoning(thoughtTail);
    const tail = deltas.end();
    if (tail) {
      text += tail;
      options.mirror.push(tail);
    }
    return { kind: 'done', text, toolCalls, reasoning: reasoning.done(), ...(usage ? { usage } : {}), finishReason };
  } catch (raw) {
    if (stop) return stopped(stop);
    return { kind: 'error', error: raw instanceof Error ? raw : new Error(String(raw)), text, produced };
  } finally {
    clearTimeout(deadlineTimer);
    clearTimeout(stallTimer);
    clearTimeout(graceTimer);
    forgetStop();
    options.segmentSignal.removeEventListener('abort', onSegmentAbort);
  }
}

type ReasoningPart = Extract<StreamPart, { type: 'reasoning-start' | 'reasoning-delta' | 'reasoning-end' }>;

/**
 * The step's reasoning parts in the order they started, each with its text and the provider
 * metadata it last carried (an OpenAI item id, an Anthropic signature), as the AI SDK's own
 * multi-step loop collects them to send back (ADR-0064).
 */
class ReasoningParts {
  private readonly parts: Reasoning[] = [];
  private readonly open = new Map<string, Reasoning>();

  add(part: ReasoningPart): void {
    let current = this.open.get(part.id);
    if (!current) {
      current = { text: '' };
      this.open.set(part.id, current);
      this.parts.push(current);
    }
    if (part.type === 'reasoning-delta') current.text += part.text;
    if (part.providerMetadata) current.providerMetadata = part.providerMetadata;
    if (part.type === 'reasoning-end') this.open.delete(part.id);
  }

  /** The parts made storable; metadata only where the provider sent some. */
  done(): Reasoning[] {
    return this.parts.map((p) => ({
      text: storableText(p.text),
      ...(p.providerMetadata ? { providerMetadata: storableValue(p.providerMetadata) as Reasoning['providerMetadata'] } : {}),
    }));
  }
}

/**
 * The step's reasoning as viewers read it (ADR-0070): its text made storable as it arrives, a
 * blank line between two parts (Anthropic's thinking blocks, the Responses API's summary parts).
 */
class ShownReasoning {
  private readonly text = new StorableTextStream();
  private readonly seen = new Set<string>();
  private any = false;

  /** What to show of `part`: '' for none yet. */
  add(part: ReasoningPart): string {
    if (part.type !== 'reasoning-delta' || part.text === '') return '';
    let lead = '';
    if (!this.seen.has(part.id)) {
      this.seen.add(part.id);
      if (this.any) lead = '\n\n';
    }
    const shown = this.text.push(part.text);
    if (shown) this.any = true;
    return lead + shown;
  }

  /** What was held back at the end (half a surrogate pair). */
  end(): string {
    return this.text.end();
  }
}

/**
 * Whitespace that viewers already have but the prefill left out: skipped where the model's
 * continuation starts with it, forgotten at its first other character.
 */
class OwedText {
  constructor(private owed: string) {}

  skip(delta: string): string {
    if (this.owed === '') return delta;
    let i = 0;
    while (i < this.owed.length && i < delta.length && this.owed[i] === delta[i]) i++;
    this.owed = i === delta.length ? this.owed.slice(i) : '';
    return delta.slice(i);
  }
}
