// agent-kit's questions and approvals answered the AI SDK's way (ADR-0077): useChat's
// addToolOutput (a question's tool call) or addToolApprovalResponse (an approval), then a send
// (sendAutomaticallyWhen does it). The chat's last message is then the reply that asked, holding
// the answer; the transport posts it to the run's input route and streams the rest of the reply.
// An answer typed as a message instead gets the rest of the reply in a message of its own (ADR-0087).
import type { UIMessage, UIMessageChunk } from 'ai';

/** What the run's input route takes (`POST /api/runs/:id/input`). */
export type InputAnswer = { questionId: string; answer: string } | { questionId: string; approved: boolean };

/** An answer the chat's last reply holds for the question or approval its run waits on. */
export interface HeldAnswer {
  runId: string;
  threadId: string;
  /** The seq of the event that asked: the reply goes on after it. */
  seq: number;
  body: InputAnswer;
  /** Whether the message already shows some of what came after the question (the reply went on). */
  goneOn: boolean;
}

interface InputPart {
  type: 'data-agent-kit-input';
  data: { id?: unknown; kind?: unknown; runId?: unknown; seq?: unknown };
}

interface ToolPart {
  toolCallId: string;
  state: string;
  output?: unknown;
  approval?: { approved?: boolean };
}

/**
 * The answer `message` holds for the last question or approval it shows (a `data-agent-kit-input`
 * part), read from that tool call's part: a question's output, an approval's response. Undefined
 * when the message asked nothing or its last question has no answer in it.
 */
export function heldAnswer(message: UIMessage): HeldAnswer | undefined {
  const at = message.parts.findLastIndex((p) => p.type === 'data-agent-kit-input');
  const asked = at < 0 ? undefined : (message.parts[at] as InputPart).data;
  const threadId = (message.metadata as { threadId?: unknown } | undefined)?.threadId;
  if (!asked || typeof asked.id !== 'string' || typeof asked.runId !== 'string' || typeof asked.seq !== 'number'
    || typeof threadId !== 'string') return undefined;
  const call = message.parts.find((p) => (p as Partial<ToolPart>).toolCallId === asked.id) as ToolPart | undefined;
  const goneOn = message.parts.slice(at + 1).some((p) => p.type !== 'step-start');
  const held = { runId: asked.runId, threadId, seq: asked.seq, goneOn };
  if (asked.kind === 'approval' && call?.state === 'approval-responded' && typeof call.approval?.approved === 'boolean') {
    return { ...held, body: { questionId: asked.id, approved: call.approval.approved } };
  }
  if (asked.kind === 'question' && call?.state === 'output-available') {
    return { ...held, body: { questionId: asked.id, answer: answerText(call.output) } };
  }
  return undefined;
}

/** A question's output as the input route's answer: the text itself, or its `answer`. */
function answerText(output: unknown): string {
  if (typeof output === 'string') return output;
  const answer = (output as { answer?: unknown } | null | undefined)?.answer;
  return typeof answer === 'string' ? answer : JSON.stringify(output);
}

/**
 * `reply`, under a message of its own when it goes on with a run the chat shows already: the
 * message `sent` answered the question that run waits on (ADR-0087). The AI SDK would otherwise
 * put the rest of the reply in the place of the question, above the answer. Its id is the one
 * `toUIMessages` gives that part of the reply once the run closed: `<run id>:<sent>`. A stream
 * read on after a cut may name a tool call the message that asked shows (its result, say); the
 * new message has no such call, and the chat would fail on it, so those chunks are left out.
 */
export function goesOnAfter(reply: ReadableStream<UIMessageChunk>, messages: readonly UIMessage[], sent: string): ReadableStream<UIMessageChunk> {
  const shown = (runId: string) => messages.slice(0, -1).some((m) =>
    m.role === 'assistant' && (m.id === runId || (m.metadata as { runId?: unknown } | undefined)?.runId === runId));
  return inOwnMessage(reply, sent, shown);
}

/**
 * `reply` in the message `<run id>:<sent>` (from its `start`, when `when` says so for the run),
 * without the chunks of tool calls it did not start: they are the earlier message's. A resume
 * that goes on after an answer typed to the run's question is one (`x-agent-kit-goes-on-after`).
 */
export function inOwnMessage(
  reply: ReadableStream<UIMessageChunk>, sent: string, when: (runId: string) => boolean = () => true,
): ReadableStream<UIMessageChunk> {
  let renamed = false;
  const calls = new Set<string>(); // the tool calls the new message shows
  return reply.pipeThrough(new TransformStream<UIMessageChunk, UIMessageChunk>({
    transform(chunk, controller) {
      if (chunk.type === 'start' && chunk.messageId !== undefined && when(chunk.messageId)) {
        renamed = true;
        return controller.enqueue({ ...chunk, messageId: `${chunk.messageId}:${sent}` });
      }
      if (renamed && 'toolCallId' in chunk) {
        if (chunk.type === 'tool-input-start' || chunk.type === 'tool-input-available' || chunk.type === 'tool-input-error') calls.add(chunk.toolCallId);
        else if (!calls.has(chunk.toolCallId)) return;
      }
      controller.enqueue(chunk);
    },
  }));
}
