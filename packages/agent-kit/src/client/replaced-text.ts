// A reply's text as its run has it now, from the parts useChat keeps. When a segment takes a run
// over and goes on from less text than the dead one streamed (a model step started again, on a
// provider that cannot continue a prefill), the stream cannot take the streamed text back: it
// opens a new text part with the text the run goes on from, marked in its provider metadata as
// replacing the text parts before it (ADR-0111). useChat keeps both; a page renders this.
import type { UIMessage } from 'ai';

/** The provider-metadata key the server marks a replacing text part under (ai-sdk-stream.ts). */
const key = 'agentKit';

function replacesText(part: UIMessage['parts'][number]): boolean {
  if (part.type !== 'text') return false;
  const mark = part.providerMetadata?.[key] as { replacesText?: unknown } | undefined;
  return mark?.replacesText === true;
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
    if (replacesText(part)) {
      for (const earlier of since) dropped.add(earlier);
      since = [];
    }
    since.push(index);
  });
  if (dropped.size === 0) return message;
  return { ...message, parts: message.parts.filter((_, index) => !dropped.has(index)) };
}
