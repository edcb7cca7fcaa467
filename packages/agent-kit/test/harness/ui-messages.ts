// What a client makes of the AI SDK's UI message stream: the message it ends with, its text.
import { readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';

export function textOf(message: UIMessage): string {
  return message.parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
}

/** The message `stream` builds (on `start`, when it goes on from one), as the client holds it at the end. */
export async function lastMessage(stream: ReadableStream<UIMessageChunk>, start?: UIMessage): Promise<UIMessage> {
  let last: UIMessage | undefined = start;
  for await (const message of readUIMessageStream<UIMessage>({ message: start, stream, terminateOnError: true })) last = message;
  return last!;
}
