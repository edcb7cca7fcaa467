// The reply each user message had when this page last saw it (ADR-0092): what a regenerate or an
// edit names as the reply it replaces (`replaces`), so that the request sent again after a lost
// response is the same regeneration, not one more.
import type { UIMessage } from 'ai';

export const uuidShaped = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A reply's run: its metadata's, or the id of its message (`<runId>` or `<runId>:<answer id>`). */
function runOf(message: UIMessage): string | undefined {
  const runId = (message.metadata as { runId?: unknown } | undefined)?.runId ?? message.id.split(':')[0];
  return typeof runId === 'string' && uuidShaped.test(runId) ? runId : undefined;
}

export class RepliesSeen {
  /** User message id (its client message id) → the run of the reply after it. */
  private readonly runs = new Map<string, string>();

  /**
   * The messages a send is given: each user message followed by a reply; and one without (the
   * chat dropped its reply to ask again) by its own `metadata.runId`, which a chat reopened from
   * the thread's read has (`toUIMessages`), unless a response since named a newer reply.
   */
  learn(messages: readonly UIMessage[]): void {
    for (const [i, message] of messages.entries()) {
      if (message.role !== 'user') continue;
      const next = messages[i + 1];
      if (next?.role === 'assistant') {
        const runId = runOf(next);
        if (runId) this.runs.set(message.id, runId);
      } else if (!this.runs.has(message.id)) {
        const own = (message.metadata as { runId?: unknown } | undefined)?.runId;
        if (typeof own === 'string' && uuidShaped.test(own)) this.runs.set(message.id, own);
      }
    }
  }

  /** A chat response: the run that answers the message posted (a new turn, or a regeneration's). */
  answered(clientMessageId: string, runId: string | null): void {
    if (runId && uuidShaped.test(runId)) this.runs.set(clientMessageId, runId);
  }

  /**
   * The run a regeneration of `message` replaces: the reply `regenerate({ messageId })` names, or
   * the one the page last saw after the message; undefined if it has seen none (then every
   * request regenerates).
   */
  replacedBy(message: UIMessage, regeneratedReply: string | undefined): string | undefined {
    if (regeneratedReply !== undefined && regeneratedReply !== message.id) {
      const named = runOf({ id: regeneratedReply, role: 'assistant', parts: [] });
      if (named) return named;
    }
    return this.runs.get(message.id);
  }
}
