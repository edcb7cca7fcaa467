// A reply's text as its run has it now, from the parts useChat keeps. When a segment takes a run
// over and goes on from less text than the dead one streamed (a model step started again, on a
// provider that cannot continue a prefill), the stream cannot take the streamed text back: it
// opens a new text part with the text the run goes on from, marked in its provider metadata as
// replacing the text parts before it (ADR-0111). useChat keeps both; a page renders this.
import type { ProviderMetadata, UIMessage } from 'ai';

/** The provider metadata of a `text-start` that replaces the text parts before it (the server's, ai-sdk-stream.ts). */
export const replacingText: ProviderMetadata = { agentKit: { replacesText: true } };

/** Whether a text part's (or its `text-start` chunk's) provider metadata marks it as replacing. */
export function replacesText(metadata: ProviderMetadata | undefined): boolean {
  return (metadata?.agentKit as { replacesText?: unknown } | undefined)?.replacesText === true;
}

/**
 * `message` without the text parts a later part replaced: each text part marked as replacing
 * drops the text parts before it, back to the previous such part or the message's start. Other
 * parts (tool calls, reasoning, data) stay. The same message when nothing was replaced.
 */
export function withoutReplacedText<M extends UIMessage>(message: M): M {
  const dropped = new Set<number>();
  let since: number[] = [];
  message.parts.forEach((part, index) => {
    if (part.type !== 'text') return;
    if (replacesText(part.providerMetadata)) {
      for (const earlier of since) dropped.add(earlier);
      since = [];
    }
    since.push(index);
  });
  if (dropped.size === 0) return message;
  return { ...message, parts: message.parts.filter((_, index) => !dropped.has(index)) };
}
