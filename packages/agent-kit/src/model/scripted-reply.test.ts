// Goal: the scripted model's plan is a pure function of the user messages. Method: call
// planScriptedStep and scriptedReplyText on hand-built v3 prompts, plus fast-check properties.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ModelMessage, ModelPrompt } from './provider-types.js';
import {
  hashFnv1a,
  planScriptedStep,
  scriptedAskQuestion,
  scriptedReasoningText,
  scriptedReplyText,
  splitReplyTokens,
} from './scripted-reply.js';

const user = (text: string): ModelMessage => ({ role: 'user', content: [{ type: 'text', text }] });
const assistantText = (text: string): ModelMessage =>
  ({ role: 'assistant', content: [{ type: 'text', text }] });
const toolCall = (toolName: string, toolCallId: string): ModelMessage => ({
  role: 'assistant',
  content: [{ type: 'tool-call', toolCallId, toolName, input: {} }],
});
const toolResult = (toolName: string, toolCallId: string, value: string): ModelMessage => ({
  role: 'tool',
  content: [{ type: 'tool-result', toolCallId, toolName, output: { type: 'text', value } }],
});

describe('scriptedReplyText', () => {
  it('is the same for the same user texts and has exactly `tokens` word tokens', () => {
    fc.assert(fc.property(fc.array(fc.string()), fc.integer({ min: 0, max: 300 }),
      (texts, tokens) => {
        const text = scriptedReplyText(texts, tokens);
        expect(scriptedReplyText([...texts], tokens)).toBe(text);
        expect(splitReplyTokens(text)).toHaveLength(tokens);
        expect(text === '' || /^([a-z]+ )+$/.test(text)).toBe(true);
      }));
  });

  it('differs between different conversations (no collisions among 200 distinct ones)', () => {
    const replies = new Set<string>();
    for (let index = 0; index < 200; index += 1) {
      replies.add(scriptedReplyText([`message number ${index}`], 40));
    }
    expect(replies.size).toBe(200);
  });

  it('separates message boundaries: ["ab","c"] and ["a","bc"] get different replies', () => {
    expect(scriptedReplyText(['ab', 'c'], 40)).not.toBe(scriptedReplyText(['a', 'bc'], 40));
  });

  it('uses the documented FNV-1a 32-bit hash', () => {
    expect(hashFnv1a('')).toBe(0x811c9dc5);
    expect(hashFnv1a('a')).toBe(0xe40c292c);
    expect(hashFnv1a('foobar')).toBe(0xbf9cf968);
  });
});

