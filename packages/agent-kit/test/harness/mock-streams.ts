// Stream results for the AI SDK's MockLanguageModelV3 (`doStream: [answering([...]), ...]`): a
// step that answers with text deltas, and a step that calls one tool. Shared by the tests that
// hand the engine a model's exact parts.
import { simulateReadableStream } from 'ai';

/** Token usage as a provider reports it; the engine does not read it. */
export const mockUsage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

type Part = Parameters<typeof simulateReadableStream>[0]['chunks'][number];

/** A step that streams `deltas` as one text (with `extra` parts before its end) and stops. */
export function answering(deltas: string[], extra: unknown[] = []) {
  const parts = [
    { type: 'text-start', id: 't' },
    ...deltas.map((delta) => ({ type: 'text-delta', id: 't', delta })),
    ...extra,
    { type: 'text-end', id: 't' },
    { type: 'finish', finishReason: { unified: 'stop', raw: undefined }, usage: mockUsage },
  ];
  return { stream: simulateReadableStream({ chunks: parts as Part[] }) } as never;
}

/** A step that calls `toolName` with `input` (as call `call-1`) and stops for its result. */
export function calling(toolName: string, input: unknown) {
  const parts = [
    { type: 'tool-call', toolCallId: 'call-1', toolName, input: JSON.stringify(input) },
    { type: 'finish', finishReason: { unified: 'tool-calls', raw: undefined }, usage: mockUsage },
  ];
  return { stream: simulateReadableStream({ chunks: parts as Part[] }) } as never;
}
