// The AI SDK UI message stream (protocol v1, what `useChat` reads) for one run, translated from
// the run's thread events. The log stays the source of truth: this is a view of one assistant
// message. A segment that resumes from different text, or a model step started again, cannot
// retract what a client already shows (the protocol has no "replace"), so the text it goes on
// from starts a new text part and a transient `data-agent-kit-segment` chunk names the part it
// supersedes.
import type { UIMessageChunk } from 'ai';
import { replacingText } from '../client/replaced-text.js';
import type { ThreadEvent } from '../event-log/read-events.js';
import type { Regenerated } from '../event-log/read-threads.js';
import { runFailureText } from '../event-log/run-failure.js';
import { eventPayload, type SseEncoder } from './sse.js';

/** Response headers of a UI message stream (the AI SDK client checks the version header). */
export const uiMessageStreamHeaders: Readonly<Record<string, string>> = {
  'x-vercel-ai-ui-message-stream': 'v1',
};

type Chunk = UIMessageChunk;

/** Turns one run's events into UI message chunks; events of other runs become transient data. */
export class UIMessageTranslator {
  private started = false;
  private finished = false;
  private stepOpen = false;
  private textId: string | null = null;
  /** The open reasoning part: what the model thinks, streamed before its text (ADR-0070). */
  private reasoningId: string | null = null;
  private parts = 0;
  /** The run's text as the client shows it, since the last superseded part. */
  private shown = '';
  /** The next text part replaces the text parts before it, back to the last that did (or the message's start). */
  private replacing = false;
  private readonly toolCalls = new Set<string>();
  /** The last park's status while the run has not gone on since. */
  private parked: Record<string, unknown> | undefined;
  /** The last model step stopped at the model's output limit. */
  private cutAtLimit = false;
  /** The run's thread: the message's metadata names it, for the client's next turn. */
  private threadId: string | undefined;
  /** The last event translated (of any run): a stream that ends before the run does goes on after it. */
  private seq: number | undefined;
  /** A regenerated run's: the run whose reply it replaced (its first event says), for the metadata. */
  private regenerates: Regenerated | undefined;

  /** `from`: the thread, and the seq the stream starts after (else both are learnt from the events). */
  constructor(private readonly runId: string, from?: { threadId: string; afterSeq: number }) {
    this.threadId = from?.threadId;
    this.seq = from?.afterSeq;
  }

  translate(event: ThreadEvent): Chunk[] {
    const out: Chunk[] = [];
    if (this.finished) return out;
    this.threadId ??= event.threadId;
    this.seq = Math.max(this.seq ?? 0, event.seq);
    if (event.runId !== this.runId) {
      out.push(this.note(event));
      return out;
    }
    const data = event.data;
    switch (event.type) {
      case 'segment-started':
        this.begin(out, event);
        break;
      case 'text-delta':
        this.appendText(out, String(data.text ?? ''));
        break;
      case 'reasoning-delta':
        this.appendReasoning(out, String(data.text ?? ''));
        break;
      case 'step-finished':
        this.stepFinished(out, event);
        break;
      case 'tool-call':
        this.toolCall(out, event, event.data);
        break;
      case 'tool-result':
        this.toolResult(out, event);
        break;
      case 'input-requested': {
        this.ensureStarted(out);
        const id = String(data.id ?? data.questionId ?? event.seq);
        // Its seq: a client that answers goes on from here (agent-kit/client, ADR-0077).
        out.push({ type: 'data-agent-kit-input', id, data: { ...data, runId: this.runId, seq: event.seq } });
        // An approval is also the AI SDK's own, which useChat's addToolApprovalResponse answers.
        if (data.kind === 'approval' && this.toolCalls.has(id)) {
          out.push({ type: 'tool-approval-request', approvalId: id, toolCallId: id });
        }
        break;
      }
      case 'run-parked':
        // A park ends this stream's step; the message finishes when the stream ends (a replay
        // of a run that went on continues with its next segment in the same message). A run
        // parked queued goes on at once (a slice, a store error's hand-back): its step and its
        // text stay open, ended by the stream's end after this event, where agent-kit/client
        // carries them into the next stream as one part (ADR-0089), and a replay goes on in them.
        if (data.status !== 'queued') this.endStep(out);
        this.parked = { status: data.status, waitingFor: data.waitingFor ?? null };
        out.push(this.note(event));
        break;
      case 'model-retry':
        // A step asked again goes on from this text (ADR-0061); one started again dropped some.
        // Asked anew, the model thinks anew: its thinking is a part of its own.
        out.push(this.note(event));
        this.endReasoning(out);
        if (typeof data.text === 'string') this.reconcile(out, data.text, event.fence);
        break;
      case 'run-closed':
        this.close(out, data);
        break;
      case 'turn-regenerated':
        if (typeof data.regenerates === 'string') this.regenerates = { runId: data.regenerates, edited: data.edited === true };
        out.push(this.note(event));
        break;
      default:
        out.push(this.note(event));
    }
    return out;
  }

