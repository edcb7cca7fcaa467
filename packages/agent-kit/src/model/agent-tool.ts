// The shape of a tool as agent-kit sees it: plain data plus functions, which the turn engine wraps
// for the AI SDK and runs under the effect ledger (execute once per idempotency key, reconcile
// after a crash).

import type { z } from 'zod';

export type AgentToolContext = {
  /** Stable across retries and takeovers of the same tool call; pass it to the outside system. */
  idempotencyKey: string;
  /** Aborts when the segment running the tool gives up (lost lease, cancel, deadline). */
  signal: AbortSignal;
};

export type ReconcileResult<O> = { found: true; result: O } | { found: false };

/** A tool the agent can call. `kind: 'question'` has no execute: it parks the run for an answer. */
export type AgentTool<I, O> = {
  name: string;
  description: string;
  inputSchema: z.ZodType<I>;
  /** The run waits for a user's approval before execute runs. */
  needsApproval?: boolean;
  kind?: 'question';
  /**
   * The side effect, run at most once per `ctx.idempotencyKey`. Throw a plain error only when the
   * effect certainly did not happen (recorded `failed`; the model may call again, under a new
   * key); throw EffectInDoubtError when you cannot tell (recorded `in_doubt`). See ADR-0040.
   */
  execute?(input: I, ctx: AgentToolContext): Promise<O>;
  /**
   * Asks the outside system whether the effect with this key already happened. agent-kit waits
   * for it at most `reconcileTimeoutMs` (10 s by default, less when the caller's lease ends
   * sooner) and then aborts `signal` and counts the effect as in doubt; pass `signal` to the
   * lookup. `input` is the call's input as `execute` had it (as stored, in its JSON form), so a
   * hook can look the effect up by the outside system's own reference (an order number), or send
   * it again under the same key to a system that deduplicates by it. In a later segment or the
   * reaper it is the stored JSON, so a Date is its ISO string there. (Optional in the type so
   * that code calling a hook directly keeps compiling; agent-kit passes it whenever it has it.)
   */
  reconcile?(ctx: { idempotencyKey: string; signal?: AbortSignal; input?: I }): Promise<ReconcileResult<O>>;
};

/** What a call of `tool` is: a question for the user, an effect the user approves first, or an effect. */
export function toolKind(tool: AgentTool<any, any>): 'question' | 'approval' | 'effect' {
  return tool.kind === 'question' ? 'question' : tool.needsApproval ? 'approval' : 'effect';
}
