// What the scripted model says: a pure function of the prompt's user messages (plus which demo
// tools already answered since the last one), so identical conversations in different threads,
// with different tool-call ids or tool results, always get the same reply text.

import type { ModelMessage, ModelPrompt } from './provider-types.js';

/** Words the reply is drawn from; fixed, so a reply never changes between versions silently. */
const replyWords = [
  'agent', 'lease', 'fence', 'turn', 'thread', 'event', 'effect', 'step',
  'drain', 'reap', 'park', 'salvage', 'queue', 'run', 'claim', 'renew',
  'durable', 'ordered', 'gapless', 'exactly', 'once', 'postgres', 'stream', 'replay',
  'resume', 'worker', 'cron', 'budget', 'slice', 'journal', 'ledger', 'reconcile',
  'alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel',
  'india', 'juliet', 'kilo', 'lima', 'mike', 'november', 'oscar', 'papa',
  'quiet', 'rapid', 'steady', 'tidy', 'under', 'vivid', 'warm', 'young',
  'amber', 'blue', 'coral', 'dune', 'ember', 'frost', 'grove', 'harbor',
] as const;

/** Tag in the last user message → the tool the scripted model calls once for it, in this order. */
export const scriptedToolTags = [
  { tag: '#effect', toolName: 'record_effect' },
  { tag: '#ask', toolName: 'ask_user' },
  { tag: '#approve', toolName: 'transfer_funds' },
] as const;

/**
 * Tag in the last user message: each step of the turn thinks before it answers, as a reasoning
 * model does, streaming `scriptedReasoningText` as reasoning at the reply's pace (ADR-0070). A
 * step that goes on from a prefill does not think again.
 */
export const scriptedThinkTag = '#think';

/** The question the scripted model asks through `ask_user` for `#ask`. */
export const scriptedAskQuestion = 'Which colour should the demo use?';

/** The input of the `transfer_funds` call the scripted model makes for `#approve`. */
export const scriptedTransferInput = { amount: 42, to: 'demo' } as const;

const noteLengthMax = 48; // keeps record_effect inputs (and logs of them) one short line

/** 32-bit FNV-1a over the UTF-8 bytes of `text`: tiny, stable and good enough to pick words. */
export function hashFnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/** Joins user texts with a separator no chat text holds, so ["ab","c"] and ["a","bc"] differ. */
function joinUserTexts(userTexts: readonly string[]): string {
  return userTexts.join('\u0000');
}

/**
 * The scripted reply for a conversation: `tokens` words, each followed by one space, chosen by a
 * PRNG seeded with the FNV-1a hash of the user texts. Tests compute expected text with it.
 */