describe('planScriptedStep', () => {
  it('replies with text built from all user messages, ignoring assistant and tool messages', () => {
    const plain = planScriptedStep([user('one'), assistantText('x'), user('two')], 12);
    const noisy = planScriptedStep([
      { role: 'system', content: 'be brief' }, user('one'), toolCall('lookup', 'id-1'),
      toolResult('lookup', 'id-1', 'anything'), assistantText('other text'), user('two'),
    ], 12);
    expect(plain).toEqual({ kind: 'text', fullText: scriptedReplyText(['one', 'two'], 12),
      remainder: scriptedReplyText(['one', 'two'], 12), reasoning: '' });
    expect(noisy).toEqual(plain);
  });

  it('thinks before each step of a #think turn, something of its own each time, and not when it goes on from a prefill', () => {
    const text = 'look it up #think #effect';
    const first = planScriptedStep([user(text)], 6);
    expect(first).toMatchObject({ kind: 'tool-call', toolName: 'record_effect', reasoning: scriptedReasoningText([text], 0, 6) });
    const toolCallId = first.kind === 'tool-call' ? first.toolCallId : '';
    const second = planScriptedStep([user(text), toolCall('record_effect', toolCallId), toolResult('record_effect', toolCallId, 'ok')], 6);
    expect(second).toMatchObject({ kind: 'text', remainder: scriptedReplyText([text], 6), reasoning: scriptedReasoningText([text], 1, 6) });
    expect(second.reasoning).not.toBe(first.reasoning);
    expect(scriptedReasoningText([text], 0, 6)).toMatch(/^Thinking it over: (\w+ ){3}\w+$/); // 4 words, the least: half of 6 is 3
    const prefill = planScriptedStep([user('go on #think'), assistantText(scriptedReplyText(['go on #think'], 6).slice(0, 10))], 6);
    expect(prefill).toMatchObject({ kind: 'text', reasoning: '' });
    expect(planScriptedStep([user('no tag')], 6).reasoning).toBe('');
  });

  it('calls record_effect for #effect, then replies once its result follows the message', () => {
    const first = planScriptedStep([user('please #effect now')], 5);
    expect(first).toMatchObject({ kind: 'tool-call', toolName: 'record_effect',
      input: { note: 'please #effect now' } });
    const toolCallId = first.kind === 'tool-call' ? first.toolCallId : '';
    const after = planScriptedStep([user('please #effect now'),
      toolCall('record_effect', toolCallId), toolResult('record_effect', toolCallId, 'ok')], 5);
    expect(after).toMatchObject({ kind: 'text',
      remainder: scriptedReplyText(['please #effect now'], 5) });
  });

  it('calls again for a new #effect message even if an earlier one already has a result', () => {
    const prompt: ModelPrompt = [user('#effect a'), toolCall('record_effect', 'c1'),
      toolResult('record_effect', 'c1', 'ok'), assistantText('done'), user('#effect b')];
    const step = planScriptedStep(prompt, 5);
    expect(step).toMatchObject({ kind: 'tool-call', toolName: 'record_effect' });
    // The id is derived from the whole user history, so it differs from the first call's.
    const firstId = planScriptedStep([user('#effect a')], 5);
    expect(step.kind === 'tool-call' && firstId.kind === 'tool-call' &&
      step.toolCallId !== firstId.toolCallId).toBe(true);
  });

  it('asks through ask_user for #ask and requests approval via transfer_funds for #approve', () => {
    expect(planScriptedStep([user('#ask me')], 5)).toMatchObject({ kind: 'tool-call',
      toolName: 'ask_user', input: { question: scriptedAskQuestion } });
    expect(planScriptedStep([user('#approve it')], 5)).toMatchObject({ kind: 'tool-call',
      toolName: 'transfer_funds', input: { amount: 42, to: 'demo' } });
  });

  it('handles several tags one tool at a time, in the order #effect, #ask, #approve', () => {
    const text = '#approve #ask #effect';
    const names: string[] = [];
    const prompt: ModelPrompt = [user(text)];
    for (let round = 0; round < 4; round += 1) {
      const step = planScriptedStep(prompt, 3);
      if (step.kind === 'text') break;
      names.push(step.toolName);
      prompt.push(toolCall(step.toolName, step.toolCallId),
        toolResult(step.toolName, step.toolCallId, 'ok'));
    }
    expect(names).toEqual(['record_effect', 'ask_user', 'transfer_funds']);
    expect(planScriptedStep(prompt, 3)).toMatchObject({ kind: 'text' });
  });

  it('continues an assistant prefill: prefix + remainder is the full reply at any cut', () => {
    const full = scriptedReplyText(['hello'], 30);
    fc.assert(fc.property(fc.integer({ min: 0, max: full.length }), (cut) => {
      const step = planScriptedStep([user('hello'), assistantText(full.slice(0, cut))], 30);
      expect(step.kind === 'text' && full.slice(0, cut) + step.remainder).toBe(full);
    }));
  });

  it('answers in full when the trailing assistant text is not a prefix of its reply', () => {
    const step = planScriptedStep([user('hello'), assistantText('not mine')], 30);
    expect(step).toMatchObject({ kind: 'text', remainder: scriptedReplyText(['hello'], 30) });
  });
});
