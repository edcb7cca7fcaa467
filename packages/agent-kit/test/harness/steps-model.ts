// Test models that play tool calls from a script: a fixed list of steps (each tool calls or a
// text), chosen by how many tool results the prompt holds, so a step redone by a later segment
// plays the same part again; and a model that retries a call whose result was an error.
import type { LanguageModelV3 } from '../../src/model/index.js';
import type { ModelStreamPart } from '../../src/model/provider-types.js';
import { mockUsage } from './mock-streams.js';

/** A step: tool calls (after some text, if given), or a text that ends the turn. */
export type PlayedStep = { calls: Array<{ id: string; name: string; input: unknown }>; text?: string } | { text: string };


function partsOf(step: PlayedStep): ModelStreamPart[] {
  const text = step.text ? [{ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: step.text }, { type: 'text-end', id: 't' }] : [];
  const body = 'calls' in step
    ? [...text, ...step.calls.map((c) => ({ type: 'tool-call', toolCallId: c.id, toolName: c.name, input: JSON.stringify(c.input) }))]
    : text;
  const finishReason = 'calls' in step ? { unified: 'tool-calls', raw: 'tool_calls' } : { unified: 'stop', raw: 'stop' };
  return [{ type: 'stream-start', warnings: [] }, ...body, { type: 'finish', finishReason, usage: mockUsage }] as ModelStreamPart[];
}

export type PromptMessage = { role: string; content: unknown };
type ToolResultPart = { type: string; output?: { type: string } };

/** A model whose next step is `choose(prompt)`. */
function scriptModel(choose: (prompt: PromptMessage[]) => PlayedStep): LanguageModelV3 {
  return {
    specificationVersion: 'v3', provider: 'test', modelId: 'steps', supportedUrls: {},
    doGenerate: () => Promise.reject(new Error('stream only')),
    async doStream(options: { prompt: PromptMessage[] }) {
      const parts = partsOf(choose(options.prompt));
      return {
        stream: new ReadableStream<ModelStreamPart>({
          start(controller) {
            for (const part of parts) controller.enqueue(part);
            controller.close();
          },
        }),
      };
    },
  } as unknown as LanguageModelV3;
}

/** A model that keeps each prompt in `prompts` and answers the nth "reply n" (a new answer each time). */
export function numberedRepliesModel(prompts: PromptMessage[][]): LanguageModelV3 {
  return scriptModel((prompt) => {
    prompts.push(prompt);
    return { text: `reply ${prompts.length}` };
  });
}

/** Plays `steps[n]`, n = the tool results in the prompt (the last step again past the end). */
export function stepsModel(steps: PlayedStep[]): LanguageModelV3 {
  return scriptModel((prompt) => steps[Math.min(prompt.filter((m) => m.role === 'tool').length, steps.length - 1)]!);
}

/** `stepsModel` that also keeps the prompt of each step it plays, in order, in `prompts`. */
export function recordingStepsModel(steps: PlayedStep[], prompts: PromptMessage[][]): LanguageModelV3 {
  return scriptModel((prompt) => {
    prompts.push(prompt);
    return steps[Math.min(prompt.filter((m) => m.role === 'tool').length, steps.length - 1)]!;
  });
}

/**
 * Calls `name` with `input`; after a result that is an error, calls it again (a new call, as a
 * model does when told a call failed); after any other result, says "Done.". Stops retrying
 * after `maxCalls` calls.
 */
export function retryingModel(name: string, input: unknown, maxCalls = 3): LanguageModelV3 {
  return scriptModel((prompt) => {
    const results = prompt.filter((m) => m.role === 'tool');
    const last = results.at(-1)?.content as ToolResultPart[] | undefined;
    const lastFailed = last?.some((part) => part.output?.type.startsWith('error')) ?? false;
    if ((results.length === 0 || lastFailed) && results.length < maxCalls) {
      return { calls: [{ id: `call-${results.length + 1}`, name, input }] };
    }
    return { text: 'Done.' };
  });
}