export function scriptedReplyText(userTexts: readonly string[], tokens: number): string {
  // mulberry32: a small PRNG, so consecutive words vary even though there is one 32-bit seed.
  let state = hashFnv1a(joinUserTexts(userTexts));
  let text = '';
  for (let index = 0; index < tokens; index += 1) {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = Math.imul(state ^ (state >>> 15), state | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    const random = (mixed ^ (mixed >>> 14)) >>> 0;
    text += `${replyWords[random % replyWords.length]} `;
  }
  return text;
}

/** Splits reply text into its stream tokens ("word "), keeping a partial first word whole. */
export function splitReplyTokens(text: string): string[] {
  return text.match(/[^ ]+ ?| /g) ?? [];
}

/** The text of one message: its text parts concatenated (files, reasoning, tools ignored). */
export function messageText(message: ModelMessage): string {
  if (typeof message.content === 'string') return message.content;
  let text = '';
  for (const part of message.content) if (part.type === 'text') text += part.text;
  return text;
}

/** The texts of the prompt's user messages, in order. */
export function userTextsOf(prompt: ModelPrompt): string[] {
  return prompt.filter((message) => message.role === 'user').map(messageText);
}

/**
 * What the scripted model thinks before a step of a `#think` turn: words drawn as the reply's are,
 * from the user texts and the step's number, so each step thinks something of its own.
 */
export function scriptedReasoningText(userTexts: readonly string[], stepNo: number, tokens: number): string {
  const words = Math.max(4, Math.ceil(tokens / 2));
  return `Thinking it over: ${scriptedReplyText([`${scriptedThinkTag} ${stepNo}`, ...userTexts], words)}`.trimEnd();
}

export type ScriptedToolCall = {
  kind: 'tool-call';
  toolCallId: string;
  toolName: string;
  input: Record<string, unknown>;
};

export type ScriptedText = {
  kind: 'text';
  /** The whole reply for this step. */
  fullText: string;
  /** What the model emits now: `fullText` minus an assistant prefix the prompt ends with. */
  remainder: string;
};

/** `reasoning`: what the step thinks before it answers; '' when it does not (ADR-0070). */
export type ScriptedStep = (ScriptedToolCall | ScriptedText) & { reasoning: string };

/** A trailing assistant message with text and no tool call is a prefill to continue. */
function splitPrefill(prompt: ModelPrompt): { base: ModelPrompt; prefill: string | undefined } {
  const last = prompt.at(-1);
  if (last?.role !== 'assistant') return { base: prompt, prefill: undefined };
  if (last.content.some((part) => part.type === 'tool-call' || part.type === 'tool-result')) {
    return { base: prompt, prefill: undefined };
  }
  return { base: prompt.slice(0, -1), prefill: messageText(last) };
}

/** Names of the tools that have a result in `messages` (tool messages or provider results). */
function toolResultNames(messages: ModelPrompt): Set<string> {
  const names = new Set<string>();
  for (const message of messages) {
    if (message.role !== 'tool' && message.role !== 'assistant') continue;
    for (const part of message.content) if (part.type === 'tool-result') names.add(part.toolName);
  }
  return names;
}

function scriptedToolInput(toolName: string, lastUserText: string): Record<string, unknown> {
  if (toolName === 'ask_user') return { question: scriptedAskQuestion };
  if (toolName === 'transfer_funds') return { ...scriptedTransferInput };
  const note = lastUserText.replace(/\s+/g, ' ').trim().slice(0, noteLengthMax);
  return { note: note === '' ? 'effect' : note };
}

/**
 * Decides the scripted model's next step for a prompt: the first tagged tool of the last user
 * message that has no result after it, else the reply text (minus any assistant prefill).
 * Tool-call ids are derived from the user texts, so a resumed run re-issues the same id.
 */
export function planScriptedStep(prompt: ModelPrompt, tokens: number): ScriptedStep {
  const { base, prefill } = splitPrefill(prompt);
  const userTexts = userTextsOf(base);
  const lastUserIndex = base.findLastIndex((message) => message.role === 'user');
  const lastUserText = userTexts.at(-1) ?? '';
  const answered = toolResultNames(base.slice(lastUserIndex + 1));
  const stepNo = base.slice(lastUserIndex + 1).filter((message) => message.role === 'assistant').length;
  const reasoning = lastUserText.includes(scriptedThinkTag) && prefill === undefined
    ? scriptedReasoningText(userTexts, stepNo, tokens) : '';
  for (const { tag, toolName } of scriptedToolTags) {
    if (!lastUserText.includes(tag) || answered.has(toolName)) continue;
    const conversationHash = hashFnv1a(joinUserTexts(userTexts)).toString(16).padStart(8, '0');
    return {
      kind: 'tool-call',
      reasoning,
      toolCallId: `scripted-${toolName}-${conversationHash}`,
      toolName,
      input: scriptedToolInput(toolName, lastUserText),
    };
  }
  const fullText = scriptedReplyText(userTexts, tokens);
  // A prefill that is not a prefix of this reply came from elsewhere: answer in full.
  const isPrefix = prefill !== undefined && fullText.startsWith(prefill);
  const remainder = isPrefix ? fullText.slice(prefill.length) : fullText;
  return { kind: 'text', fullText, remainder, reasoning };
}
