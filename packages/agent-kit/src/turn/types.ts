// The turn engine's contract with its callers (the chat request, the drain, the CLI): what a
// segment needs to run and how it ended. The engine itself is in run-segment.ts.
import type { LanguageModel } from 'ai';
import type { AgentKitConfig } from '../config.js';
import type { Db } from '../store/db.js';
import type { AgentTool } from '../model/index.js';
import type { CloseStatus, NotClaimedReason, ParkStatus } from '../lease/lease.js';
import type { ClaimedSegment } from './segment-claim.js';
import type { TurnSettings } from './settings.js';

/** Everything a segment runs with. One Runtime serves many concurrent segments. */
export interface Runtime {
  db: Db;
  /** The model for a run; a function lets tests and the chaos harness pick per run. */
  model: LanguageModel | ((runId: string) => LanguageModel);
  /** Tools by name (the scripted model's demo tools are included by default). */
  tools: Record<string, AgentTool<any, any>>;
  config: AgentKitConfig;
  /** Overrides of the engine's tunables (mirror interval, stall timeout, max steps, …). */
  turnSettings?: Partial<TurnSettings>;
  /** Optional structured log sink ({ msg, runId, fence, ... }). */
  log?: (entry: Record<string, unknown>) => void;
  /**
   * The model's instructions (its system prompt), sent before the conversation on every model
   * step; or a function of the turn that returns them, called once per segment before its first
   * model step. Empty: none. See ADR-0045.
   */
  instructions?: Instructions;
  /**
   * The most earlier turns of the thread the model is given before the current one (each its
   * user message and final answer), the newest kept; unset: all. Keeps a long thread's prompt
   * inside the model's context window, and the store reads only those turns. See ADR-0046 and
   * ADR-0047.
   */
  historyTurns?: number;
}

/** The turn a function of `instructions` is asked about. */
export interface TurnContext {
  runId: string;
  threadId: string;
  /** The turn's number in its thread, from 1. */
  turnNo: number;
}

export type Instructions = string | ((turn: TurnContext) => string | Promise<string>);

export interface SegmentOptions {
  runId: string;
  /** Who holds the lease: unique per process and segment, e.g. `worker-<pid>-<n>`. */
  owner: string;
  /** This invocation's budget; defaults to config.invocationBudgetMs. The lease never outlives it. */
  budgetMs?: number;
  /**
   * The whole budget of the invocation this segment runs in, of which `budgetMs` is what was left
   * when it started (a drain's later segments); defaults to `budgetMs`. A segment that started with
   * less than half of it, cut before its step left anything to go on from, gives the run back
   * without spending an attempt: a whole budget may fit the step (ADR-0113).
   */
  invocationBudgetMs?: number;
  /** Defaults to config.leaseTtlMs (capped at the budget). */
  leaseTtlMs?: number;
  /**
   * The process is going away (SIGTERM, Ctrl-C): take no new step and park (slice) at the next
   * step boundary; a model step under way is cut after `stopGraceMs` (ADR-0117), unless the
   * signal's reason is `finishTheStep` (a reader gone, not the process: no hurry).
   */
  stopSignal?: AbortSignal;
  /**
   * The run, already claimed for this segment by the caller with `owner` (the drain claims a
   * batch in one statement, claimDueSegments); the segment then does not claim it again. Every
   * RunSegment the drain calls must honour it. `sentAtMs`: when the claim was sent (Date.now()),
   * where the segment's local deadline clock starts.
   */
  preClaimed?: { claim: ClaimedSegment; sentAtMs: number };
}

/** A stopSignal reason: let the step under way finish, however long it takes. */
export const finishTheStep = 'finish the step under way';

export type SegmentOutcome =
  /** The run could not be claimed: someone else holds it, it waits (for an answer, an earlier turn or a model retry's time), or it is closed. */
  | { kind: 'not-claimed'; reason: NotClaimedReason }
  /** The segment closed the run with its final message. */
  | { kind: 'closed'; status: CloseStatus; messageId: string; fence: number }
  /** A voluntary hand-off: a question, an operator takeover, or a slice end (queued). */
  | { kind: 'parked'; status: ParkStatus; fence: number }
  /** A guarded write was rejected: another segment took the run. This one wrote nothing more. */
  | { kind: 'lost'; fence: number }
  /** The deadline came mid-step (or the stream failed); the lease is left to expire for takeover. */
  | { kind: 'stopped'; fence: number; reason: string };

export type RunSegment = (rt: Runtime, options: SegmentOptions) => Promise<SegmentOutcome>;
