// The status region's sentences go out once per batch of events, as the page renders them.
import { describe, expect, it } from 'vitest';
import { batchSentencesMax, createAnnouncer } from '../src/lib/announcer';

/** Say `sentences` in one task, as the events of one read are applied; what the region was set to. */
async function sayInOneBatch(sentences: string[]): Promise<string[]> {
  const set: string[] = [];
  const say = createAnnouncer((text) => set.push(text));
  for (const sentence of sentences) say(sentence);
  expect(set).toEqual([]); // nothing until the batch is over
  await Promise.resolve();
  return set;
}

describe('createAnnouncer', () => {
  it('says the sentences of one batch together, once', async () => {
    expect(await sayInOneBatch(['Assistant replied.', 'Assistant is replying…'])).toEqual([
      'Assistant replied. Assistant is replying…',
    ]);
  });

  it('says a sentence repeated in a row once, and only the last few of a long batch', async () => {
    expect(await sayInOneBatch(['Assistant is replying…', 'Assistant is replying…'])).toEqual(['Assistant is replying…']);
    const many = Array.from({ length: 8 }, (_, i) => `Sentence ${i + 1}.`);
    expect(await sayInOneBatch(many)).toEqual([many.slice(-batchSentencesMax).join(' ')]);
  });

  it('says each batch in its own update', async () => {
    const set: string[] = [];
    const say = createAnnouncer((text) => set.push(text));
    say('Assistant is replying…');
    await Promise.resolve();
    say('Assistant replied.');
    await Promise.resolve();
    expect(set).toEqual(['Assistant is replying…', 'Assistant replied.']);
  });
});
