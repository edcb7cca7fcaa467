// What the chat's status region says (ADR-0038), batched like the events it comes from: the
// follower applies the events of one network read as one change, so the page renders once for
// them. The sentences those events say go out together, in one update of the region; one by one,
// all but the last would be replaced before the page showed them.

/** The most sentences said at once: a reconnect after a long gap can bring many events. */
export const batchSentencesMax = 3;

/**
 * A `say(sentence)` that collects the sentences said until the current task's microtasks run,
 * then sets the region once to the last few of them, a repeated sentence said once.
 */
export function createAnnouncer(set: (text: string) => void): (sentence: string) => void {
  let batch: string[] = [];
  return (sentence) => {
    if (batch.length === 0) {
      queueMicrotask(() => {
        set(batch.slice(-batchSentencesMax).join(' '));
        batch = [];
      });
    }
    if (batch.at(-1) !== sentence) batch.push(sentence);
  };
}