  /**
   * Chunks that end the message when the stream stops: `finish` unless the run closed, with the
   * status it parked in, else `streaming` (the stream ended first: the route's budget), and the
   * seq to go on after. A stream that sent nothing of the run still says so.
   */
  end(): Chunk[] {
    const out: Chunk[] = [];
    if (!this.finished) this.finish(out, 'other', this.parked ?? { status: 'streaming' });
    return out;
  }

  /** The message's run and thread: a client sends the thread's next message with `threadId`. */
  private ids(): { runId: string; threadId?: string; regenerates?: Regenerated } {
    return { runId: this.runId, ...(this.threadId ? { threadId: this.threadId } : {}), ...(this.regenerates ? { regenerates: this.regenerates } : {}) };
  }

  private note(event: ThreadEvent): Chunk {
    return { type: 'data-agent-kit-event', data: eventPayload(event), transient: true };
  }

  /** The message's `start`, once. */
  private ensureMessage(out: Chunk[]) {
    if (!this.started) {
      this.started = true;
      out.push({ type: 'start', messageId: this.runId, messageMetadata: this.ids() });
    }
  }

  private ensureStarted(out: Chunk[]) {
    this.parked = undefined;
    this.ensureMessage(out);
    if (!this.stepOpen) {
      this.stepOpen = true;
      out.push({ type: 'start-step' });
    }
  }

  /** End the open parts: the reasoning's and the text's. */
  private endText(out: Chunk[]) {
    this.endReasoning(out);
    if (this.textId) out.push({ type: 'text-end', id: this.textId });
    this.textId = null;
  }

  private endStep(out: Chunk[]) {
    this.endText(out);
    if (this.stepOpen) out.push({ type: 'finish-step' });
    this.stepOpen = false;
  }

  private endReasoning(out: Chunk[]) {
    if (this.reasoningId) out.push({ type: 'reasoning-end', id: this.reasoningId });
    this.reasoningId = null;
  }

  /** Reasoning after text is a new part of its own, after the text's. */
  private appendReasoning(out: Chunk[], text: string) {
    if (!text) return;
    this.ensureStarted(out);
    if (this.textId) out.push({ type: 'text-end', id: this.textId });
    this.textId = null;
    if (!this.reasoningId) {
      this.reasoningId = `${this.runId}:reasoning:${++this.parts}`;
      out.push({ type: 'reasoning-start', id: this.reasoningId });
    }
    out.push({ type: 'reasoning-delta', id: this.reasoningId, delta: text });
  }

  private appendText(out: Chunk[], text: string) {
    if (!text) return;
    this.ensureStarted(out);
    this.endReasoning(out);
    this.startText(out);
    out.push({ type: 'text-delta', id: this.textId!, delta: text });
    this.shown += text;
  }

