// A thread of closed turns, for tests of what a prompt leaves out to fit a model's context window
// (ADR-0067, ADR-0069): each turn a 212-character question ("question N: qqq…") answered with a
// 210-character answer ("answer N: aaa…") by a mock model.
import { MockLanguageModelV3 } from 'ai/test';
import { startTurn } from '../../src/queue/start-turn.js';
import type { Db } from '../../src/store/db.js';
import { runSegment } from '../../src/turn/run-segment.js';
import { newOwner } from '../../src/turn/runtime.js';
import { answering } from './mock-streams.js';
import { makeRuntime } from './turn-kit.js';

export const longQuestion = (i: number): string => `question ${i}: ${'q'.repeat(200)}`;
export const longAnswer = (i: number): string => `answer ${i}: ${'a'.repeat(200)}`;

/** A new thread of `turns` closed turns of `ownerId`; its id. */
export async function threadOfTurns(db: Db, turns: number, ownerId: string): Promise<string> {
  let threadId: string | undefined;
  for (let i = 1; i <= turns; i++) {
    const started = await startTurn(db, { ...(threadId ? { threadId } : {}), ownerId, text: longQuestion(i) });
    threadId = started.threadId;
    const model = new MockLanguageModelV3({ doStream: async () => answering([longAnswer(i)]) });
    const outcome = await runSegment(makeRuntime(db, { model }), { runId: started.runId, owner: newOwner('earlier') });
    if (outcome.kind !== 'closed' || outcome.status !== 'completed') throw new Error(`turn ${i} did not complete: ${JSON.stringify(outcome)}`);
  }
  if (!threadId) throw new Error('a thread needs at least one turn');
  return threadId;
}
