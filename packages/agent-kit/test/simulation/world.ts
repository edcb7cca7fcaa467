// What a simulated worker runs with: the real turn engine's Runtime over its scheduled Db, the
// scripted model paced on virtual time (with injected provider errors and hangs), and the demo
// tools behind a scheduler gate (with injected failures and hangs), so a kill can land before or
// after a side effect. Fault decisions are drawn when the gate or the stream is reached, in an
// order that only the schedule decides.
import { APICallError } from 'ai';
import { createScriptedModel, demoTools, type AgentTool, type LanguageModelV3 } from '../../src/model/index.js';
import type { Runtime } from '../../src/turn/types.js';
import { makeRuntime } from '../harness/turn-kit.js';
import type { Profile } from './profile.js';
import type { Scheduler, SimWorker } from './scheduler.js';
import { simulatedDb } from './sim-db.js';
import type { Db } from '../../src/store/db.js';

export type ModelFault = { kind: 'none' } | { kind: 'error' | 'hang'; afterParts: number };
export type ToolFault = 'none' | 'fail-before' | 'fail-after' | 'hang' | 'hang-then-run';

/** Fault decisions, drawn by the simulation from its fault stream. */
export interface FaultSource {
  modelFault(): ModelFault;
  toolFault(toolName: string): ToolFault;
  /** How long a hung tool stays stuck before it runs anyway (virtual ms). */
  toolHangMs(): number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The scripted model, each text token delayed on (virtual) timers; may error or hang mid-stream.
 * Half the errors (those drawn at an even part) are an overload the engine asks again after
 * (ADR-0057, ADR-0059): before any text, mid-text with and without prefill, and after a tool call.
 */
export function simulatedModel(inner: LanguageModelV3, profile: Profile, faults: FaultSource): LanguageModelV3 {
  return {
    specificationVersion: 'v3',
    // Another provider name turns prefill off: the engine then redoes a cut step from its start.
    provider: profile.prefill ? inner.provider : 'sim.no-prefill',
    modelId: inner.modelId,
    supportedUrls: inner.supportedUrls,
    doGenerate: (options) => inner.doGenerate(options),
    async doStream(options) {
      const fault = faults.modelFault();
      const result = await inner.doStream(options);
      const reader = result.stream.getReader();
      let parts = 0;
      const stream = new ReadableStream({
        async pull(controller) {
          if (fault.kind !== 'none' && parts === fault.afterParts) {
            if (fault.kind === 'error') {
              controller.error(fault.afterParts % 2 === 0 ? simulatedOverload(fault.afterParts) : new Error('simulated provider error mid-stream'));
              return;
            }
            // A hung provider: nothing more until the engine gives up on it (stall or deadline).
            await new Promise<never>((_, reject) => {
              options.abortSignal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
            });
          }
          const next = await reader.read();
          if (next.done) {
            controller.close();
            return;
          }
          if (next.value.type === 'text-delta' || next.value.type === 'reasoning-delta') await sleep(profile.tokenDelayMs);
          parts++;
          try {
            controller.enqueue(next.value);
          } catch {
            // the engine stopped reading (abort) while this token was on its way
          }
        },
        cancel: (reason) => reader.cancel(reason),
      });
      return { ...result, stream };
    },
  };
}

/**
 * An overload the provider asks to be retried after 200 ms, or (one in two) after 5 s: a wait too
 * long for most segments, so the run parks until then (ADR-0062, ADR-0098).
 */
function simulatedOverload(afterParts: number): APICallError {
  return new APICallError({
    message: 'simulated overload', url: 'sim://model', requestBodyValues: {}, statusCode: 529, isRetryable: true,
    responseHeaders: { 'retry-after-ms': afterParts % 4 === 0 ? '5000' : '200' },
  });
}

/** Demo tools whose execute waits at a scheduler gate, where a fault may be injected. */
export function simulatedTools(
  scheduler: Scheduler, worker: SimWorker, faults: FaultSource,
): Record<string, AgentTool<any, any>> {
  const gated = (tool: AgentTool<any, any>): AgentTool<any, any> => ({
    ...tool,
    async execute(input, ctx) {
      const fault = await scheduler.register(worker.id, { kind: 'gate', label: `tool ${tool.name}` },
        async () => faults.toolFault(tool.name));
      if (fault === 'fail-before') throw new Error(`simulated: ${tool.name} failed before its effect`);
      if (fault === 'hang') await new Promise<never>(() => {});
      if (fault === 'hang-then-run') await sleep(faults.toolHangMs());
      const result = await tool.execute!(input, ctx);
      if (fault === 'fail-after') throw new Error(`simulated: ${tool.name} failed after its effect`);
      return result;
    },
  });
  return {
    ...demoTools,
    record_effect: gated(demoTools.record_effect),
    transfer_funds: gated(demoTools.transfer_funds),
  };
}

/** The Runtime one simulated worker runs the real engine, drain and reaper with. */
export function workerRuntime(
  real: Db, scheduler: Scheduler, worker: SimWorker, profile: Profile, faults: FaultSource,
  log: (entry: Record<string, unknown>) => void,
): Runtime {
  const db = simulatedDb(real, scheduler, worker.id);
  const model = simulatedModel(createScriptedModel({ tokens: profile.tokens, delayMs: 0 }), profile, faults);
  const rt = makeRuntime(db, {
    model,
    tools: simulatedTools(scheduler, worker, faults),
    settings: {
      mirrorIntervalMs: profile.mirrorIntervalMs,
      stallTimeoutMs: profile.stallTimeoutMs,
      continueMidStep: profile.continueMidStep,
    },
    config: {
      invocationBudgetMs: profile.invocationBudgetMs,
      leaseTtlMs: profile.leaseTtlMs,
      maxRunAttempts: profile.maxRunAttempts,
    },
  });
  return { ...rt, log: (entry) => log({ worker: worker.name, ...entry }) };
}