  /**
   * Open a text part unless one is open. The first after a supersede says, in its provider
   * metadata, that it replaces the text parts before it (`withoutReplacedText` in agent-kit/client
   * drops them): a page's `useChat` message keeps every part it was sent.
   */
  private startText(out: Chunk[]) {
    if (this.textId) return;
    this.ensureStarted(out);
    this.textId = `${this.runId}:text:${++this.parts}`;
    if (this.replacing) {
      this.replacing = false;
      out.push({ type: 'text-start', id: this.textId, providerMetadata: replacingText });
    } else out.push({ type: 'text-start', id: this.textId });
  }

  /** Bring the shown text to `text`: extend it, or supersede it when it diverged. */
  private reconcile(out: Chunk[], text: string, fence: number) {
    if (text.startsWith(this.shown)) {
      this.appendText(out, text.slice(this.shown.length));
      return;
    }
    const superseded = this.textId;
    this.endStep(out);
    this.ensureStarted(out);
    out.push({
      type: 'data-agent-kit-segment',
      transient: true,
      data: { runId: this.runId, fence, supersededTextId: superseded, text },
    });
    this.shown = '';
    this.replacing = true;
    this.startText(out); // now, even with no text to go on from: the replaced text goes at once
    this.appendText(out, text);
  }

  private begin(out: Chunk[], event: ThreadEvent) {
    this.ensureStarted(out);
    this.endReasoning(out); // the dead segment's thinking ends where it stopped
    this.reconcile(out, String(event.data.text ?? ''), event.fence);
  }

  /** A model step was journaled: its text was already streamed; its tool calls are shown now. */
  private stepFinished(out: Chunk[], event: ThreadEvent) {
    const { toolCalls } = event.data;
    this.cutAtLimit = event.data.finishReason === 'length'; // the reply the output limit cut (ADR-0068)
    this.endReasoning(out); // each step's thinking is a part of its own
    const calls = Array.isArray(toolCalls) ? (toolCalls as Record<string, unknown>[]) : [];
    for (const call of calls) this.toolCall(out, event, call);
  }

  private toolCall(out: Chunk[], event: ThreadEvent, call: Record<string, unknown>) {
    const { toolCallId, toolName } = call;
    if (typeof toolCallId !== 'string' || typeof toolName !== 'string') {
      out.push(this.note(event));
      return;
    }
    if (this.toolCalls.has(toolCallId)) return; // a resumed segment re-announces nothing twice
    this.ensureStarted(out);
    this.endText(out);
    this.toolCalls.add(toolCallId);
    out.push({ type: 'tool-input-available', toolCallId, toolName, input: call.input ?? {} });
  }

  private toolResult(out: Chunk[], event: ThreadEvent) {
    const { toolCallId } = event.data;
    // The client knows only calls it was shown; a result for another is kept as data.
    if (typeof toolCallId !== 'string' || !this.toolCalls.has(toolCallId)) {
      out.push(this.note(event));
      return;
    }
    this.endText(out);
    const outcome = String(event.data.outcome ?? '');
    if (outcome === 'denied') out.push({ type: 'tool-output-denied', toolCallId });
    else if (outcome === 'failed' || outcome === 'invalid') {
      out.push({ type: 'tool-output-error', toolCallId, errorText: String(event.data.output ?? 'tool failed') });
    } else out.push({ type: 'tool-output-available', toolCallId, output: event.data.output ?? null });
  }

