// Tunables of the turn engine, each with the reason for its default.
import { defaultReconcileTimeoutMs } from '../effect-ledger/index.js';
import { defaultMaxToolResultBytes } from '../store/storable.js';
import type { Runtime } from './types.js';

export interface TurnSettings {
  /** Mirror batching: at most 1000/mirrorIntervalMs writes per second per run. 100 ms → ≤ 10/s. */
  mirrorIntervalMs: number;
  /** Abort a model stream that sends nothing for this long (a hung provider); the run is retried. */
  stallTimeoutMs: number;
  /** Stop this long before the deadline: room to flush, record and park before the lease ends. */
  deadlineSafetyMs: number;
  /** Do not start a model step or a tool call with less than this left; park (slice) instead. */
  sliceMarginMs: number;
  /** Model steps per turn before it is closed as failed (a tool loop that never ends). */
  maxSteps: number;
  /** Continue a step cut mid-stream from its mirrored text when the model supports prefill. */
  continueMidStep: boolean;
  /**
   * Send each journalled step's reasoning back in the next step's prompt (ADR-0064). A segment
   * whose provider rejects a request that carried it asks again without, and stops sending it.
   */
  sendReasoning: boolean;
  /**
   * Write what the model thinks, as it streams it, to the thread's event log as `reasoning-delta`
   * events, batched with the reply's text, for viewers to show (ADR-0070). It is never part of
   * the message. Off: the reasoning is only journalled (to be sent back) and viewers see none.
   */
  showReasoning: boolean;
  /**
   * Ask again with fewer earlier turns, the oldest dropped first, then without the turn's oldest
   * answered tool results, then with its newest results cut short, when the provider rejects a
   * prompt past the model's context window (ADR-0067). Off: such a turn fails at once (ADR-0066).
   */
  fitContextWindow: boolean;
  /**
   * Requests more a model step may make after its reply stopped at the model's output limit
   * (`max_tokens`), each going on from the reply's text, when the model continues a prefill
   * (ADR-0068). 0: the reply ends where the limit cut it, as with every other model.
   */
  continueAtOutputLimit: number;
  /** The most a tool's reconcile hook may take (capped at what is left); then in doubt. ADR-0041. */
  reconcileTimeoutMs: number;
  /**
   * Retries of a model request its provider refused for now (rate limit, overload), per step,
   * waiting as it asks or backing off from 1 s; the segment's deadline permitting. ADR-0057.
   */
  modelRetries: number;
  /**
   * The most of a tool's result kept, in UTF-8 bytes of its JSON text (and of a thrown message);
   * a larger one is kept as its head with a note of its size. ADR-0058.
   */
  maxToolResultBytes: number;
  /**
   * How long a segment whose write the store failed tries to give its lease up once the store
   * answers again (a reaper then hands the run on), instead of holding it until it expires. ADR-0081.
   */
  storeErrorHandBackMs: number;
  /**
   * Within that, how long it goes on trying once the process is asked to stop (the worker's
   * SIGTERM), so that a deploy during an outage hands its runs on when the store answers in time.
   */
  stopHandBackMs: number;
  /**
   * Once the process is asked to stop (SIGTERM, Ctrl-C), how long a model step under way may go
   * on before it is cut and the run given back, queued, with its text (ADR-0117): a step longer
   * than the platform's grace was killed with the process, and its run waited for its lease.
   */
  stopGraceMs: number;
}

/** Defaults scaled to the budget, so a short test budget still leaves time to work. */
export function defaultTurnSettings(budgetMs: number): TurnSettings {
  return {
    mirrorIntervalMs: 100,
    stallTimeoutMs: 60_000,
    deadlineSafetyMs: Math.min(1_000, budgetMs * 0.05),
    sliceMarginMs: Math.min(10_000, budgetMs * 0.2),
    maxSteps: 16,
    continueMidStep: true,
    sendReasoning: true,
    // What a provider streams of its reasoning is what it means to be shown (Anthropic's
    // summarised thinking, OpenAI's reasoning summaries, when asked for), as the AI SDK's UI
    // stream sends it by default.
    showReasoning: true,
    fitContextWindow: true,
    // Up to four times the model's output limit for one reply; each request more costs as much.
    continueAtOutputLimit: 3,
    reconcileTimeoutMs: defaultReconcileTimeoutMs,
    // Backoff of 1, 2, 4, 8 and 16 s (with jitter): a provider's burst of refusals of about half
    // a minute, or five Retry-Afters, before the attempt is spent.
    modelRetries: 5,
    maxToolResultBytes: defaultMaxToolResultBytes,
    // Past a failover's length too: a store back at any time before the segment's deadline (and so
    // before its lease would run out) gets the run handed on at once, not after the lease.
    storeErrorHandBackMs: 15 * 60_000,
    // Docker sends SIGKILL 10 s after SIGTERM, Fly.io 5 s: the grace leaves room to park, and
    // with it the hand-back ends within Docker's.
    stopGraceMs: 3_000,
    stopHandBackMs: 5_000,
  };
}

/**
 * A segment's settings: the defaults for its budget, then the configuration's (the environment's
 * AGENT_KIT_* settings), then the runtime's own.
 */
export function turnSettingsOf(rt: Pick<Runtime, 'config' | 'turnSettings'>, budgetMs: number): TurnSettings {
  const { modelRetries, maxToolResultBytes, stopGraceMs } = rt.config;
  return {
    ...defaultTurnSettings(budgetMs),
    ...(modelRetries === undefined ? {} : { modelRetries }),
    ...(maxToolResultBytes === undefined ? {} : { maxToolResultBytes }),
    ...(stopGraceMs === undefined ? {} : { stopGraceMs }),
    ...rt.turnSettings,
  };
}
