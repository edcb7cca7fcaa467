// What agent-kit puts in a reply's `metadata`, and the thread a chat's replies name there.
import type { UIMessage } from 'ai';

/** What agent-kit puts in a reply's `metadata` (the UI message stream's `start` and `finish`). */
export interface AgentKitMessageMetadata {
  runId: string;
  threadId?: string;
  /** Once the stream ends: the run's status (`completed`, `waiting_input`, `streaming`, …). */
  status?: string;
  /** Once the run closed: the stored message's id, and whether it is a salvaged partial. */
  messageId?: string | null;
  partial?: boolean;
  /** The last event of the thread the stream sent: a stream that ends before its run goes on after it. */
  seq?: number;
  /** A regenerated reply's: the run whose reply it replaced, and whether the message was edited (ADR-0093). */
  regenerates?: Regenerates;
  /** A restored reply's, in a thread's read: the run it was last put back in place of (ADR-0096). */
  restoredOver?: string;
  /** A reply an operator wrote in the run's place: who (ADR-0114). */
  operator?: string;
}

/** The thread of a chat's replies: the last reply's `metadata.threadId`; none before the first. */
export function threadIdOf(messages: readonly UIMessage[]): string | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const threadId = (messages[i]!.metadata as Partial<AgentKitMessageMetadata> | undefined)?.threadId;
    if (typeof threadId === 'string') return threadId;
  }
  return undefined;
}

/** What a regenerated reply replaced: the run whose reply it asked again, and whether it edited the message. */
export interface Regenerates {
  runId: string;
  edited: boolean;
}