  private close(out: Chunk[], data: Record<string, unknown>) {
    this.ensureStarted(out);
    const status = String(data.status);
    // A run stopped where the viewer who cancelled it was (ADR-0090) keeps less than a faster
    // viewer saw: that text stays shown, rather than being sent again as a new part.
    const keptLess = status === 'aborted' && typeof data.text === 'string' && this.shown.startsWith(data.text);
    if (typeof data.text === 'string' && !keptLess) this.reconcile(out, data.text, Number(data.fence ?? 0));
    const metadata = {
      status, messageId: data.messageId ?? null, partial: data.partial === true,
      ...(typeof data.operator === 'string' ? { operator: data.operator } : {}), // an operator's reply (ADR-0114)
    };
    if (status === 'failed') {
      this.endStep(out);
      const why = runFailureText(data.error); // ADR-0066
      out.push({ type: 'error', errorText: `the run failed${why ? `: ${why}` : ''}; its partial answer was kept` });
    }
    if (status === 'aborted') {
      this.endStep(out);
      out.push({ type: 'abort', reason: 'cancelled' });
    }
    const reason = status === 'completed' ? (this.cutAtLimit ? 'length' : 'stop') : status === 'failed' ? 'error' : 'other';
    this.finish(out, reason, metadata);
  }

  private finish(out: Chunk[], finishReason: 'stop' | 'length' | 'error' | 'other', metadata: Record<string, unknown>) {
    // No step of its own: an empty last step would hide the one that asked a question from the
    // AI SDK's sendAutomaticallyWhen helpers, which look at the message's last step.
    this.ensureMessage(out);
    this.endStep(out);
    const seq = this.seq === undefined ? {} : { seq: this.seq };
    out.push({ type: 'finish', finishReason, messageMetadata: { ...this.ids(), ...metadata, ...seq } });
    this.finished = true;
  }

  /**
   * Go on in a new stream, after the events the client already has were translated: the message,
   * its text and its tool calls are known, but this stream opens its own `start`, step and text
   * part (a UI message stream is read on its own, with the message so far as its start).
   */
  continueInNewStream(): void {
    this.started = false;
    this.stepOpen = false;
    this.textId = null;
    this.reasoningId = null;
  }

  /**
   * Go on in a new stream that the client shows as a message of its own (the rest of a reply after
   * a message that answered its question, ADR-0087): the text so far is known, so none of it is
   * sent again, but the tool calls shown in the other message are not this one's.
   */
  continueInNewMessage(): void {
    this.continueInNewStream();
    this.toolCalls.clear();
  }

  /** True once the message has finished: nothing more is sent for this run. */
  get done(): boolean {
    return this.finished;
  }
}

/**
 * An SSE encoder for the UI message stream of `runId`: `data: <chunk>` lines, the event's seq as
 * `id:` on its last chunk (so Last-Event-ID still resumes), and `data: [DONE]` at the end.
 * `seen`: the events a resuming client already has (the run's, through its Last-Event-ID), so the
 * stream goes on where it stopped: the same message, text part and tool calls, nothing re-sent;
 * or, `from.ownMessage`, in a message of its own after them.
 */
export function createUIMessageStreamEncoder(
  runId: string, seen: readonly ThreadEvent[] = [], from?: { threadId: string; afterSeq: number; ownMessage?: boolean },
): SseEncoder & { readonly done: boolean } {
  const translator = new UIMessageTranslator(runId, from);
  if (seen.length > 0) {
    for (const event of seen) translator.translate(event);
    if (from?.ownMessage) translator.continueInNewMessage();
    else translator.continueInNewStream();
  }
  const lines = (chunks: Chunk[], id?: number) => chunks.map((chunk, i) => {
    const idLine = id !== undefined && i === chunks.length - 1 ? `id: ${id}\n` : '';
    return `${idLine}data: ${JSON.stringify(chunk)}\n\n`;
  }).join('');
  return {
    get done() {
      return translator.done;
    },
    open: (retryMs) => `retry: ${retryMs}\n\n`,
    encode: (event) => lines(translator.translate(event), event.seq),
    close: (error) => {
      const chunks = translator.end();
      if (error) chunks.push({ type: 'error', errorText: `${error.code}: ${error.message}` });
      return `${lines(chunks)}data: [DONE]\n\n`;
    },
  };
}
